// Convolution, pooling and batch normalisation as direct loops: Float64
// (oneDNN has no f64) and any Float32 case oneDNN refuses. Each output
// element is computed by one thread from its inputs (a gather, no
// scattering), with sums in double, so results are the same bits at any
// thread count. Work is split over (sample, channel) pairs or channels on
// flx's pool (cpu_pool.hpp).
#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_dnn.hpp"
#include "cpu_lanes.hpp"

namespace flx::cpu_backend {

// Max pooling's window rule (pool_max_takes, pool_max_sends), the body that
// CUDA's and OpenCL's pooling kernels compile too.
namespace window {
#define FLX_ELEM_FN template <class CT> inline
#include "flx/backend_window.h"
#undef FLX_ELEM_FN
}  // namespace window

namespace {

// Offset of spatial point (p0, p1, p2) in channel c of sample n of a
// (sizes..., channels, batch) tensor.
inline int64_t at(const int64_t* sizes, int64_t p0, int64_t p1, int64_t p2, int64_t c, int64_t channels, int64_t n) {
  return (((n * channels + c) * sizes[2] + p2) * sizes[1] + p1) * sizes[0] + p0;
}

// Calls f(input offset within a channel plane) for every tap of output
// point o's window that falls inside the input, in window order (dim 0
// fastest: row-major's last index first, as the libraries scan).
template <class F>
inline void each_inside_tap(const DnnGeometry& g, const int64_t* o, F&& f) {
  for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
    const int64_t i2 = o[2] * g.stride[2] - g.pad_lo[2] + k2 * g.dilation[2];
    if (i2 < 0 || i2 >= g.in[2]) continue;
    for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
      const int64_t i1 = o[1] * g.stride[1] - g.pad_lo[1] + k1 * g.dilation[1];
      if (i1 < 0 || i1 >= g.in[1]) continue;
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
        const int64_t i0 = o[0] * g.stride[0] - g.pad_lo[0] + k0 * g.dilation[0];
        if (i0 < 0 || i0 >= g.in[0]) continue;
        f((i2 * g.in[1] + i1) * g.in[0] + i0, (k2 * g.kernel[1] + k1) * g.kernel[0] + k0);
      }
    }
  }
}

// Calls f(output point offset within a plane) for every output point.
template <class F>
inline void each_out(const DnnGeometry& g, F&& f) {
  int64_t o[3];
  int64_t off = 0;
  for (o[2] = 0; o[2] < g.out[2]; ++o[2])
    for (o[1] = 0; o[1] < g.out[1]; ++o[1])
      for (o[0] = 0; o[0] < g.out[0]; ++o[0]) f(o, off++);
}

// The output index a dim's input index i reaches through tap k, or -1.
inline int64_t out_of(const DnnGeometry& g, int d, int64_t i, int64_t k) {
  const int64_t t = i + g.pad_lo[d] - k * g.dilation[d];
  if (t < 0 || t % g.stride[d]) return -1;
  const int64_t o = t / g.stride[d];
  return o < g.out[d] ? o : -1;
}

}  // namespace

template <class T>
void direct_conv_forward(const DnnGeometry& g, const T* x, const T* w, const T* b, T* y) {
  const int64_t cin_g = g.cin / g.groups, cout_g = g.cout / g.groups, kn = g.kernel_numel();
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  parallel_for(g.batch * g.cout, grain_of(plane_out * cin_g * kn), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t n = item / g.cout, co = item % g.cout, grp = co / cout_g;
      T* yp = y + (n * g.cout + co) * plane_out;
      each_out(g, [&](const int64_t* o, int64_t oo) {
        double acc = b ? double(b[co]) : 0.0;
        for (int64_t ci = 0; ci < cin_g; ++ci) {
          const T* xp = x + (n * g.cin + grp * cin_g + ci) * plane_in;
          const T* wp = w + (co * cin_g + ci) * kn;
          each_inside_tap(g, o, [&](int64_t ii, int64_t k) { acc += double(xp[ii]) * double(wp[k]); });
        }
        yp[oo] = T(acc);
      });
    }
  });
}

template <class T>
void direct_conv_backward_data(const DnnGeometry& g, const T* dy, const T* w, T* dx) {
  const int64_t cin_g = g.cin / g.groups, cout_g = g.cout / g.groups, kn = g.kernel_numel();
  const int64_t plane_in = g.in_numel();
  parallel_for(g.batch * g.cin, grain_of(plane_in * cout_g * kn), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t n = item / g.cin, ci = item % g.cin, grp = ci / cin_g, cil = ci % cin_g;
      T* dxp = dx + item * plane_in;
      int64_t i[3];
      for (i[2] = 0; i[2] < g.in[2]; ++i[2])
        for (i[1] = 0; i[1] < g.in[1]; ++i[1])
          for (i[0] = 0; i[0] < g.in[0]; ++i[0]) {
            double acc = 0;
            for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
              const int64_t o2 = out_of(g, 2, i[2], k2);
              if (o2 < 0) continue;
              for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
                const int64_t o1 = out_of(g, 1, i[1], k1);
                if (o1 < 0) continue;
                for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
                  const int64_t o0 = out_of(g, 0, i[0], k0);
                  if (o0 < 0) continue;
                  const int64_t k = (k2 * g.kernel[1] + k1) * g.kernel[0] + k0;
                  for (int64_t co = grp * cout_g; co < (grp + 1) * cout_g; ++co)
                    acc += double(dy[at(g.out, o0, o1, o2, co, g.cout, n)]) * double(w[(co * cin_g + cil) * kn + k]);
                }
              }
            }
            *dxp++ = T(acc);
          }
    }
  });
}

template <class T>
void direct_conv_backward_filter(const DnnGeometry& g, const T* x, const T* dy, T* dw, T* db) {
  const int64_t cin_g = g.cin / g.groups, cout_g = g.cout / g.groups, kn = g.kernel_numel();
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  parallel_for(g.cout * cin_g, grain_of(g.batch * plane_out * kn), [&](int64_t lo, int64_t hi) {
    std::vector<double> acc(static_cast<size_t>(kn));
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t co = item / cin_g, cil = item % cin_g, ci = (co / cout_g) * cin_g + cil;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.batch; ++n) {
        const T* xp = x + (n * g.cin + ci) * plane_in;
        const T* dyp = dy + (n * g.cout + co) * plane_out;
        each_out(g, [&](const int64_t* o, int64_t oo) {
          const double d = double(dyp[oo]);
          each_inside_tap(g, o, [&](int64_t ii, int64_t k) { acc[size_t(k)] += double(xp[ii]) * d; });
        });
      }
      for (int64_t k = 0; k < kn; ++k) dw[item * kn + k] = T(acc[size_t(k)]);
    }
  });
  if (!db) return;
  parallel_for(g.cout, grain_of(g.batch * plane_out), [&](int64_t lo, int64_t hi) {
    for (int64_t co = lo; co < hi; ++co) {
      double s = 0;
      for (int64_t n = 0; n < g.batch; ++n)
        for (int64_t p = 0; p < plane_out; ++p) s += double(dy[(n * g.cout + co) * plane_out + p]);
      db[co] = T(s);
    }
  });
}

namespace {
// The maximum of output point o's window and the offset of the element
// that holds it, by backend_window.h's rule (padding never wins; a NaN in
// the window gives its first NaN; ties go to the first maximum; a window
// of padding only gives -Inf and the offset -1).
template <class T>
inline T window_max(const DnnGeometry& g, const T* xp, const int64_t* o, int64_t* where = nullptr) {
  T best = -std::numeric_limits<T>::infinity();
  int64_t at = -1;
  each_inside_tap(g, o, [&](int64_t ii, int64_t) {
    const T v = xp[ii];
    if (window::pool_max_takes(v, best, at < 0)) best = v, at = ii;
  });
  if (where) *where = at;
  return best;
}
}  // namespace

namespace {

// Max pooling without padding, where every tap of every window is inside
// the input: the taps' offsets are computed once, and each window is
// scanned in the same order with the same NaN rule as window_max (so the
// results are those of the general loops, faster: no bounds checks).
bool unpadded(const DnnGeometry& g) {
  for (int i = 0; i < 3; ++i)
    if (g.pad_lo[i] || g.pad_hi[i]) return false;
  return true;
}

struct Taps {
  std::vector<int64_t> offsets;  // in window order, dim 0 fastest
  int64_t step[3];               // input offset of one output step per dim
};
Taps taps_of(const DnnGeometry& g) {
  Taps t;
  for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2)
    for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
        t.offsets.push_back(((k2 * g.dilation[2]) * g.in[1] + k1 * g.dilation[1]) * g.in[0] + k0 * g.dilation[0]);
  t.step[0] = g.stride[0];
  t.step[1] = g.stride[1] * g.in[0];
  t.step[2] = g.stride[2] * g.in[1] * g.in[0];
  return t;
}

// Calls f(window base offset, output offset) for every output point of a plane.
template <class F>
inline void each_window(const DnnGeometry& g, const Taps& t, F&& f) {
  int64_t oo = 0;
  for (int64_t o2 = 0; o2 < g.out[2]; ++o2)
    for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
      const int64_t row = o2 * t.step[2] + o1 * t.step[1];
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0) f(row + o0 * t.step[0], oo++);
    }
}

// The scan of one window without branches on the data (random data would
// mispredict about half of them), backend_window.h's rule in another form:
// the running maximum and the first tap
// that holds it (a strict >: later equal values, -0 against 0 included, do
// not move it, as window_max's first tap equal to the maximum), and whether
// a NaN was seen (then the result is NaN and no tap takes the gradient).
// Without the hint that the comparison is a coin toss, the compiler made
// the index's update a branch in the backward loop (a quarter of a CNN
// training step, mispredicted); with it, conditional moves.
// T is the storage type; the halves compare their (exact) float values.
template <class T>
struct WindowScan {
  using C = compute_t<T>;
  C best = -std::numeric_limits<C>::infinity();
  int64_t first = 0;
  bool nan = false;
  WindowScan(const T* base, const Taps& t) {
    const int64_t n = int64_t(t.offsets.size());
    const int64_t* off = t.offsets.data();
    int nans = 0;
    for (int64_t k = 0; k < n; ++k) {
      const C v = load(base[off[k]]);
      nans |= int(v != v);
      const bool above = __builtin_expect_with_probability(v > best, 1, 0.5);
      first = above ? k : first;
      best = above ? v : best;
    }
    nan = nans != 0;
  }
};

// 2x2 windows at stride 2 over (W, H) planes, the common case: each input
// element is in one window at most, so each element of dx is written once,
// as the window's gradient or 0, without a fill and a scatter, in a loop
// the compiler vectorises. The rule is WindowScan's: the first strict
// maximum in window order (a b on the first row, c d on the second) takes
// the gradient, none when the window holds a NaN.
bool pool_2x2_stride_2(const DnnGeometry& g) {
  return g.kernel[0] == 2 && g.kernel[1] == 2 && g.kernel[2] == 1 && g.stride[0] == 2 && g.stride[1] == 2 &&
         g.dilation[0] == 1 && g.dilation[1] == 1 && g.in[2] == 1 && unpadded(g);
}

template <class T>
void max_pool_2x2_backward_plane(const DnnGeometry& g, const T* xp, const T* dyp, T* dxp) {
  using C = compute_t<T>;
  const T zero = store<T>(C(0));
  const int64_t W = g.in[0], H = g.in[1], OW = g.out[0], OH = g.out[1];
  for (int64_t o1 = 0; o1 < OH; ++o1) {
    const T* x0 = xp + 2 * o1 * W;
    const T* x1 = x0 + W;
    T* d0 = dxp + 2 * o1 * W;
    T* d1 = d0 + W;
    const T* gy = dyp + o1 * OW;
    for (int64_t o0 = 0; o0 < OW; ++o0) {
      const C a = load(x0[2 * o0]), b = load(x0[2 * o0 + 1]), c = load(x1[2 * o0]), d = load(x1[2 * o0 + 1]);
      const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
      C best = a;
      int first = 0;
      first = b > best ? 1 : first;
      best = b > best ? b : best;
      first = c > best ? 2 : first;
      best = c > best ? c : best;
      first = d > best ? 3 : first;
      const T grad = nan ? zero : store<T>(load(gy[o0]));  // a half's NaN as narrowing makes it
      d0[2 * o0] = first == 0 ? grad : zero;
      d0[2 * o0 + 1] = first == 1 ? grad : zero;
      d1[2 * o0] = first == 2 ? grad : zero;
      d1[2 * o0 + 1] = first == 3 ? grad : zero;
    }
    for (int64_t i = 2 * OW; i < W; ++i) d0[i] = d1[i] = zero;  // an odd last column: in no window
  }
  std::fill(dxp + 2 * OH * W, dxp + H * W, zero);  // an odd last row
}

// BFloat16 2x2 windows at stride 2 on the bits, 8 windows at a time: the
// two neighbours of a window's row are one 32-bit word (low half first), a
// BFloat16's float is its bits shifted up, so every step is a shift, a
// compare or a select on 8 lanes (through BHalf's conversions, element by
// element, these loops took a fifth of a BFloat16 CNN training step). The
// rule is WindowScan's above: the first strict maximum in window order (a b,
// then c d), the first NaN where there is one, NaNs as narrowing makes them
// (the quiet NaN with its sign). A row's last windows, fewer than 8, go
// through the same lanes from copies padded with zeros.
using v8i = int32_t __attribute__((vector_size(32)));
using v8f = float __attribute__((vector_size(32)));

struct Bf16Windows {
  v8i a, b, c, d;  // the taps' bits, in window order
  v8i first;       // the tap of the first strict maximum
  v8i nan;         // -1 where the window holds a NaN
  static v8i is_nan(v8i h) { return (h & 0x7fff) > 0x7f80; }
  static v8i quiet(v8i h) { return is_nan(h) ? (h & 0x8000) | 0x7fc0 : h; }
  // The windows over the two rows' words (2 taps each).
  Bf16Windows(v8i w0, v8i w1) {
    a = w0 & 0xffff, b = (w0 >> 16) & 0xffff, c = w1 & 0xffff, d = (w1 >> 16) & 0xffff;
    const v8f fa = (v8f)(a << 16), fb = (v8f)(b << 16), fc = (v8f)(c << 16), fd = (v8f)(d << 16);
    nan = (fa != fa) | (fb != fb) | (fc != fc) | (fd != fd);
    const v8i zero{};
    v8f best = fa;
    first = zero;
    v8i m = fb > best;
    first = m ? zero + 1 : first;
    best = m ? fb : best;
    m = fc > best;
    first = m ? zero + 2 : first;
    best = m ? fc : best;
    m = fd > best;
    first = m ? zero + 3 : first;
  }
  v8i result() const {
    const v8i first_nan = quiet(is_nan(a) ? a : is_nan(b) ? b : is_nan(c) ? c : d);
    const v8i pick = first == 0 ? a : first == 1 ? b : first == 2 ? c : d;
    return nan ? first_nan : pick;
  }
};

// The 32-bit words of n BFloat16s at p (n <= 16): one 32-byte load where the
// buffer (ending at end) holds 16, whatever n (the lanes past n hold the
// next row's values; their results are never stored), so that a row of 7 or
// 14 windows (a CNN's pooled planes) is one or two loads, not a call to
// memcpy; zeros past n at the buffer's end.
inline v8i bf16_words(const BHalf* p, int64_t n, const BHalf* end) {
  v8i w{};
  if (end - p >= 16) std::memcpy(&w, static_cast<const void*>(p), 32);
  else std::memcpy(&w, static_cast<const void*>(p), size_t(n) * 2);
  return w;
}

// f(o0, windows, count) for the windows of one row of outputs, 8 at a time.
template <class F>
[[gnu::always_inline]] inline void each_bf16_window_row(int64_t OW, const BHalf* x0, const BHalf* x1,
                                                         const BHalf* end, F&& f) {
  for (int64_t o0 = 0; o0 < OW; o0 += 8) {
    const int64_t n = std::min<int64_t>(8, OW - o0);
    f(o0, Bf16Windows(bf16_words(x0 + 2 * o0, 2 * n, end), bf16_words(x1 + 2 * o0, 2 * n, end)), n);
  }
}

// One plane of outputs; x_end is the end of x's buffer. AVX2 copies picked
// at run time (integer steps and comparisons only: the same bits in both).
__attribute__((target_clones("avx2", "default"))) void max_pool_2x2_forward_plane(const DnnGeometry& g,
                                                                                   const BHalf* xp,
                                                                                   const BHalf* x_end, BHalf* yp) {
  const int64_t W = g.in[0], OW = g.out[0], OH = g.out[1];
  for (int64_t o1 = 0; o1 < OH; ++o1) {
    BHalf* y = yp + o1 * OW;
    each_bf16_window_row(OW, xp + 2 * o1 * W, xp + (2 * o1 + 1) * W, x_end,
                         [&](int64_t o0, const Bf16Windows& w, int64_t n) {
                           const v8i r = w.result();
                           for (int64_t i = 0; i < n; ++i) y[o0 + i].bits = uint16_t(r[i]);
                         });
  }
}

__attribute__((target_clones("avx2", "default"))) void max_pool_2x2_backward_plane(
    const DnnGeometry& g, const BHalf* xp, const BHalf* x_end, const BHalf* dyp, const BHalf* dy_end, BHalf* dxp) {
  const int64_t W = g.in[0], H = g.in[1], OW = g.out[0], OH = g.out[1];
  const uint16_t* gy_end = reinterpret_cast<const uint16_t*>(dy_end);
  for (int64_t o1 = 0; o1 < OH; ++o1) {
    BHalf* d0 = dxp + 2 * o1 * W;
    BHalf* d1 = d0 + W;
    const uint16_t* gy = reinterpret_cast<const uint16_t*>(dyp + o1 * OW);
    each_bf16_window_row(OW, xp + 2 * o1 * W, xp + (2 * o1 + 1) * W, x_end,
                         [&](int64_t o0, const Bf16Windows& w, int64_t n) {
                           using v8h = uint16_t __attribute__((vector_size(16)));
                           v8h h{};
                           if (gy_end - (gy + o0) >= 8) std::memcpy(&h, gy + o0, 16);
                           else std::memcpy(&h, gy + o0, size_t(n) * 2);
                           const v8i zero{};
                           v8i grad = __builtin_convertvector(h, v8i);
                           grad = w.nan ? zero : w.quiet(grad);
                           // a row's two taps as one word: (left, right) = (low, high)
                           const v8i row0 = (w.first == 0 ? grad : zero) | (w.first == 1 ? grad : zero) << 16;
                           const v8i row1 = (w.first == 2 ? grad : zero) | (w.first == 3 ? grad : zero) << 16;
                           if (n == 8) {
                             std::memcpy(static_cast<void*>(d0 + 2 * o0), &row0, 32);
                             std::memcpy(static_cast<void*>(d1 + 2 * o0), &row1, 32);
                           } else {
                             for (int64_t i = 0; i < n; ++i) {
                               const uint32_t w0 = uint32_t(row0[i]), w1 = uint32_t(row1[i]);
                               std::memcpy(static_cast<void*>(d0 + 2 * (o0 + i)), &w0, 4);
                               std::memcpy(static_cast<void*>(d1 + 2 * (o0 + i)), &w1, 4);
                             }
                           }
                         });
    for (int64_t i = 2 * OW; i < W; ++i) d0[i] = d1[i] = BHalf(0.f);  // an odd last column: in no window
  }
  std::fill(dxp + 2 * OH * W, dxp + H * W, BHalf(0.f));  // an odd last row
}

template <class T>
void unpadded_max_pool_forward(const DnnGeometry& g, const T* x, T* y) {
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  const Taps t = taps_of(g);
  const bool two_by_two = pool_2x2_stride_2(g);
  parallel_for(g.batch * g.cin, grain_of(plane_out * g.kernel_numel()), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const T* xp = x + item * plane_in;
      T* yp = y + item * plane_out;
      if constexpr (std::is_same_v<T, BHalf>)
        if (two_by_two) {
          max_pool_2x2_forward_plane(g, xp, x + g.batch * g.cin * plane_in, yp);
          continue;
        }
      each_window(g, t, [&](int64_t base, int64_t oo) {
        const WindowScan<T> w(xp + base, t);
        if (!w.nan) {
          yp[oo] = store<T>(w.best);
          return;
        }
        for (int64_t off : t.offsets)  // the first NaN, as window_max keeps it
          if (std::isnan(load(xp[base + off]))) {
            yp[oo] = store<T>(load(xp[base + off]));  // a half's NaN as narrowing makes it
            return;
          }
      });
    }
  });
}

template <class T>
void unpadded_max_pool_backward(const DnnGeometry& g, const T* x, const T* dy, T* dx) {
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  const Taps t = taps_of(g);
  const bool two_by_two = pool_2x2_stride_2(g);
  parallel_for(g.batch * g.cin, grain_of(plane_out * g.kernel_numel()), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const T* xp = x + item * plane_in;
      const T* dyp = dy + item * plane_out;
      T* dxp = dx + item * plane_in;
      if (two_by_two) {
        if constexpr (std::is_same_v<T, BHalf>)
          max_pool_2x2_backward_plane(g, xp, x + g.batch * g.cin * plane_in, dyp, dy + g.batch * g.cin * plane_out, dxp);
        else
          max_pool_2x2_backward_plane(g, xp, dyp, dxp);
        continue;
      }
      if constexpr (std::is_floating_point_v<T>) {  // (halves come here as 2x2 windows only)
        std::fill(dxp, dxp + plane_in, T(0));
        each_window(g, t, [&](int64_t base, int64_t oo) {
          const WindowScan<T> w(xp + base, t);  // to the first largest element only
          if (!w.nan) dxp[base + t.offsets[size_t(w.first)]] += dyp[oo];
        });
      }
    }
  });
}

}  // namespace

template <class T>
void direct_pool_forward(const DnnGeometry& g, bool max, const T* x, T* y) {
  if (max && unpadded(g)) return unpadded_max_pool_forward(g, x, y);
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  const double window = double(g.kernel_numel());
  parallel_for(g.batch * g.cin, grain_of(plane_out * g.kernel_numel()), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const T* xp = x + item * plane_in;
      T* yp = y + item * plane_out;
      each_out(g, [&](const int64_t* o, int64_t oo) {
        if (max) {
          yp[oo] = window_max(g, xp, o);
        } else {
          double s = 0;
          each_inside_tap(g, o, [&](int64_t ii, int64_t) { s += double(xp[ii]); });
          yp[oo] = T(s / window);
        }
      });
    }
  });
}

template <class T>
void direct_pool_backward(const DnnGeometry& g, bool max, const T* x, const T* dy, T* dx) {
  if (max && unpadded(g)) return unpadded_max_pool_backward(g, x, dy, dx);
  const int64_t plane_in = g.in_numel(), plane_out = g.out_numel();
  const double window = double(g.kernel_numel());
  // One (sample, channel) plane per item: its windows scatter into its own
  // plane of dx only, in a fixed order.
  parallel_for(g.batch * g.cin, grain_of(plane_out * g.kernel_numel()), [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const T* xp = x + item * plane_in;
      const T* dyp = dy + item * plane_out;
      T* dxp = dx + item * plane_in;
      std::fill(dxp, dxp + plane_in, T(0));
      each_out(g, [&](const int64_t* o, int64_t oo) {
        if (max) {
          int64_t at;  // to the window's maximum only, none when it is NaN
          const T best = window_max(g, xp, o, &at);
          if (at >= 0 && window::pool_max_sends(best)) dxp[at] += dyp[oo];
        } else {
          const T share = T(double(dyp[oo]) / window);
          each_inside_tap(g, o, [&](int64_t ii, int64_t) { dxp[ii] += share; });
        }
      });
    }
  });
}

// Batch normalisation: one channel to a thread; x's channel c is the rows
// (n * C + c) * S ... + S of each sample n.
template <class T, class P>
void direct_batchnorm_forward(const flx_batchnorm_desc& d, const T* x, T* y, const P* scale, const P* bias,
                              P* running_mean, P* running_var, P* saved_mean, P* saved_invstd) {
  const int64_t S = d.spatial, C = d.channels, N = d.batch, m = S * N;
  parallel_for(C, grain_of(m), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double mean, var;
      if (d.training) {
        Lanes s;
        for (int64_t n = 0; n < N; ++n) {
          const T* xr = x + (n * C + c) * S;
          s.add(S, [&](int64_t p) { return double(load(xr[p])); });
        }
        mean = s.total() / double(m);
        Lanes q;
        for (int64_t n = 0; n < N; ++n) {
          const T* xr = x + (n * C + c) * S;
          q.add(S, [&](int64_t p) {
            const double e = double(load(xr[p])) - mean;
            return e * e;
          });
        }
        var = q.total() / double(m);
        if (running_mean && running_var) {
          const double mo = d.momentum, unbiased = m > 1 ? var * double(m) / double(m - 1) : var;
          running_mean[c] = P((1 - mo) * double(running_mean[c]) + mo * mean);
          running_var[c] = P((1 - mo) * double(running_var[c]) + mo * unbiased);
        }
      } else {
        mean = double(running_mean[c]);
        var = double(running_var[c]);
      }
      const double invstd = 1 / std::sqrt(var + d.epsilon);
      if (d.training && saved_mean) saved_mean[c] = P(mean);
      if (d.training && saved_invstd) saved_invstd[c] = P(invstd);
      const double a = (scale ? double(scale[c]) : 1.0) * invstd, b = bias ? double(bias[c]) : 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        T* yr = y + (n * C + c) * S;
        for (int64_t p = 0; p < S; ++p) yr[p] = store<T>(compute_t<T>((double(load(xr[p])) - mean) * a + b));
      }
    }
  });
}

template <class T, class P>
void direct_batchnorm_backward(const flx_batchnorm_desc& d, const T* x, const T* dy, const P* scale,
                               const P* saved_mean, const P* saved_invstd, T* dx, P* dscale, P* dbias) {
  const int64_t S = d.spatial, C = d.channels, N = d.batch, m = S * N;
  parallel_for(C, grain_of(m), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      const double mean = double(saved_mean[c]), invstd = double(saved_invstd[c]);
      Lanes sdy, sdyx;  // Σ dy and Σ dy (x - mean)
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        const T* dyr = dy + (n * C + c) * S;
        sdy.add(S, [&](int64_t p) { return double(load(dyr[p])); });
        sdyx.add(S, [&](int64_t p) { return double(load(dyr[p])) * (double(load(xr[p])) - mean); });
      }
      const double sum_dy = sdy.total(), sum_dy_xhat = sdyx.total() * invstd;
      if (dscale) dscale[c] = P(sum_dy_xhat);
      if (dbias) dbias[c] = P(sum_dy);
      // dx = a (dy - Σdy / m - xhat Σ(dy xhat) / m), xhat = (x - mean) invstd
      const double a = (scale ? double(scale[c]) : 1.0) * invstd, k = invstd * sum_dy_xhat / double(m);
      const double shift = sum_dy / double(m);
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        const T* dyr = dy + (n * C + c) * S;
        T* dxr = dx + (n * C + c) * S;
        for (int64_t p = 0; p < S; ++p) dxr[p] = store<T>(compute_t<T>(a * (double(load(dyr[p])) - shift - (double(load(xr[p])) - mean) * k)));
      }
    }
  });
}

// Max pooling of Float16 and BFloat16 on the halves themselves, where the
// Float32 pass on widened copies would only pick and copy values (so its
// result, rounded back, is these bits): the forward of unpadded windows,
// and the backward of 2x2 windows at stride 2, where no input is in two
// windows. False for the rest, which the widened copies run.
template <class T>
bool half_max_pool_direct(const DnnGeometry& g, bool backward, const T* x, const T* dy, T* out) {
  if (!unpadded(g) || (backward && !pool_2x2_stride_2(g))) return false;
  if (!backward) {
    unpadded_max_pool_forward(g, x, out);
    return true;
  }
  unpadded_max_pool_backward(g, x, dy, out);
  return true;
}
template bool half_max_pool_direct<Half>(const DnnGeometry&, bool, const Half*, const Half*, Half*);
template bool half_max_pool_direct<BHalf>(const DnnGeometry&, bool, const BHalf*, const BHalf*, BHalf*);

#define FLX_DNN_DIRECT_(T)                                                                                           \
  template void direct_conv_forward<T>(const DnnGeometry&, const T*, const T*, const T*, T*);                        \
  template void direct_conv_backward_data<T>(const DnnGeometry&, const T*, const T*, T*);                            \
  template void direct_conv_backward_filter<T>(const DnnGeometry&, const T*, const T*, T*, T*);                      \
  template void direct_pool_forward<T>(const DnnGeometry&, bool, const T*, T*);                                      \
  template void direct_pool_backward<T>(const DnnGeometry&, bool, const T*, const T*, T*);                           \
  FLX_DNN_BATCHNORM_(T, T)
#define FLX_DNN_BATCHNORM_(T, P)                                                                                      \
  template void direct_batchnorm_forward<T, P>(const flx_batchnorm_desc&, const T*, T*, const P*, const P*, P*, P*, P*, \
                                               P*);                                                                  \
  template void direct_batchnorm_backward<T, P>(const flx_batchnorm_desc&, const T*, const T*, const P*, const P*,    \
                                                const P*, T*, P*, P*);
FLX_DNN_DIRECT_(float)
FLX_DNN_DIRECT_(double)
FLX_DNN_BATCHNORM_(Half, float)
FLX_DNN_BATCHNORM_(BHalf, float)
#undef FLX_DNN_DIRECT_
#undef FLX_DNN_BATCHNORM_

}  // namespace flx::cpu_backend

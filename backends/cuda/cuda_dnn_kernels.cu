// The dnn table's own kernels (see cuda_dnn_kernels.hpp). Simple
// grid-stride loops: every max pooling (the shared window rule, which
// cuDNN's does not follow), mean pooling cuDNN cannot express, per-side
// padding and one-element batch norms.
#include <cmath>

#include "cuda_dnn_kernels.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda {

// Max pooling's window rule (pool_max_takes, pool_max_sends), the body that
// the CPU's and OpenCL's pooling compile too.
namespace window {
#define FLX_ELEM_FN template <class CT> __device__ inline
#include "flx/backend_window.h"
#undef FLX_ELEM_FN
}  // namespace window

namespace {

// Copy between a box and a box padded around it, by element bits (padding
// and cropping move elements unchanged, whatever their dtype).
template <class U>
__global__ void pad_crop_kernel(const U* src, U* dst, DnnBox inner, DnnBox padded, int64_t lo0, int64_t lo1,
                                int64_t lo2, bool pad) {
  // pad: one thread per padded element (zero outside the inner box);
  // crop: one per inner element.
  const DnnBox& b = pad ? padded : inner;
  const int64_t n = b.numel();
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    int64_t r = i;
    const int64_t p0 = r % b.size[0]; r /= b.size[0];
    const int64_t p1 = r % b.size[1]; r /= b.size[1];
    const int64_t p2 = r % b.size[2]; r /= b.size[2];
    const int64_t c = r;
    if (pad) {
      const int64_t q0 = p0 - lo0, q1 = p1 - lo1, q2 = p2 - lo2;
      const bool inside = q0 >= 0 && q0 < inner.size[0] && q1 >= 0 && q1 < inner.size[1] && q2 >= 0 &&
                          q2 < inner.size[2];
      dst[i] = inside ? src[((c * inner.size[2] + q2) * inner.size[1] + q1) * inner.size[0] + q0] : U(0);
    } else {
      dst[i] = src[((c * padded.size[2] + p2 + lo2) * padded.size[1] + p1 + lo1) * padded.size[0] + p0 + lo0];
    }
  }
}

template <class U>
int pad_crop(cudaStream_t st, const void* src, void* dst, const DnnBox& inner, const DnnBox& padded,
             const int64_t lo[3], bool pad) {
  const int64_t n = pad ? padded.numel() : inner.numel();
  if (n == 0) return FLX_OK;
  pad_crop_kernel<U><<<blocks_for(n), 256, 0, st>>>(static_cast<const U*>(src), static_cast<U*>(dst), inner,
                                                    padded, lo[0], lo[1], lo[2], pad);
  return launched(pad ? "dnn padding kernel" : "dnn cropping kernel");
}

int pad_crop_any(cudaStream_t st, const void* src, void* dst, const DnnBox& inner, const DnnBox& padded,
                 const int64_t lo[3], size_t elem_bytes, bool pad) {
  switch (elem_bytes) {
    case 2: return pad_crop<uint16_t>(st, src, dst, inner, padded, lo, pad);
    case 4: return pad_crop<uint32_t>(st, src, dst, inner, padded, lo, pad);
    case 8: return pad_crop<uint64_t>(st, src, dst, inner, padded, lo, pad);
  }
  return fail(FLX_ERR_UNSUPPORTED, "dnn padding: elements of " + std::to_string(elem_bytes) +
                                       " bytes; only 2, 4 and 8 (the floating dtypes) are padded");
}

// The maximum of window (o0, o1, o2) of plane c by backend_window.h's rule,
// in window order (dim 0 fastest), padding skipped: the offset in x of the
// element that takes its gradient, or -1 when none does (the window is
// wholly padding, or its maximum is NaN: equal to no element, backend.h's
// reference sends its dy nowhere).
template <class T>
__device__ int64_t window_argmax(const T* x, const DnnPoolGeom& g, int64_t c, int64_t o0, int64_t o1, int64_t o2,
                                 compute_t<T>* best_out) {
  using C = compute_t<T>;
  C best = C(-INFINITY);
  int64_t pos = -1;
  for (int64_t k2 = 0; k2 < g.window[2]; ++k2) {
    const int64_t i2 = o2 * g.stride[2] - g.lo[2] + k2;
    if (i2 < 0 || i2 >= g.in.size[2]) continue;
    for (int64_t k1 = 0; k1 < g.window[1]; ++k1) {
      const int64_t i1 = o1 * g.stride[1] - g.lo[1] + k1;
      if (i1 < 0 || i1 >= g.in.size[1]) continue;
      for (int64_t k0 = 0; k0 < g.window[0]; ++k0) {
        const int64_t i0 = o0 * g.stride[0] - g.lo[0] + k0;
        if (i0 < 0 || i0 >= g.in.size[0]) continue;
        const int64_t at = ((c * g.in.size[2] + i2) * g.in.size[1] + i1) * g.in.size[0] + i0;
        const C v = load(x[at]);
        if (window::pool_max_takes(v, best, pos < 0)) best = v, pos = at;
      }
    }
  }
  *best_out = best;
  return window::pool_max_sends(best) ? pos : -1;
}

template <class T>
__global__ void pool_forward_kernel(const T* x, T* y, DnnPoolGeom g) {
  using C = compute_t<T>;
  const int64_t n = g.out.numel();
  const double wn = double(g.window[0] * g.window[1] * g.window[2]);
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    int64_t r = i;
    const int64_t o0 = r % g.out.size[0]; r /= g.out.size[0];
    const int64_t o1 = r % g.out.size[1]; r /= g.out.size[1];
    const int64_t o2 = r % g.out.size[2]; r /= g.out.size[2];
    const int64_t c = r;
    if (g.max) {
      C best;
      (void)window_argmax(x, g, c, o0, o1, o2, &best);
      y[i] = store<T>(best);
      continue;
    }
    C sum = C(0);
    for (int64_t k2 = 0; k2 < g.window[2]; ++k2) {
      const int64_t i2 = o2 * g.stride[2] - g.lo[2] + k2;
      if (i2 < 0 || i2 >= g.in.size[2]) continue;
      for (int64_t k1 = 0; k1 < g.window[1]; ++k1) {
        const int64_t i1 = o1 * g.stride[1] - g.lo[1] + k1;
        if (i1 < 0 || i1 >= g.in.size[1]) continue;
        for (int64_t k0 = 0; k0 < g.window[0]; ++k0) {
          const int64_t i0 = o0 * g.stride[0] - g.lo[0] + k0;
          if (i0 >= 0 && i0 < g.in.size[0]) sum += load(x[((c * g.in.size[2] + i2) * g.in.size[1] + i1) * g.in.size[0] + i0]);
        }
      }
    }
    y[i] = store<T>(C(sum / C(wn)));
  }
}

// The outputs whose window covers input index i along one dim: o with
// o * stride - lo <= i <= o * stride - lo + window - 1, within [0, out).
__device__ void covering(int64_t i, int64_t lo, int64_t window, int64_t stride, int64_t out, int64_t* first,
                         int64_t* last) {
  const int64_t hi = i + lo;  // o * stride <= hi and o * stride >= hi - window + 1
  int64_t f = hi - window + 1 <= 0 ? 0 : (hi - window + 1 + stride - 1) / stride;
  int64_t l = hi < 0 ? -1 : hi / stride;
  *first = f;
  *last = l < out - 1 ? l : out - 1;
}

template <class T>
__global__ void pool_backward_kernel(const T* x, const T* dy, T* dx, DnnPoolGeom g) {
  using C = compute_t<T>;
  const int64_t n = g.in.numel();
  const double wn = double(g.window[0] * g.window[1] * g.window[2]);
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    int64_t r = i;
    const int64_t p0 = r % g.in.size[0]; r /= g.in.size[0];
    const int64_t p1 = r % g.in.size[1]; r /= g.in.size[1];
    const int64_t p2 = r % g.in.size[2]; r /= g.in.size[2];
    const int64_t c = r;
    int64_t f0, l0, f1, l1, f2, l2;
    covering(p0, g.lo[0], g.window[0], g.stride[0], g.out.size[0], &f0, &l0);
    covering(p1, g.lo[1], g.window[1], g.stride[1], g.out.size[1], &f1, &l1);
    covering(p2, g.lo[2], g.window[2], g.stride[2], g.out.size[2], &f2, &l2);
    C sum = C(0);
    for (int64_t o2 = f2; o2 <= l2; ++o2)
      for (int64_t o1 = f1; o1 <= l1; ++o1)
        for (int64_t o0 = f0; o0 <= l0; ++o0) {
          const int64_t yo = ((c * g.out.size[2] + o2) * g.out.size[1] + o1) * g.out.size[0] + o0;
          if (g.max) {
            C best;
            if (window_argmax(x, g, c, o0, o1, o2, &best) == i) sum += load(dy[yo]);
          } else {
            sum += C(load(dy[yo]) / C(wn));
          }
        }
    dx[i] = store<T>(sum);
  }
}

template <class T, class P>
__global__ void bn_running_single_kernel(const T* x, P* rm, P* rv, int64_t channels, double momentum) {
  for (int64_t c = global_index(); c < channels; c += global_stride()) {
    const double m = double(load(x[c]));
    rm[c] = P((1 - momentum) * double(rm[c]) + momentum * m);
    rv[c] = P((1 - momentum) * double(rv[c]));
  }
}

// db[c] = the sum of dy over (spatial, batch) for channel c: one block per
// channel, each thread summing a strided share in double, then a tree in
// shared memory (a fixed order: the same bits every run).
template <class T>
__global__ void bias_grad_kernel(const T* dy, T* db, int64_t spatial, int64_t channels, int64_t batch) {
  __shared__ double part[256];
  const int64_t c = blockIdx.x, m = spatial * batch;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const int64_t n = i / spatial, s = i % spatial;
    sum += double(load(dy[(n * channels + c) * spatial + s]));
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = store<T>(part[0]);
}

}  // namespace

int dnn_bias_grad(cudaStream_t st, int32_t dtype, const void* dy, void* db, int64_t spatial, int64_t channels,
                  int64_t batch) {
  if (channels == 0) return FLX_OK;
  const bool known = dispatch_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    bias_grad_kernel<T><<<unsigned(channels), 256, 0, st>>>(static_cast<const T*>(dy), static_cast<T*>(db), spatial,
                                                             channels, batch);
  });
  if (!known) return fail(FLX_ERR_UNSUPPORTED, std::string("bias gradient needs a floating dtype, got ") + dtype_name(dtype));
  return launched("bias gradient kernel");
}

int dnn_pad(cudaStream_t st, const void* src, const DnnBox& inner, void* dst, const DnnBox& padded,
            const int64_t lo[3], size_t elem_bytes) {
  return pad_crop_any(st, src, dst, inner, padded, lo, elem_bytes, true);
}

int dnn_crop(cudaStream_t st, const void* src, const DnnBox& padded, void* dst, const DnnBox& inner,
             const int64_t lo[3], size_t elem_bytes) {
  return pad_crop_any(st, src, dst, inner, padded, lo, elem_bytes, false);
}

int dnn_pool_direct(cudaStream_t st, int32_t dtype, const DnnPoolGeom& g, const void* x, void* y) {
  const int64_t n = g.out.numel();
  if (n == 0) return FLX_OK;
  const bool known = dispatch_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    pool_forward_kernel<T><<<blocks_for(n), 256, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), g);
  });
  if (!known) return fail(FLX_ERR_UNSUPPORTED, std::string("pooling needs a floating dtype, got ") + dtype_name(dtype));
  return launched("pooling kernel");
}

int dnn_pool_direct_backward(cudaStream_t st, int32_t dtype, const DnnPoolGeom& g, const void* x, const void* dy,
                             void* dx) {
  const int64_t n = g.in.numel();
  if (n == 0) return FLX_OK;
  const bool known = dispatch_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    pool_backward_kernel<T><<<blocks_for(n), 256, 0, st>>>(static_cast<const T*>(x), static_cast<const T*>(dy),
                                                           static_cast<T*>(dx), g);
  });
  if (!known) return fail(FLX_ERR_UNSUPPORTED, std::string("pooling needs a floating dtype, got ") + dtype_name(dtype));
  return launched("pooling gradient kernel");
}

int dnn_bn_running_single(cudaStream_t st, int32_t dtype, int32_t param_dtype, int64_t channels, double momentum,
                          const void* x, void* running_mean, void* running_var) {
  if (channels == 0) return FLX_OK;
  bool ok = false;
  dispatch_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto go = [&](auto ptag) {
      using P = decltype(ptag);
      bn_running_single_kernel<T, P><<<blocks_for(channels), 256, 0, st>>>(
          static_cast<const T*>(x), static_cast<P*>(running_mean), static_cast<P*>(running_var), channels, momentum);
      ok = true;
    };
    if (param_dtype == FLX_F64) go(double{});
    else if (param_dtype == FLX_F32) go(float{});
  });
  if (!ok)
    return fail(FLX_ERR_UNSUPPORTED, std::string("batchnorm: dtype ") + dtype_name(dtype) + " with parameters of " +
                                         dtype_name(param_dtype));
  return launched("batchnorm running statistics kernel");
}

namespace {

// One thread per parameter element, in flx's order (wi, wh, b, bh): flx's
// side is read or written coalesced.
template <class U>
__global__ void rnn_pack_kernel(U* wi, U* wh, U* b, U* bh, U* space, DnnRnnPack p, bool to_space) {
  const int64_t H = p.hidden, G = p.gates * H, nwi = G * p.input, nwh = G * H, nb = G, nbh = H;
  for (int64_t i = global_index(); i < nwi + nwh + nb + nbh; i += global_stride()) {
    U* flx;
    int64_t at;
    if (i < nwi + nwh) {  // (row, col) of a column-major (G H, cols) matrix
      const bool rec = i >= nwi;
      U* m = rec ? wh : wi;
      if (!m) continue;  // a gradient not wanted
      const int64_t e = rec ? i - nwi : i, cols = rec ? H : p.input;
      const int64_t row = e % G, col = e / G, g = row / H, r = row % H;
      flx = m + e;
      at = p.w_at[(rec ? p.gates : 0) + g] + r * cols + col;
    } else if (i < nwi + nwh + nb) {
      if (!b) continue;
      const int64_t e = i - nwi - nwh;
      flx = b + e;
      at = p.b_at[e / H] + e % H;
    } else {
      if (!bh) continue;
      const int64_t e = i - nwi - nwh - nb;
      flx = bh + e;
      at = p.bh_at + e;
    }
    if (to_space) space[at] = *flx;
    else *flx = space[at];
  }
}

__global__ void fill_i32_kernel(int32_t* dst, int64_t n, int32_t value) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dst[i] = value;
}

}  // namespace

int dnn_rnn_pack(cudaStream_t st, size_t elem_bytes, const DnnRnnPack& p, void* wi, void* wh, void* b, void* bh,
                 void* space, bool to_space) {
  const int64_t n = p.gates * p.hidden * (p.input + p.hidden + 1) + p.hidden;
  auto go = [&](auto tag) {
    using U = decltype(tag);
    rnn_pack_kernel<U><<<blocks_for(n), 256, 0, st>>>(static_cast<U*>(wi), static_cast<U*>(wh), static_cast<U*>(b),
                                                      static_cast<U*>(bh), static_cast<U*>(space), p, to_space);
  };
  switch (elem_bytes) {
    case 2: go(uint16_t{}); break;
    case 4: go(uint32_t{}); break;
    case 8: go(uint64_t{}); break;
    default: return fail(FLX_ERR_UNSUPPORTED, "rnn weights of " + std::to_string(elem_bytes) + "-byte elements");
  }
  return launched(to_space ? "rnn weight packing kernel" : "rnn weight gradient unpacking kernel");
}

int dnn_fill_i32(cudaStream_t st, int32_t* dst, int64_t n, int32_t value) {
  fill_i32_kernel<<<blocks_for(n), 256, 0, st>>>(dst, n, value);
  return launched("rnn sequence length kernel");
}

}  // namespace flx_cuda

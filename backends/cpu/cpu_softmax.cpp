// CPU softmax and logsoftmax over the middle axis of (inner, axis, outer), and their backward.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"
#include "cpu_vector_math.hpp"

namespace flx::cpu_backend {

// The row maximum's step (softmax_max: a NaN never wins), the body that
// CUDA's and OpenCL's softmax compile too.
namespace window {
#define FLX_ELEM_FN template <class CT> inline
#include "flx/backend_window.h"
#undef FLX_ELEM_FN
}  // namespace window

// Float32 over contiguous rows (inner 1: softmax over the first dim, as an
// attention's scores and a classifier's logits have it): the exponentials
// in 8 lanes (cpu_vector_math.hpp), sums in double in four interleaved
// partial sums (a fixed order: the same bits at any thread count).
static double sum4(const float* a, const float* b, int64_t len) {
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= len; j += 4)
    for (int k = 0; k < 4; ++k) s[k] += b ? double(a[j + k]) * b[j + k] : double(a[j + k]);
  for (; j < len; ++j) s[0] += b ? double(a[j]) * b[j] : double(a[j]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}
// The row's maximum in 8 running maxima, each stepped by softmax_max
// (m < x ? x : m is the rule of x86's maxss, which it compiles to, as
// std::max did here before), then combined by the same step: any grouping
// gives the same maximum, since no running maximum is ever NaN.
static float row_max(const float* x, int64_t len) {
  float m[8];
  std::fill(m, m + 8, -INFINITY);
  int64_t j = 0;
  for (; j + 8 <= len; j += 8)
    for (int k = 0; k < 8; ++k) m[k] = window::softmax_max(m[k], x[j + k]);
  for (; j < len; ++j) m[0] = window::softmax_max(m[0], x[j]);
  float mx = m[0];
  for (int k = 1; k < 8; ++k) mx = window::softmax_max(mx, m[k]);
  return mx;
}

static void softmax_rows_f32(const flx_softmax_desc& d, bool backward) {
  const int64_t len = d.axis_len;
  const float* x = reinterpret_cast<const float*>(addr(backward ? d.y : d.x));
  const float* dy = backward ? reinterpret_cast<const float*>(addr(d.dy)) : nullptr;
  float* out = reinterpret_cast<float*>(addr(backward ? d.dx : d.y));
  parallel_for(d.outer, grain_of(len), [&](int64_t lo, int64_t hi) {
    std::vector<float> e(static_cast<size_t>(len));  // x - max, then its exponential
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * len;
      float* o = out + r * len;
      if (!backward) {
        const float mx = row_max(xr, len);
        for (int64_t j = 0; j < len; ++j) e[size_t(j)] = xr[j] - mx;
        vmath::row(vmath::Unary::exp, e.data(), e.data(), len);
        const double s = sum4(e.data(), nullptr, len);
        if (d.log) {
          const float ls = float(std::log(s));
          for (int64_t j = 0; j < len; ++j) o[j] = xr[j] - mx - ls;
        } else {
          const float inv = float(1.0 / s);
          for (int64_t j = 0; j < len; ++j) o[j] = e[size_t(j)] * inv;
        }
      } else {
        const float* g = dy + r * len;
        const double s = sum4(g, d.log ? nullptr : xr, len);
        if (d.log) {
          vmath::row(vmath::Unary::exp, e.data(), xr, len);
          for (int64_t j = 0; j < len; ++j) o[j] = g[j] - e[size_t(j)] * float(s);
        } else {
          for (int64_t j = 0; j < len; ++j) o[j] = xr[j] * (g[j] - float(s));
        }
      }
    }
  });
}

template <class T>
static void softmax_t(const flx_softmax_desc& d, bool backward) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(addr(backward ? d.y : d.x));
  const T* dy = backward ? reinterpret_cast<const T*>(addr(d.dy)) : nullptr;
  T* out = reinterpret_cast<T*>(addr(backward ? d.dx : d.y));
  int64_t n = d.inner * d.outer;
  auto one = [&](int64_t t) {
    int64_t i = t % d.inner, o = t / d.inner;
    int64_t base = o * d.inner * d.axis_len + i, st = d.inner;
    if (!backward) {
      C mx = -INFINITY;
      for (int64_t j = 0; j < d.axis_len; ++j) mx = window::softmax_max(mx, C(load(x[base + j * st])));
      double s = 0;
      for (int64_t j = 0; j < d.axis_len; ++j) s += std::exp(double(load(x[base + j * st]) - mx));
      if (d.log) {
        C ls = C(std::log(s));
        for (int64_t j = 0; j < d.axis_len; ++j) out[base + j * st] = store<T>(C(load(x[base + j * st]) - mx - ls));
      } else {
        C inv = C(1.0 / s);
        for (int64_t j = 0; j < d.axis_len; ++j)
          out[base + j * st] = store<T>(C(std::exp(load(x[base + j * st]) - mx) * inv));
      }
    } else {
      // softmax: dx = y .* (dy - sum(dy .* y)); logsoftmax: dx = dy - exp(y) .* sum(dy)
      double s = 0;
      for (int64_t j = 0; j < d.axis_len; ++j)
        s += d.log ? double(load(dy[base + j * st])) : double(load(dy[base + j * st])) * load(x[base + j * st]);
      for (int64_t j = 0; j < d.axis_len; ++j) {
        C y = load(x[base + j * st]), g = load(dy[base + j * st]);
        out[base + j * st] = store<T>(d.log ? C(g - std::exp(y) * C(s)) : C(y * (g - C(s))));
      }
    }
  };
  parallel_for(n, grain_of(d.axis_len), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) one(t);
  });
}

static int softmax_any(const flx_softmax_desc* d, bool backward) {
  int status = FLX_OK;
  dispatch_dtype(d->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      if (d->inner == 1) return softmax_rows_f32(*d, backward);
    }
    if constexpr (is_float_v<T>) softmax_t<T>(*d, backward);
    else status = fail(FLX_ERR_UNSUPPORTED, "softmax needs a floating dtype");
  });
  return status;
}
int softmax(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, false); }
int softmax_backward(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, true); }

}  // namespace flx::cpu_backend

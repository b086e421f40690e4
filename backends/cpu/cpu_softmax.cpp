// CPU softmax and logsoftmax over the middle axis of (inner, axis, outer), and their backward.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {

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
      for (int64_t j = 0; j < d.axis_len; ++j) mx = std::max(mx, C(load(x[base + j * st])));
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
    if constexpr (is_float_v<T>) softmax_t<T>(*d, backward);
    else status = fail(FLX_ERR_UNSUPPORTED, "softmax needs a floating dtype");
  });
  return status;
}
int softmax(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, false); }
int softmax_backward(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, true); }

}  // namespace flx::cpu_backend

// CPU fused optimiser steps (Adam).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {

namespace {

// Fused Adam over a chunk; In_place writes x -= step, else dx = step.
template <class T, bool In_place>
inline __attribute__((always_inline)) void adam_chunk(const flx_optim_desc& d, int64_t lo, int64_t hi) {
  using C = compute_t<T>;
  const T* __restrict g = reinterpret_cast<const T*>(addr(d.grad));
  T* __restrict m = reinterpret_cast<T*>(addr(d.m));
  T* __restrict v = reinterpret_cast<T*>(addr(d.v));
  T* __restrict out = reinterpret_cast<T*>(addr(In_place ? d.x : d.dx));
  const C b1 = C(d.beta1), b2 = C(d.beta2), eps = C(d.eps), eta = C(d.eta);
  const C c1 = C(1) / C(1 - d.beta1_pow), c2 = C(1) / C(1 - d.beta2_pow);
  const C tiny = std::numeric_limits<C>::min();
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    C gi = load(g[i]);
    C mi = b1 * C(load(m[i])) + (C(1) - b1) * gi;
    C vi = b2 * C(load(v[i])) + (C(1) - b2) * gi * gi;
    // Moments of parameters whose gradient stays zero (dead units) decay
    // into denormals, where x86 arithmetic is ~100x slower: flush them.
    mi = (mi < tiny && mi > -tiny) ? C(0) : mi;
    vi = vi < tiny ? C(0) : vi;
    m[i] = store<T>(mi);
    v[i] = store<T>(vi);
    C step = eta * (mi * c1) / (std::sqrt(vi * c2) + eps);
    if constexpr (In_place) out[i] = store<T>(C(load(out[i])) - step);
    else out[i] = store<T>(step);
  }
}

// Float32, the common case, also gets an AVX2 build picked at run time
// (sqrt and division dominate; 8 lanes instead of 4).
__attribute__((target_clones("avx2", "default"))) void adam_f32(const flx_optim_desc& d, int64_t lo, int64_t hi,
                                                                 bool in_place) {
  if (in_place) adam_chunk<float, true>(d, lo, hi);
  else adam_chunk<float, false>(d, lo, hi);
}

}  // namespace

int optim_step(void*, int, const flx_optim_desc* dp, flx_stream) {
  const flx_optim_desc& d = *dp;
  if (d.kind != FLX_OPTIM_ADAM) return fail(FLX_ERR_UNSUPPORTED, "optim_step: unknown kind");
  int status = FLX_OK;
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      bool in_place = d.dx.buf == nullptr;
      parallel_for(d.n, parallel_grain, [&](int64_t lo, int64_t hi) {
        if constexpr (std::is_same_v<T, float>) adam_f32(d, lo, hi, in_place);
        else if (in_place) adam_chunk<T, true>(d, lo, hi);
        else adam_chunk<T, false>(d, lo, hi);
      });
    } else {
      status = fail(FLX_ERR_UNSUPPORTED, "optim_step needs a floating dtype");
    }
  });
  return status;
}

}  // namespace flx::cpu_backend

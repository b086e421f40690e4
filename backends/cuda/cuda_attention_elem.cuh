// What every attention kernel computes for one (key j, query i) pair of
// head h and batch b, as backend.h's flx_attention_desc defines it: the
// logit with its bias, whether the pair is allowed (mask, causal), the
// dropout keep decision, and the tensors' element offsets. Shared by the
// CUDA-core and tensor-core kernels so the two agree to the rounding of
// their products.
#pragma once

#include <cmath>

#include "backend_common/philox.hpp"
#include "backend_common/uniform_bound.hpp"
#include "cuda_attention.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda::attn {

__device__ __forceinline__ int64_t q_at(const AttnArgs& a, int64_t d, int64_t h, int64_t i, int64_t b) {
  return d + a.hq * (h + a.H * (i + a.Lq * b));
}
__device__ __forceinline__ int64_t k_at(const AttnArgs& a, int64_t d, int64_t h, int64_t j, int64_t b) {
  return d + a.hq * (h + a.H * (j + a.Lk * b));
}
__device__ __forceinline__ int64_t v_at(const AttnArgs& a, int64_t d, int64_t h, int64_t j, int64_t b) {
  return d + a.hv * (h + a.H * (j + a.Lk * b));
}
__device__ __forceinline__ int64_t o_at(const AttnArgs& a, int64_t d, int64_t h, int64_t i, int64_t b) {
  return d + a.hv * (h + a.H * (i + a.Lq * b));
}
// lse and the row dots: (Lq, H, B)
__device__ __forceinline__ int64_t row_at(const AttnArgs& a, int64_t i, int64_t h, int64_t b) {
  return i + a.Lq * (h + a.H * b);
}
// dbias and the dropout counter: (Lk, Lq, H, B)
__device__ __forceinline__ uint64_t pair_at(const AttnArgs& a, int64_t j, int64_t i, int64_t h, int64_t b) {
  return uint64_t(j + a.Lk * (i + a.Lq * (h + a.H * b)));
}

// Whether query i may attend to key j (both in range).
__device__ __forceinline__ bool allowed(const AttnArgs& a, int64_t j, int64_t i, int64_t h, int64_t b) {
  if (a.causal && j > i) return false;
  if (a.mask) {
    const int64_t* s = a.mask_stride;
    return static_cast<const uint8_t*>(a.mask)[j * s[0] + i * s[1] + h * s[2] + b * s[3]] != 0;
  }
  return true;
}

// The logit from the scaled product kq (already times a.scale), plus the bias.
template <class T, class C>
__device__ __forceinline__ C logit(const AttnArgs& a, C kq, int64_t j, int64_t i, int64_t h, int64_t b) {
  if (!a.bias) return kq;
  const int64_t* s = a.bias_stride;
  return kq + C(load(static_cast<const T*>(a.bias)[j * s[0] + i * s[1] + h * s[2] + b * s[3]]));
}

// The dropout rule of backend.h, as the materialising path computes it:
// element e of a uniform fill of T drawn with (seed, offset) (the random
// kernel's rounding, kept below 1), compared with the probability rounded
// to T; a kept weight is multiplied by 1 / (1 - p) rounded to T.
template <class T>
struct Dropout {
  compute_t<T> p_t, scale_t;
  T top;  // the largest T below 1
  bool on;
  __host__ Dropout(int32_t dtype, double p) : on(p > 0) {
    p_t = load(store<T>(p));
    scale_t = load(store<T>(1.0 / (1.0 - p)));
    top = store<T>(flx::uniform_bound::largest_below(dtype, 1.0));
  }
  __device__ __forceinline__ bool keep(const AttnArgs& a, uint64_t e) const {
    const flx::philox::U4 r = flx::philox::bits(a.seed, a.offset, e);
    T u = store<T>(flx::philox::uniform01(r));
    if (double(load(u)) >= 1.0) u = top;
    return load(u) >= p_t;
  }
};

}  // namespace flx_cuda::attn

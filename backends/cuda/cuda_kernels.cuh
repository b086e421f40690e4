// Device-side helpers shared by the .cu files: the storage types of the
// dtypes, the host dispatch over them, stores through the compute type and
// the grid-stride index range.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_common.hpp"

namespace flx_cuda {

// Call f(T{}) with the storage type of dtype t; false when t is unknown.
template <class F>
bool dispatch_dtype(int32_t t, F&& f) {
  switch (t) {
    case FLX_F32: f(float{}); return true;
    case FLX_F64: f(double{}); return true;
    case FLX_F16: f(__half{}); return true;
    case FLX_BF16: f(__nv_bfloat16{}); return true;
    case FLX_I32: f(int32_t{}); return true;
    case FLX_I64: f(int64_t{}); return true;
    case FLX_U8: f(uint8_t{}); return true;
    case FLX_BOOL: f(bool{}); return true;
  }
  return false;
}

// Call f(T{}) with the storage type of a floating dtype t; false for any
// other dtype (the caller reports it).
template <class F>
bool dispatch_float_dtype(int32_t t, F&& f) {
  switch (t) {
    case FLX_F32: f(float{}); return true;
    case FLX_F64: f(double{}); return true;
    case FLX_F16: f(__half{}); return true;
    case FLX_BF16: f(__nv_bfloat16{}); return true;
  }
  return false;
}

inline const char* dtype_name(int32_t t) {
  switch (t) {
    case FLX_F32: return "Float32";
    case FLX_F64: return "Float64";
    case FLX_F16: return "Float16";
    case FLX_BF16: return "BFloat16";
    case FLX_I32: return "Int32";
    case FLX_I64: return "Int64";
    case FLX_U8: return "UInt8";
    case FLX_BOOL: return "Bool";
  }
  return "an unknown dtype";
}

// The error for a dtype code dispatch_dtype does not know.
inline int dtype_error(const char* what, int32_t t) {
  return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": unknown dtype code " + std::to_string(t) +
                                            " (expected a flx_dtype, 0 to 7)");
}

// Compute type of a storage type: Float16 and BFloat16 compute in float,
// as on the CPU.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

// Store a computed value as T: Bool is "not zero", halves round from float
// to nearest even, as on the CPU.
template <class T, class C>
__host__ __device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, bool>) return v != C(0);
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(float(v));
  else return static_cast<T>(v);
}
// Load a stored value in its compute type.
template <class T>
__device__ __forceinline__ compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_stride() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace flx_cuda

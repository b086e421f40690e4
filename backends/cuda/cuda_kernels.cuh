// Device-side helpers shared by the .cu files: the storage types of the
// dtypes, the host dispatch over them, stores through the compute type and
// the grid-stride index range.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_common.hpp"

namespace flx_cuda {

// Call f(T{}) with the storage type of dtype t. Half and BFloat16 are not
// in this slice: false with *unsupported set, so the caller can say so.
template <class F>
bool dispatch_dtype(int32_t t, F&& f, bool* unsupported = nullptr) {
  switch (t) {
    case FLX_F32: f(float{}); return true;
    case FLX_F64: f(double{}); return true;
    case FLX_I32: f(int32_t{}); return true;
    case FLX_I64: f(int64_t{}); return true;
    case FLX_U8: f(uint8_t{}); return true;
    case FLX_BOOL: f(bool{}); return true;
    case FLX_F16:
    case FLX_BF16:
      if (unsupported) *unsupported = true;
      return false;
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

// The error for a dtype dispatch_dtype refused.
inline int dtype_error(const char* what, int32_t t, bool unsupported) {
  if (unsupported)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": the CUDA backend does not compute in " + dtype_name(t) +
                                         " yet; convert to Float32 first (e.g. Float32.(x))");
  return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": unknown dtype code " + std::to_string(t));
}

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T>;

// Store a computed value as T: Bool is "not zero", as on the CPU.
template <class T, class C>
__device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, bool>) return v != C(0);
  else return static_cast<T>(v);
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_stride() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace flx_cuda

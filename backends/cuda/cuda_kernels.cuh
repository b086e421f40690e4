// Device-side helpers shared by the .cu files: the storage types of the
// dtypes, the host dispatch over them, stores through the compute type and
// the grid-stride index range.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda_common.hpp"
#include "cuda_nan_bits.hpp"
#include "backend_common/dtype_info.hpp"
#include "backend_common/saturating_cast.hpp"

namespace flx_cuda {

using flx::backend_common::saturating_cast;

// CUDA's storage type of each element type (flx/dtype_list.h's
// suffixes): a dtype added to the list fails to compile here until it has one.
#define FLX_CUDA_STORAGE_F32 float
#define FLX_CUDA_STORAGE_F64 double
#define FLX_CUDA_STORAGE_F16 __half
#define FLX_CUDA_STORAGE_BF16 __nv_bfloat16
#define FLX_CUDA_STORAGE_I32 int32_t
#define FLX_CUDA_STORAGE_I64 int64_t
#define FLX_CUDA_STORAGE_U8 uint8_t
#define FLX_CUDA_STORAGE_BOOL bool

// Call f(T{}) with the storage type of dtype t; false when t is unknown.
#define FLX_CUDA_DISPATCH_CASE_(code, sfx, name, bytes, kind, rank) \
  case FLX_##sfx: f(FLX_CUDA_STORAGE_##sfx{}); return true;
template <class F>
bool dispatch_dtype(int32_t t, F&& f) {
  switch (t) { FLX_DTYPES(FLX_CUDA_DISPATCH_CASE_) }
  return false;
}
#undef FLX_CUDA_DISPATCH_CASE_

// Call f(T{}) with the storage type of a floating dtype t; false for any
// other dtype (the caller reports it).
#define FLX_CUDA_FLOAT_CASE_(code, sfx, name, bytes, kind, rank) \
  FLX_DTYPE_IF_FLOAT_##kind(case FLX_##sfx : f(FLX_CUDA_STORAGE_##sfx{}); return true;)
template <class F>
bool dispatch_float_dtype(int32_t t, F&& f) {
  switch (t) { FLX_DTYPES(FLX_CUDA_FLOAT_CASE_) }
  return false;
}
#undef FLX_CUDA_FLOAT_CASE_

// The bytes of an element of dtype t (0 for an unknown code) and its name.
using flx::backend_common::dtype_bytes;
using flx::backend_common::dtype_name;

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

// v's bits as a To of the same size (float <-> uint32_t, double <->
// uint64_t), on the host and the device (memcpy of a register is a move).
template <class To, class From>
__host__ __device__ __forceinline__ To same_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "same_bits: the types differ in size");
  To r;
  memcpy(&r, &v, sizeof r);
  return r;
}

// Conversions between the floating types that give a NaN the CPU's bits
// (cuda_nan_bits.hpp); other values round to nearest even, as on the CPU.
template <class C>
__host__ __device__ __forceinline__ float to_f32(C v) {
  if constexpr (std::is_same_v<C, double>)
    return v != v ? same_bits<float>(nan_bits::f32_from_f64(same_bits<uint64_t>(v))) : float(v);
  else return float(v);
}
template <class C>
__host__ __device__ __forceinline__ double to_f64(C v) {
  if constexpr (std::is_same_v<C, float>)
    return v != v ? same_bits<double>(nan_bits::f64_from_f32(same_bits<uint32_t>(v))) : double(v);
  else return double(v);
}
__host__ __device__ __forceinline__ __half to_half(float v) {
  return v != v ? __ushort_as_half(nan_bits::half_from_f32(same_bits<uint32_t>(v))) : __float2half_rn(v);
}
__host__ __device__ __forceinline__ __nv_bfloat16 to_bf16(float v) {
  return v != v ? __ushort_as_bfloat16(nan_bits::bf16_from_f32(same_bits<uint32_t>(v))) : __float2bfloat16_rn(v);
}
__host__ __device__ __forceinline__ float from_half(__half h) {
  const uint16_t u = __half_as_ushort(h);
  return nan_bits::is_nan_half(u) ? same_bits<float>(nan_bits::f32_from_half(u)) : __half2float(h);
}
__host__ __device__ __forceinline__ float from_bf16(__nv_bfloat16 h) {
  return same_bits<float>(uint32_t(__bfloat16_as_ushort(h)) << 16);  // exact, NaN included
}

// Store a computed value as T: Bool is "not zero", halves round from float
// (a double first to float) to nearest even, as on the CPU, NaN included.
template <class T, class C>
__host__ __device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, bool>) return v != C(0);
  else if constexpr (std::is_same_v<T, __half>) return to_half(to_f32(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return to_bf16(to_f32(v));
  else if constexpr (std::is_same_v<T, float>) return to_f32(v);
  else if constexpr (std::is_same_v<T, double>) return to_f64(v);
  else return static_cast<T>(v);
}
// Load a stored value in its compute type.
template <class T>
__host__ __device__ __forceinline__ compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, __half>) return from_half(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return from_bf16(v);
  else return v;
}

// One element converted into storage type D, as the CPU's cast_element
// (backends/cpu/cpu_common.hpp), the rule of every backend: Bool is "not
// zero"; a half or bfloat16 is the value rounded once, from a double or an
// integer too (flx/half_bits.h, whose integer arithmetic runs on the host and
// the device alike); an integer saturates, NaN to 0 (saturating_cast.hpp);
// else as store.
template <class D, class S>
__host__ __device__ __forceinline__ D cast_element(S s) {
  namespace hb = flx::detail::half_bits;
  if constexpr (std::is_same_v<D, bool>) {
    return load(s) != compute_t<S>(0);
  } else if constexpr (is_half_v<D> && (std::is_same_v<S, double> || std::is_integral_v<S>)) {
    constexpr bool bf = std::is_same_v<D, __nv_bfloat16>;
    uint16_t bits;
    if constexpr (std::is_same_v<S, double>) {
      const uint64_t u = same_bits<uint64_t>(s);
      bits = bf ? hb::flx_f64_bits_to_bf16(u) : hb::flx_f64_bits_to_half(u);
    } else {
      const int64_t v = int64_t(s);
      const uint64_t magnitude = v < 0 ? 0 - uint64_t(v) : uint64_t(v);
      bits = bf ? hb::flx_int_to_bf16(v < 0, magnitude) : hb::flx_int_to_half(v < 0, magnitude);
    }
    if constexpr (bf) return __ushort_as_bfloat16(bits);
    else return __ushort_as_half(bits);
  } else if constexpr (std::is_integral_v<D>) {
    return flx::backend_common::saturating_convert<D>(load(s));
  } else {
    return store<D>(load(s));
  }
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_stride() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace flx_cuda

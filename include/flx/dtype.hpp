// Element types, their sizes, names, promotion, and the host half types.
#pragma once

#include "flx/dtype_list.h"
#include "flx/export.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

namespace flx {

// Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8 and Bool, whose
// values are the backend ABI's flx_dtype codes: both are generated from
// the one list of element types, flx/dtype_list.h.
#define FLX_DTYPE_ENUMERATOR_(code, sfx, name, bytes, kind, rank) name = code,
enum class DType : int32_t { FLX_DTYPES(FLX_DTYPE_ENUMERATOR_) };
#undef FLX_DTYPE_ENUMERATOR_

// flx::Float32 for flx::DType::Float32, and so on.
#define FLX_DTYPE_CONSTANT_(code, sfx, name, bytes, kind, rank) inline constexpr DType name = DType::name;
FLX_DTYPES(FLX_DTYPE_CONSTANT_)
#undef FLX_DTYPE_CONSTANT_

FLX_API size_t dtype_size(DType t);
FLX_API std::string_view dtype_name(DType t);  // "Float32", ...
FLX_API bool is_floating(DType t);
FLX_API bool is_integral(DType t);  // Int32, Int64, UInt8 (not Bool)
FLX_API std::ostream& operator<<(std::ostream& os, DType t);

// Promotion (written down in docs/dtypes.md):
//  - same type: itself;
//  - Bool < UInt8 < Int32 < Int64 < floating; within floating
//    Float16/BFloat16 < Float32 < Float64, and Float16 with BFloat16 → Float32.
FLX_API DType promote_types(DType a, DType b);

// IEEE half and bfloat16 as storage types on the host.
struct FLX_API Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  explicit operator float() const;
};
struct FLX_API BHalf {
  uint16_t bits = 0;
  BHalf() = default;
  explicit BHalf(float f);
  explicit operator float() const;
};

// Conversions between float and the bits of half / bfloat16 (round to
// nearest even). Inline: backend plugins, which do not link libflx, use
// them too. float_to_half and float_to_bf16 make a NaN the quiet NaN with
// its sign and no payload (sign | 0x7E00, sign | 0x7FC0), on every backend:
// a GPU's float NaNs carry no payload, so keeping one would make the bits
// depend on the device. The bit manipulations are include/flx/half_bits.h's,
// which the OpenCL kernels compile too.
namespace detail::half_bits {
#ifdef __CUDACC__
#define FLX_HALF_FN __host__ __device__ constexpr inline
#else
#define FLX_HALF_FN constexpr inline
#endif
#define FLX_U16 uint16_t
#define FLX_U32 uint32_t
#define FLX_U64 uint64_t
#include "flx/half_bits.h"
#undef FLX_HALF_FN
#undef FLX_U16
#undef FLX_U32
#undef FLX_U64
}  // namespace detail::half_bits

inline float half_to_float(uint16_t h) {
  const uint32_t u = detail::half_bits::flx_half_to_f32_bits(h);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return detail::half_bits::flx_f32_bits_to_half(u);
}
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = detail::half_bits::flx_bf16_to_f32_bits(h);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return detail::half_bits::flx_f32_bits_to_bf16(u);
}
// The half and bfloat16 bits of a double or an integer, rounded once from
// the value itself (through float it would round twice: half_bits.h).
inline uint16_t double_to_half(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return detail::half_bits::flx_f64_bits_to_half(u);
}
inline uint16_t double_to_bf16(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return detail::half_bits::flx_f64_bits_to_bf16(u);
}
inline uint16_t int64_to_half(int64_t v) {
  return detail::half_bits::flx_int_to_half(v < 0, v < 0 ? 0 - uint64_t(v) : uint64_t(v));
}
inline uint16_t int64_to_bf16(int64_t v) {
  return detail::half_bits::flx_int_to_bf16(v < 0, v < 0 ? 0 - uint64_t(v) : uint64_t(v));
}
inline Half::Half(float f) : bits(float_to_half(f)) {}
inline Half::operator float() const { return half_to_float(bits); }
inline BHalf::BHalf(float f) : bits(float_to_bf16(f)) {}
inline BHalf::operator float() const { return bf16_to_float(bits); }

// The DType of a C++ element type.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, Half>) return DType::Float16;
  else if constexpr (std::is_same_v<T, BHalf>) return DType::BFloat16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else static_assert(sizeof(T) == 0, "flx: no DType for this C++ type");
}

}  // namespace flx

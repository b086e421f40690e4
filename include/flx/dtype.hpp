// Element types, their sizes, names, promotion, and the host half types.
#pragma once

#include "flx/export.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

namespace flx {

// The values are the backend ABI's flx_dtype codes (checked in dtype.cpp).
enum class DType : int32_t {
  Float32 = 0,
  Float64 = 1,
  Float16 = 2,
  BFloat16 = 3,
  Int32 = 4,
  Int64 = 5,
  UInt8 = 6,
  Bool = 7,
};

inline constexpr DType Float32 = DType::Float32;
inline constexpr DType Float64 = DType::Float64;
inline constexpr DType Float16 = DType::Float16;
inline constexpr DType BFloat16 = DType::BFloat16;
inline constexpr DType Int32 = DType::Int32;
inline constexpr DType Int64 = DType::Int64;
inline constexpr DType UInt8 = DType::UInt8;
inline constexpr DType Bool = DType::Bool;

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
// depend on the device.
inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow → Inf
  if (a < 0x38800000u) {  // subnormal or zero: scale into the 10-bit field with rounding
    float af;
    std::memcpy(&af, &a, 4);
    return uint16_t(sign | uint16_t(std::nearbyint(af * 16777216.0f)));  // 2^24
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);  // rebias, round to nearest even
  return uint16_t(sign | (r >> 13));
}

inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return uint16_t(u >> 16);
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

// The top of a uniform draw's range in a given dtype. A draw a + (b - a) * u
// with u < 1 can round up to b once it is stored in a narrow type (Float16
// keeps 11 bits, BFloat16 8), so every backend replaces a stored value >= b
// with the largest value of the dtype below b: the interval stays [a, b).
//
// Host code: each backend computes the bound once per fill and hands it to
// its loop or kernel, so they all agree to the bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "flx/backend.h"
#include "flx/dtype.hpp"

namespace flx::uniform_bound {

// The next half or bfloat16 value towards -Inf (sign-magnitude bits; the
// caller never passes -Inf or NaN).
inline uint16_t next_down_bits(uint16_t h) {
  if ((h & 0x7fffu) == 0) return 0x8001u;  // ±0 → the smallest negative subnormal
  return (h & 0x8000u) ? uint16_t(h + 1) : uint16_t(h - 1);
}

// The largest value of `dtype` (a floating dtype) strictly below b, exactly
// representable in that dtype and returned as a double.
inline double largest_below(int32_t dtype, double b) {
  switch (dtype) {
    case FLX_F64: return std::nextafter(b, -std::numeric_limits<double>::infinity());
    case FLX_F32: {
      float v = float(b);
      if (double(v) >= b) v = std::nextafter(v, -std::numeric_limits<float>::infinity());
      return double(v);
    }
    case FLX_F16: {
      uint16_t h = float_to_half(float(b));
      if (double(half_to_float(h)) >= b) h = next_down_bits(h);
      return double(half_to_float(h));
    }
    case FLX_BF16: {
      uint16_t h = float_to_bf16(float(b));
      if (double(bf16_to_float(h)) >= b) h = next_down_bits(h);
      return double(bf16_to_float(h));
    }
  }
  return b;
}

}  // namespace flx::uniform_bound

// A double (an op's alpha and beta, a scalar operand, a fill value) in an
// element's compute type. Converting a floating value outside an integer
// type's range is undefined in C++, and backends differ: x86 wraps through
// cvttsd2si (-1.0 as UInt8 is 255), a GPU saturates (0). So every backend
// converts through this one function: integers saturate (NaN is 0, below the
// range its lowest, above it its max, else truncation toward zero), Bool is
// "not zero", floating types convert as usual. clamp(x::UInt8, -1, 1.5) thus
// clamps to [0, 1] on every device.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef __CUDACC__
#define FLX_SATURATING_FN __host__ __device__ inline
#else
#define FLX_SATURATING_FN inline
#endif

namespace flx::backend_common {

template <class CT>
FLX_SATURATING_FN constexpr CT saturating_cast(double v) {
  if constexpr (std::is_same_v<CT, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<CT>) {
    using limits = std::numeric_limits<CT>;
    // The range's ends as doubles: lowest() and max() + 1 are powers of two
    // (or 0), exact in double; max() itself may not be (int64's).
    constexpr double below = double(limits::lowest()), above = 2.0 * double(limits::max() / 2 + 1);
    if (v != v) return CT(0);
    if (v <= below) return limits::lowest();
    if (v >= above) return limits::max();
    return CT(v);
  } else {
    return CT(v);
  }
}

// An element converted into the integer type CT (cast's rule, on every
// backend): a floating value as saturating_cast; an integer one clamped to
// CT's range (Int64 300 as UInt8 is 255, -1 is 0; C++ would wrap). The
// source integers (Bool, UInt8, Int32, Int64) all fit int64_t.
template <class CT, class V>
FLX_SATURATING_FN constexpr CT saturating_convert(V v) {
  static_assert(std::is_integral_v<CT> && !std::is_same_v<CT, bool>, "saturating_convert: into an integer type");
  if constexpr (std::is_floating_point_v<V>) {
    return saturating_cast<CT>(double(v));
  } else {
    using limits = std::numeric_limits<CT>;
    const int64_t w = int64_t(v);
    if (w < int64_t(limits::lowest())) return limits::lowest();
    if (w > int64_t(limits::max())) return limits::max();
    return CT(w);
  }
}

}  // namespace flx::backend_common

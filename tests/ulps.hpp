// Distances between floating results counted in units in the last place
// (ulps) of the element type they are stored in: how many representable
// values lie between two results, so a tolerance says "the same value", "the
// neighbouring value", ... whatever the magnitude.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"

namespace flx::testing {

// A value of floating type t (read exactly as a double) as the signed count of
// t's representable values from zero to it: neighbours differ by 1, and -0
// and +0 are both 0.
inline int64_t ulp_index(double v, DType t) {
  uint64_t mag = 0;
  switch (t) {
    case DType::Float16: mag = float_to_half(float(v)) & 0x7fffu; break;
    case DType::BFloat16: mag = float_to_bf16(float(v)) & 0x7fffu; break;
    case DType::Float32: {
      float f = float(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      mag = b & 0x7fffffffu;
      break;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, &v, 8);
      mag = b & 0x7fffffffffffffffull;
    }
  }
  return std::signbit(v) ? -int64_t(mag) : int64_t(mag);
}

// How many ulps of t lie between a and b, values of t; two NaNs are 0 apart,
// a NaN and a number infinitely far.
inline double ulps_between(double a, double b, DType t) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INFINITY;
  return double(std::llabs(ulp_index(a, t) - ulp_index(b, t)));
}

// The spacing of t's values at magnitude |v| (the ulp there).
inline double ulp_of(double v, DType t) {
  const int digits = t == DType::Float16 ? 11 : t == DType::BFloat16 ? 8 : t == DType::Float32 ? 24 : 53;
  const int min_exp = t == DType::Float16 ? -14 : t == DType::Float64 ? -1022 : -126;  // of the normal numbers
  int e = 0;
  (void)std::frexp(std::fabs(v), &e);  // |v| = f 2^e with f in [0.5, 1), so 1.f' 2^(e-1)
  return std::ldexp(1.0, (v == 0 ? min_exp : std::max(e - 1, min_exp)) - (digits - 1));
}

// How a result may differ from the reference: at most `ulps` of the
// element type, counted per element, or (normwise) in ulps of the largest
// reference magnitude of the tensor, for results that are sums of rounded
// terms whose cancellation would make a per-element count meaningless.
struct UlpTolerance {
  double ulps = 0;
  bool normwise = false;
};

// Expect `got` (any device) to be within tol of `ref`, both of one floating
// type; a failure names the worst element, its two values and the distance.
inline void expect_ulps(const Tensor& got, const Tensor& ref, UlpTolerance tol, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  ASSERT_EQ(got.dtype(), ref.dtype()) << what;
  const DType t = ref.dtype();
  const auto g = got.to(Device::cpu()).to_vector<double>();
  const auto r = ref.to(Device::cpu()).to_vector<double>();
  double scale = 0;
  for (double v : r) scale = std::max(scale, std::isfinite(v) ? std::fabs(v) : 0.0);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const bool finite = std::isfinite(r[i]) && std::isfinite(g[i]);
    const double d = tol.normwise && finite ? std::fabs(g[i] - r[i]) / ulp_of(scale, t) : ulps_between(g[i], r[i], t);
    if (d > worst || std::isnan(d)) worst = d, at = i;
  }
  EXPECT_LE(worst, tol.ulps) << what << ": " << worst << (tol.normwise ? " ulps of the largest magnitude " : " ulps ")
                             << "at index " << at << " (" << g[at] << " against " << r[at] << " in " << dtype_name(t)
                             << "; allowed " << tol.ulps << ")";
}

}  // namespace flx::testing

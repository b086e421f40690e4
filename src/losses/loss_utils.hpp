// What the losses share (src/losses/*.cpp): argument checks that name the
// loss, the aggregate, half widening and Flux's default eps. Not installed.
#pragma once

#include <algorithm>
#include <limits>

#include "flx/error.hpp"
#include "flx/losses.hpp"
#include "flx/ops.hpp"

namespace flx::losses {

// Prediction and target: both defined, the same shape (Flux's _check_sizes).
inline void check_sizes(const Tensor& yhat, const Tensor& y, const char* name) {
  FLX_CHECK(yhat.defined() && y.defined(), ArgumentError, name, ": got an undefined tensor");
  FLX_CHECK(yhat.shape() == y.shape(), DimensionMismatch, name, ": prediction ", yhat.shape(), " and target ",
            y.shape(), " must have the same shape");
}

// A dim of x (0-based) to reduce over.
inline void check_dim(const Tensor& x, int dim, const char* name) {
  FLX_CHECK(dim >= 0 && dim < std::max(1, x.ndims()), ArgumentError, name, ": dim ", dim,
            " is not a dim of the prediction ", x.shape(), "; dims are 0-based (Flux's dims = 1 is dim 0)");
}

inline Tensor aggregate(const Tensor& x, Agg agg) {
  switch (agg) {
    case Agg::mean: return mean(x);
    case Agg::sum: return sum(x);
    case Agg::none: return x;
  }
  return x;
}

// Float16 and BFloat16 as Float32 (the losses compute in it); others as they are.
inline Tensor widened(const Tensor& t) {
  return t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16 ? t.to(DType::Float32) : t;
}

// Flux's epseltype(ŷ) unless given (>= 0).
inline double eps_of(const Tensor& t, double given) {
  if (given >= 0) return given;
  switch (t.dtype()) {
    case DType::Float64: return std::numeric_limits<double>::epsilon();
    case DType::Float16: return 0.0009765625;
    case DType::BFloat16: return 0.0078125;
    default: return std::numeric_limits<float>::epsilon();
  }
}

// t · x^γ, with the small integer powers exact (Flux keeps an Integer γ an
// integer power) and, for γ = 0, t itself (no 0 · x^(-1) in the gradient of
// x^0 at x = 0).
inline Tensor times_power(const Tensor& t, const Tensor& x, double gamma) {
  if (gamma == 0) return t;
  if (gamma == 1) return t * x;
  if (gamma == 2) return t * square(x);
  return t * pow(x, gamma);
}

// t · max(x, 0)^γ: the focal losses' weight (1 - p)^γ, whose base Flux's
// ŷ + ϵ takes to -ϵ for a prediction that is exactly right; a non-integer
// power of it would be NaN. Where x ≤ 0 the weight is 0, and so is its
// gradient: the power there is taken of 1 and then masked, so no 0 · ∞
// (γ x^(γ-1) at 0) reaches the gradient.
inline Tensor times_clamped_power(const Tensor& t, const Tensor& x, double gamma) {
  if (gamma == 0) return t;
  const Tensor positive = x > 0.0;
  const Tensor zero = full(x.dtype(), 0.0, Shape{}).to(x.device()), one = full(x.dtype(), 1.0, Shape{}).to(x.device());
  return where(positive, times_power(t, where(positive, x, one), gamma), zero);
}

}  // namespace flx::losses

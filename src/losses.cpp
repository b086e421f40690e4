#include "flx/losses.hpp"

#include <limits>

#include "flx/activations.hpp"
#include "flx/ops.hpp"

namespace flx {
namespace {

void check_sizes(const Tensor& yhat, const Tensor& y, const char* name) {
  FLX_CHECK(yhat.defined() && y.defined(), ArgumentError, name, ": got an undefined tensor");
  FLX_CHECK(yhat.shape() == y.shape(), DimensionMismatch, name, ": prediction ", yhat.shape(), " and target ",
            y.shape(), " must have the same shape");
}

Tensor aggregate(const Tensor& x, Agg agg) {
  switch (agg) {
    case Agg::mean: return mean(x);
    case Agg::sum: return sum(x);
    case Agg::none: return x;
  }
  return x;
}

// Float16 and BFloat16 as Float32 (the losses compute in it); others as they are.
Tensor widened(const Tensor& t) {
  return t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16 ? t.to(DType::Float32) : t;
}

double eps_of(const Tensor& t, double given) {
  if (given >= 0) return given;
  switch (t.dtype()) {
    case DType::Float64: return std::numeric_limits<double>::epsilon();
    case DType::Float16: return 0.0009765625;
    case DType::BFloat16: return 0.0078125;
    default: return std::numeric_limits<float>::epsilon();
  }
}

}  // namespace

Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "mse");
  return aggregate(square(widened(yhat) - widened(y)), o.agg);
}

Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "crossentropy");
  return aggregate(-sum(xlogy(widened(y), widened(yhat) + eps_of(yhat, o.epsilon)), {o.dim}), o.agg);
}

Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "logitcrossentropy");
  return aggregate(-sum(widened(y) * logsoftmax(widened(yhat), o.dim), {o.dim}), o.agg);
}

Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "binarycrossentropy");
  double e = eps_of(yhat, o.epsilon);
  const Tensor p = widened(yhat), t = widened(y);
  return aggregate(-xlogy(t, p + e) - xlogy(1.0 - t, (1.0 - p) + e), o.agg);
}

}  // namespace flx

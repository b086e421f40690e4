// logsumexp (NNlib's), var and std (Julia's Statistics), composed of
// recorded reductions and maps, so each differentiates to any order.
#include <limits>

#include "flx/arrays.hpp"
#include "ops_internal.hpp"

namespace flx {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor floating(const Tensor& x, const char* op) {
  ops::check_defined(x, op);
  return is_floating(x.dtype()) ? x : x.to(DType::Float32);
}

// m + log(sum(exp(x - m))) with m the maximum (over dims, or all of x when
// `all`), held constant: the gradient is then exp(x - m) / sum(...), the
// softmax, exactly. An infinite or NaN maximum shifts by 0 instead, so that
// all -Inf gives -Inf (log 0), +Inf gives +Inf, NaN stays NaN.
Tensor log_sum_exp(const Tensor& x0, const Dims* dims) {
  const Tensor x = floating(x0, "logsumexp");
  const uint32_t mask = dims ? ops::dims_mask(x, *dims, "logsumexp") : ~0u;
  for (int k = 0; k < x.ndims(); ++k)
    FLX_CHECK(!((mask >> k) & 1u) || x.size(k) > 0, ArgumentError,
              "logsumexp: reducing over an empty dimension (dim ", k, " of shape ", x.shape(), ") has no answer");
  const Tensor xd = x.detach();
  Tensor m = dims ? maximum(xd, *dims) : maximum(xd);
  m = where(abs(m) < kInf, m, zeros(m.dtype(), Shape{}).to(m.device()));
  const Tensor e = exp(x - m);
  return m + log(dims ? sum(e, *dims) : sum(e));
}

// sum((x - mean)^2) / (n - 1), two passes (the stable way); n is the count
// of the reduced elements. One element, corrected, gives 0 / 0: NaN, as
// Julia's var.
Tensor variance(const Tensor& x0, const Dims* dims, bool corrected, const char* op) {
  const Tensor x = floating(x0, op);
  int64_t n = x.numel();
  if (dims) {
    const uint32_t mask = ops::dims_mask(x, *dims, op);  // checks them
    n = 1;
    for (int k = 0; k < x.ndims(); ++k)
      if ((mask >> k) & 1u) n *= x.size(k);
  }
  FLX_CHECK(n > 0, ArgumentError, op, ": the ", op, " of an empty collection (shape ", x.shape(), ") is undefined");
  const Tensor dev = dims ? x - mean(x, *dims) : x - mean(x);
  const Tensor ss = dims ? sum(square(dev), *dims) : sum(square(dev));
  const double denom = double(n) - (corrected ? 1.0 : 0.0);
  return denom > 0 ? ss * (1.0 / denom) : ss / 0.0;
}

}  // namespace

Tensor logsumexp(const Tensor& x) { return log_sum_exp(x, nullptr); }
Tensor logsumexp(const Tensor& x, const Dims& dims) { return log_sum_exp(x, &dims); }

Tensor var(const Tensor& x) { return variance(x, nullptr, true, "var"); }
Tensor var(const Tensor& x, const Dims& dims, bool corrected) { return variance(x, &dims, corrected, "var"); }
Tensor std(const Tensor& x) { return sqrt(variance(x, nullptr, true, "std")); }
Tensor std(const Tensor& x, const Dims& dims, bool corrected) { return sqrt(variance(x, &dims, corrected, "std")); }

}  // namespace flx

// The cross-entropies (crossentropy, logitcrossentropy, binarycrossentropy,
// logitbinarycrossentropy), kldivergence and label_smoothing: Flux's
// src/losses/functions.jl, composed from differentiable ops.
#include "flx/activations.hpp"
#include "losses/loss_utils.hpp"

namespace flx {

using losses::aggregate;
using losses::check_dim;
using losses::check_sizes;
using losses::eps_of;
using losses::widened;

Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "crossentropy");
  check_dim(yhat, o.dim, "crossentropy");
  return aggregate(-sum(xlogy(widened(y), widened(yhat) + eps_of(yhat, o.epsilon)), {o.dim}), o.agg);
}

Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "logitcrossentropy");
  check_dim(yhat, o.dim, "logitcrossentropy");
  return aggregate(-sum(widened(y) * logsoftmax(widened(yhat), o.dim), {o.dim}), o.agg);
}

Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "binarycrossentropy");
  double e = eps_of(yhat, o.epsilon);
  const Tensor p = widened(yhat), t = widened(y);
  return aggregate(-xlogy(t, p + e) - xlogy(1.0 - t, (1.0 - p) + e), o.agg);
}

Tensor logitbinarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "logitbinarycrossentropy");
  const Tensor x = widened(yhat), t = widened(y);
  // Flux's (1 - y) ŷ - logσ(ŷ); -logσ(ŷ) = softplus(-ŷ) = log1p(exp(-|ŷ|)) + max(-ŷ, 0),
  // finite for every finite ŷ, where log(σ(ŷ)) is -Inf once σ(ŷ) rounds to 0.
  return aggregate((1.0 - t) * x + softplus(-x), o.agg);
}

Tensor kldivergence(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "kldivergence");
  check_dim(yhat, o.dim, "kldivergence");
  Tensor t = widened(y);
  if (!is_floating(t.dtype())) t = t.to(widened(yhat).dtype());  // one-hot Bool targets
  // Flux: agg(sum(xlogx.(y); dims)) + crossentropy(ŷ, y; dims, agg, eps).
  const Tensor entropy = aggregate(sum(xlogy(t, t), {o.dim}), o.agg);
  return entropy + crossentropy(yhat, t, o);
}

Tensor label_smoothing(const Tensor& y, double alpha, const LabelSmoothingOptions& o) {
  FLX_CHECK(y.defined(), ArgumentError, "label_smoothing: got an undefined tensor");
  FLX_CHECK(alpha > 0 && alpha < 1, ArgumentError, "label_smoothing: α must be between 0 and 1; got ", alpha);
  const Tensor t = is_floating(y.dtype()) ? y : y.to(DType::Float32);
  if (o.binary) return t * (1.0 - alpha) + alpha / 2.0;
  FLX_CHECK(o.dim >= 0 && o.dim < std::max(1, y.ndims()), ArgumentError, "label_smoothing: dim ", o.dim,
            " is not a dim of the labels ", y.shape(), "; dims are 0-based (Flux's dims = 1 is dim 0), and "
            "{.binary = true} smooths binary labels (Flux's dims = 0)");
  return t * (1.0 - alpha) + alpha / double(y.size(o.dim));
}

}  // namespace flx

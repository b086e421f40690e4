// The regression losses (mse, mae, msle, huber_loss) and poisson_loss:
// Flux's src/losses/functions.jl, composed from differentiable ops.
#include "losses/loss_utils.hpp"

namespace flx {

using losses::aggregate;
using losses::check_sizes;
using losses::eps_of;
using losses::widened;

Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "mse");
  return aggregate(square(widened(yhat) - widened(y)), o.agg);
}

Tensor mae(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "mae");
  return aggregate(abs(widened(yhat) - widened(y)), o.agg);
}

Tensor msle(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "msle");
  const double e = eps_of(yhat, o.epsilon);
  return aggregate(square(log((widened(yhat) + e) / (widened(y) + e))), o.agg);
}

Tensor huber_loss(const Tensor& yhat, const Tensor& y, const HuberOptions& o) {
  check_sizes(yhat, y, "huber_loss");
  FLX_CHECK(o.delta > 0, ArgumentError, "huber_loss: delta (δ) must be positive; got ", o.delta);
  const Tensor a = abs(widened(yhat) - widened(y));
  // Flux's _huber_metric: quadratic below δ, linear (slope δ) from δ on.
  return aggregate(where(a < o.delta, 0.5 * square(a), o.delta * (a - 0.5 * o.delta)), o.agg);
}

Tensor poisson_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "poisson_loss");
  const Tensor p = widened(yhat);
  return aggregate(p - xlogy(widened(y), p), o.agg);
}

}  // namespace flx

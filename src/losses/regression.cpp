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
  // Flux's _huber_metric: quadratic below δ, linear (slope δ) from δ on,
  // written q²/2 + δ (a - q) with q = a below δ and δ from it on: the same
  // values, and the quadratic part never sees a large |ŷ - y| (an Inf one
  // would make its gradient 0 · Inf = NaN through a where).
  const Tensor delta = full(a.dtype(), o.delta, Shape{}).to(a.device());
  const Tensor q = where(a < o.delta, a, delta);
  return aggregate(0.5 * square(q) + o.delta * (a - q), o.agg);
}

Tensor poisson_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "poisson_loss");
  const Tensor p = widened(yhat);
  return aggregate(p - xlogy(widened(y), p), o.agg);
}

}  // namespace flx

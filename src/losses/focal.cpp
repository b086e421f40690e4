// The focal losses binary_focal_loss and focal_loss (Lin et al. 2017):
// Flux's src/losses/functions.jl, composed from differentiable ops.
#include "losses/loss_utils.hpp"

namespace flx {

using losses::aggregate;
using losses::check_dim;
using losses::check_sizes;
using losses::eps_of;
using losses::times_clamped_power;
using losses::widened;

Tensor binary_focal_loss(const Tensor& yhat, const Tensor& y, const BinaryFocalOptions& o) {
  check_sizes(yhat, y, "binary_focal_loss");
  FLX_CHECK(o.gamma >= 0, ArgumentError, "binary_focal_loss: gamma (γ) must be non-negative; got ", o.gamma);
  const Tensor pe = widened(yhat) + eps_of(yhat, o.epsilon), t = widened(y);
  const Tensor p_t = t * pe + (1.0 - t) * (1.0 - pe);
  return aggregate(times_clamped_power(-log(p_t), 1.0 - p_t, o.gamma), o.agg);
}

Tensor focal_loss(const Tensor& yhat, const Tensor& y, const FocalOptions& o) {
  check_sizes(yhat, y, "focal_loss");
  check_dim(yhat, o.dim, "focal_loss");
  FLX_CHECK(o.gamma >= 0, ArgumentError, "focal_loss: gamma (γ) must be non-negative; got ", o.gamma);
  const Tensor pe = widened(yhat) + eps_of(yhat, o.epsilon), t = widened(y);
  // -y (1 - ŷϵ)^γ log(ŷϵ), y log(ŷϵ) as xlogy: 0 where y = 0 (Flux
  // multiplies); 1 - ŷϵ clamped at 0 (times_clamped_power).
  return aggregate(sum(-times_clamped_power(xlogy(t, pe), 1.0 - pe, o.gamma), {o.dim}), o.agg);
}

}  // namespace flx

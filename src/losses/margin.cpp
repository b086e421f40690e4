// The margin losses (hinge_loss, squared_hinge_loss) and
// siamese_contrastive_loss: Flux's src/losses/functions.jl, composed from
// differentiable ops (max(0, x) is relu).
#include "flx/activations.hpp"
#include "losses/loss_utils.hpp"

namespace flx {

using losses::aggregate;
using losses::check_sizes;
using losses::widened;

Tensor hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "hinge_loss");
  return aggregate(relu(1.0 - widened(yhat) * widened(y)), o.agg);
}

Tensor squared_hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
  check_sizes(yhat, y, "squared_hinge_loss");
  return aggregate(square(relu(1.0 - widened(yhat) * widened(y))), o.agg);
}

Tensor siamese_contrastive_loss(const Tensor& yhat, const Tensor& y, const SiameseContrastiveOptions& o) {
  check_sizes(yhat, y, "siamese_contrastive_loss");
  FLX_CHECK(o.margin >= 0, ArgumentError, "siamese_contrastive_loss: margin must be non-negative; got ", o.margin);
  const Tensor d = widened(yhat), t = widened(y);
  return aggregate((1.0 - t) * square(d) + t * square(relu(o.margin - d)), o.agg);
}

}  // namespace flx

// The segmentation losses dice_coeff_loss and tversky_loss: Flux's
// src/losses/functions.jl, whole-tensor ratios (no agg, as in Flux),
// composed from differentiable ops.
#include "losses/loss_utils.hpp"

namespace flx {

using losses::check_sizes;
using losses::widened;

Tensor dice_coeff_loss(const Tensor& yhat, const Tensor& y, const DiceOptions& o) {
  check_sizes(yhat, y, "dice_coeff_loss");
  const Tensor p = widened(yhat), t = widened(y);
  return 1.0 - (2.0 * sum(t * p) + o.smooth) / (sum(square(t)) + sum(square(p)) + o.smooth);
}

Tensor tversky_loss(const Tensor& yhat, const Tensor& y, const TverskyOptions& o) {
  check_sizes(yhat, y, "tversky_loss");
  const Tensor p = widened(yhat), t = widened(y);
  const double b = o.beta;
  // Flux's code (its docstring swaps β and 1 - β): β on the false positives.
  const Tensor num = sum(t * p) + 1.0;
  const Tensor den = sum(t * p + b * ((1.0 - t) * p) + (1.0 - b) * (t * (1.0 - p))) + 1.0;
  return 1.0 - num / den;
}

}  // namespace flx

// Loss functions with Flux's definitions (prediction first, target second).
// The aggregate defaults to the mean, as in Flux: mse(ŷ, y, {.agg = Agg::sum}).
//
// Float16 and BFloat16 predictions (and targets) are widened to Float32
// first, and the loss is Float32, as PyTorch's autocast computes its losses:
// the sums over a batch keep Float32's precision, and a loss scaled for
// Float16 training (LossScaler: 2^16 times the loss) stays finite. The
// gradient reaching the prediction is of its own type. eps defaults to the
// prediction's own type's (Flux's epseltype).
#pragma once

#include "flx/tensor.hpp"

namespace flx {

enum class Agg { mean, sum, none };

struct LossOptions {
  Agg agg = Agg::mean;
  int dim = 0;           // class dim for the cross-entropies (Flux's dims=1)
  double epsilon = -1;   // < 0: eps of the prediction's element type
};

Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});

}  // namespace flx

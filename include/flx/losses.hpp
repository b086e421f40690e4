// Loss functions with Flux's definitions (prediction first, target second).
// The aggregate defaults to the mean, as in Flux: mse(ŷ, y, {.agg = Agg::sum}).
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

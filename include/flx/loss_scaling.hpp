// Dynamic loss scaling for training in Float16 (PyTorch's
// torch.amp.GradScaler, with its defaults): gradients too small for
// Float16 (below 2^-24 they flush to zero) are computed from the loss times
// a large scale, then divided by it in Float32 before the optimiser sees
// them; a step whose gradients overflowed is skipped and the scale halved.
//
//   auto model = f16(Chain(Dense(784, 256, relu), Dense(256, 10)));
//   auto opt = setup(MixedPrecision(Float32, Adam(1e-3)), model);
//   LossScaler scaler;   // 2^16, doubled after 2000 good steps, halved on an overflow
//   for (auto [x, y] : loader) {
//     auto [l, grads] = withgradient([&](const auto& m) { return scaler.scale(logitcrossentropy(m(x), y)); }, model);
//     bool stepped = scaler.update(opt, model, std::get<0>(grads));   // unscale; step, or skip
//   }
//
// The loss must be Float32 where it is scaled (flx's losses are, for
// Float16 and BFloat16 predictions): 2^16 is past Float16's largest value
// (65504). BFloat16 has Float32's range and needs no scaling.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flx/functor.hpp"
#include "flx/optimisers.hpp"
#include "flx/tensor.hpp"

namespace flx {

// PyTorch's GradScaler defaults (torch/amp/grad_scaler.py: init_scale=2.**16,
// growth_factor=2.0, backoff_factor=0.5, growth_interval=2000).
struct FLX_API LossScalerOptions {
  double init_scale = 65536.0;    // 2^16
  double growth_factor = 2.0;     // the scale's factor after growth_interval good steps in a row
  double backoff_factor = 0.5;    // its factor after a step whose gradients were not finite
  int64_t growth_interval = 2000;
  bool enabled = true;            // false: scale() and update() are plain (the loss and update() as they are)
};

class FLX_API LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options = {});

  // The loss times the scale, in Float32 (a Float16 or BFloat16 loss is
  // widened first; Float64 stays Float64).
  Tensor scale(const Tensor& loss) const;
  // The current scale (1 when disabled).
  double scale() const { return options_.enabled ? scale_ : 1.0; }
  // Good steps in a row since the scale last changed (PyTorch's growth tracker).
  int64_t good_steps() const { return good_steps_; }
  const LossScalerOptions& options() const { return options_; }
  // Where a saved run stood (scale() and good_steps() as they were), for
  // an exact resume; an ArgumentError for a scale that is not finite and
  // positive or a negative count.
  void restore(double scale, int64_t good_steps);

  // Divides the gradients by the scale (in Float32 for halves: the
  // optimiser state of MixedPrecision takes them so, unrounded) and, if
  // every one is finite, applies update(state, model, ...) with them;
  // otherwise changes nothing (parameters, optimiser state, its step
  // counts). Then grows or backs off the scale. Returns whether it stepped.
  // grads is left as it was.
  template <class M>
  bool update(OptState& state, const M& model, const M& grads) {
    std::vector<std::pair<Tensor, Tensor>> pairs;
    auto visit = [&](const std::string&, const Tensor& p, const Tensor& g) { pairs.emplace_back(p, g); };
    detail::walk<true>(visit, "", model, grads);
    return step(state, pairs);
  }

  // update() on (parameter, gradient) pairs in walk order.
  bool step(OptState& state, const std::vector<std::pair<Tensor, Tensor>>& param_grads);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
};

}  // namespace flx

// LossScaler: PyTorch's GradScaler (torch/amp/grad_scaler.py) over flx's
// OptState. The scale follows its _amp_update_scale_: backoff on a step
// whose gradients are not finite, growth after growth_interval good steps in
// a row (only to a scale Float32 can hold, where PyTorch keeps it).
#include "flx/loss_scaling.hpp"

#include <cfloat>
#include <cmath>
#include <unordered_map>

#include "autograd.hpp"
#include "flx/ops.hpp"

namespace flx {

namespace {
bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
}  // namespace

LossScaler::LossScaler(const LossScalerOptions& o) : options_(o), scale_(o.init_scale) {
  FLX_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && o.init_scale <= FLT_MAX, ArgumentError,
            "LossScaler: init_scale must be finite, positive and within Float32's range; got ", o.init_scale,
            " (PyTorch's default is 2^16 = 65536)");
  FLX_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1, ArgumentError,
            "LossScaler: growth_factor must be above 1; got ", o.growth_factor, " (the default is 2)");
  FLX_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, ArgumentError,
            "LossScaler: backoff_factor must lie strictly between 0 and 1; got ", o.backoff_factor,
            " (the default is 0.5)");
  FLX_CHECK(o.growth_interval >= 1, ArgumentError, "LossScaler: growth_interval must be 1 or more steps; got ",
            o.growth_interval, " (the default is 2000)");
}

void LossScaler::restore(double scale, int64_t good_steps) {
  FLX_CHECK(std::isfinite(scale) && scale > 0 && scale <= FLT_MAX, ArgumentError,
            "LossScaler::restore: the scale must be finite, positive and within Float32's range (as the "
            "constructor's init_scale); got ", scale);
  FLX_CHECK(good_steps >= 0, ArgumentError, "LossScaler::restore: the count of good steps must be >= 0; got ",
            good_steps);
  scale_ = scale;
  good_steps_ = good_steps;
}

Tensor LossScaler::scale(const Tensor& loss) const {
  FLX_CHECK(loss.defined(), ArgumentError, "LossScaler::scale: the loss is an undefined tensor");
  FLX_CHECK(is_floating(loss.dtype()), TypeError, "LossScaler::scale: expected a floating loss; got ", loss.dtype());
  const Tensor wide = is_half(loss.dtype()) ? loss.to(DType::Float32) : loss;
  return options_.enabled ? wide * scale_ : wide;
}

bool LossScaler::step(OptState& state, const std::vector<std::pair<Tensor, Tensor>>& param_grads) {
  if (!options_.enabled) {
    state.step(param_grads);
    return true;
  }
  std::vector<std::pair<Tensor, Tensor>> unscaled;
  Tensor worst;  // the largest |g| of all, NaN if any is NaN (maximum propagates it)
  {
    autograd::PauseScope pause;
    // One unscaled tensor per gradient tensor, so that a gradient reached
    // twice (tied parameters) still counts once in update().
    std::unordered_map<const void*, Tensor> done;
    const double inv = 1.0 / scale_;
    for (const auto& [p, g] : param_grads) {
      if (!p.defined() || !g.defined()) {
        unscaled.emplace_back(p, g);
        continue;
      }
      FLX_CHECK(is_floating(g.dtype()), TypeError, "LossScaler::update: a gradient has element type ", g.dtype(),
                "; gradients must be floating");
      auto [it, fresh] = done.emplace(g.id(), Tensor());
      if (fresh) {
        it->second = (is_half(g.dtype()) ? g.to(DType::Float32) : g) * inv;
        if (it->second.numel()) {
          const Tensor m = maximum(abs(it->second));
          worst = worst.defined() ? maximum(worst, m) : m;
        }
      }
      unscaled.emplace_back(p, it->second);
    }
  }
  const bool finite = !worst.defined() || std::isfinite(worst.item<double>());
  if (!finite) {  // skip: nothing changes but the scale
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return false;
  }
  state.step(unscaled);
  if (++good_steps_ == options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (grown <= FLT_MAX) scale_ = grown;  // PyTorch keeps the scale in Float32
    good_steps_ = 0;
  }
  return true;
}

}  // namespace flx

// flx-train's learning-rate schedules, one rate per step, as a function of
// the step's place in the run alone: a run resumed from a checkpoint goes
// on with exactly the rates of an uninterrupted one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "args.hpp"

namespace flx_train {

// The learning rate of step `batch` (0-based) of epoch `epoch` (1-based)
// when an epoch has steps_per_epoch steps, t = (epoch - 1) * steps_per_epoch
// + batch counting steps over the run: a linear rise over the first
// a.warmup epochs (lr * (t + 1) / warm-up steps: the first step already
// moves), then "exp": lr * decay^(epoch-1), or "cosine":
// lr * (1 + cos(pi * t / T)) / 2 over the run's T steps (PyTorch's
// CosineAnnealingLR down to 0, stepped per batch). Never above lr: a
// warm-up that is not a whole number of steps, or shorter than one, ends at
// lr, not past it.
inline double learning_rate(const Args& a, int epoch, int64_t batch, int64_t steps_per_epoch) {
  const double s = double(steps_per_epoch), t = double(epoch - 1) * s + double(batch), warm = a.warmup * s;
  if (t < warm) return std::min(a.lr, a.lr * (t + 1) / warm);
  if (a.schedule == "cosine") return a.lr * 0.5 * (1 + std::cos(std::numbers::pi * t / (a.epochs * s)));
  return a.lr * std::pow(a.decay, epoch - 1);
}

}  // namespace flx_train

// A run whose loss or parameters become NaN or Inf stops, saying where,
// before it writes a checkpoint of them: the last good checkpoint stays.
// The losses stay on the device while the epoch runs (reading one each step
// would make a GPU wait for it); they are read only when their sum is not
// finite, to name the first step that was not.
#pragma once

#include <flx/flx.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "schedule.hpp"

namespace flx_train {

// Training diverged: main reports it as any failure at run time (status 1).
struct Diverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether every element of t is finite: x × 0 is 0 for finite x, NaN for
// Inf and NaN, so the sum says it in one reduction.
inline bool all_finite(const flx::Tensor& t) { return std::isfinite(flx::sum(t * 0.0).item<double>()); }

class EpochLosses {
 public:
  // Epoch `epoch` of steps_per_epoch steps, its first step the run's
  // first_step + 1 (the metrics' step count).
  EpochLosses(const Args& a, int epoch, int64_t steps_per_epoch, int64_t first_step)
      : args_(a), epoch_(epoch), steps_(steps_per_epoch), first_step_(first_step) {}
  void add(const flx::Tensor& loss) { losses_.push_back(loss); }

  // Throws Diverged when the epoch's mean loss (over every rank) is not
  // finite, naming this rank's first non-finite step, its learning rate
  // and what to do.
  void check(double mean_loss, const std::string& checkpoint) const {
    if (std::isfinite(mean_loss)) return;
    std::ostringstream os;
    os << "the training loss became " << (std::isnan(mean_loss) ? "NaN" : "infinite");
    size_t i = 0;
    while (i < losses_.size() && std::isfinite(losses_[i].item<double>())) ++i;
    if (i < losses_.size())
      os << " at step " << first_step_ + int64_t(i) + 1 << " (epoch " << epoch_ << ", batch " << i + 1 << " of "
         << steps_ << "; learning rate " << learning_rate(args_, epoch_, int64_t(i), steps_) << ")";
    else  // this rank's losses were finite: another rank's were not
      os << " in epoch " << epoch_ << " (on another rank)";
    os << ": training diverged. " << no_checkpoint(checkpoint) << advice();
    throw Diverged(os.str());
  }

  // Throws Diverged when a parameter of the model is NaN or Inf after the
  // epoch (a step's update can make them so with a finite loss).
  void check_model(const flx::State& model, const std::string& checkpoint) const {
    for (const auto& [name, t] : model)
      if (!all_finite(t))
        throw Diverged("the parameter " + name + " holds NaN or Inf after epoch " + std::to_string(epoch_) +
                       ": training diverged. " + no_checkpoint(checkpoint) + advice());
  }

 private:
  std::string no_checkpoint(const std::string& checkpoint) const {
    return "Epoch " + std::to_string(epoch_) + " was not saved; " + checkpoint +
           " keeps the last good epoch, if any. ";
  }
  std::string advice() const {
    std::ostringstream os;
    os << "Try a lower --lr (now " << args_.lr << ")";
    os << " or a longer --warmup (now " << args_.warmup << " epochs)";
    return os.str();
  }

  const Args& args_;
  int epoch_;
  int64_t steps_, first_step_;
  std::vector<flx::Tensor> losses_;
};

}  // namespace flx_train

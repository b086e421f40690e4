// flx-train's TensorBoard log (--logdir DIR): after each epoch, the scalars
// of the epoch's metrics line and a histogram of every tensor of the model
// ("model/layers.0.weight", ...), all at the run's step count (the metrics'
// "step"), then flushed, before the checkpoint is written.
//
// Each run adds one event file to DIR. The file starts with the run's
// description (text "run") and a purge step that makes TensorBoard hide
// older files' events from there on: step 0 for a fresh run (a new run
// in the same DIR replaces the old one's curves), S + 1 for a run resumed
// at step S (what the interrupted run logged after its last checkpoint is
// dropped; the resumed run logs it again).
#pragma once

#include <flx/flx.hpp>

#include <cstdint>
#include <string>

#include "epoch_metrics.hpp"

namespace flx_train {

class TrainingBoard {
 public:
  // resumed_at: the step count of the checkpoint a resumed run starts from;
  // -1 for a fresh run. description: what the "run" text says.
  TrainingBoard(const std::string& logdir, int64_t resumed_at, const std::string& description);
  void log_epoch(const EpochMetrics& m, const flx::State& model);

 private:
  flx::TensorBoardLogger tb_;
};

}  // namespace flx_train

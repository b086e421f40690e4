// flx-train's checkpoints. DIR/checkpoint.safetensors holds the model, the
// optimiser state and the epoch in one file that save() replaces atomically,
// so an interrupt at any moment leaves the previous epoch's checkpoint or
// the new one, never a model of one epoch beside an optimiser of another.
// DIR/model.safetensors is the model alone, for loadmodel() in other
// programs (or PyTorch); --resume never reads it.
#pragma once

#include <flx/flx.hpp>

#include <map>
#include <optional>
#include <string>

#include "precision.hpp"

namespace flx_train {

// Where a run stood besides its states: written into the checkpoint's
// metadata, read back by --resume.
struct RunPoint {
  int epoch = 0;
  int64_t step = 0;
  std::string precision = "f32";  // checkpoints of versions before --precision: f32
  // The loss scaler's scale and good steps in a row (f16 runs only).
  std::optional<std::pair<double, int64_t>> loss_scale;
};

// A checkpoint read back: the two states and where the run stood.
struct Checkpoint {
  std::string path;
  flx::State model, optimiser;
  RunPoint at;

  // Copies the states into a model and its optimiser state (made by setup()
  // with the same rule, or that rule in or out of MixedPrecision: a run may
  // resume in another precision, precision.hpp); a CheckpointError naming
  // the file otherwise. Floating tensors convert to the model's types.
  template <class M>
  void restore(const M& m, flx::OptState& opt) const {
    try {
      const RestorableStates s = across_precisions(model, optimiser, is_mixed(optimiser), opt);
      flx::loadmodel(m, s.model);
      flx::loadmodel(opt, s.optimiser);
    } catch (const flx::CheckpointError& e) {
      throw flx::CheckpointError(path + ": " + e.what());
    }
  }
};

class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir);
  std::string checkpoint_path() const;
  std::string model_path() const;

  // The checkpoint, checked (file, tensors, metadata) before anything is
  // used; a CheckpointError naming the file, the key, the value and what was
  // expected otherwise. Reads only: a refused resume changes nothing.
  Checkpoint load() const;

  // Makes the directory and removes the temporary files that a run killed
  // while saving left behind (the complete checkpoint is the other file).
  void prepare() const;

  // Saves the checkpoint of `at.epoch`, then the model alone.
  void save(const flx::State& model, const flx::State& optimiser, const RunPoint& at) const;
  // Writes model.safetensors alone: after a resume, since a run killed
  // between the two files of save() left the previous epoch's there.
  void save_model(const flx::State& model, const RunPoint& at) const;

 private:
  std::string dir_;
};

}  // namespace flx_train

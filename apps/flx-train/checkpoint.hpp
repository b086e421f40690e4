// flx-train's checkpoints. DIR/checkpoint.safetensors holds the model, the
// optimiser state and the epoch in one file that save() replaces atomically,
// so an interrupt at any moment leaves the previous epoch's checkpoint or
// the new one, never a model of one epoch beside an optimiser of another.
// DIR/model.safetensors is the model alone, for loadmodel() in other
// programs (or PyTorch); --resume never reads it.
#pragma once

#include <flx/flx.hpp>

#include <string>

namespace flx_train {

// A checkpoint read back: the two states and where the run stood.
struct Checkpoint {
  std::string path;
  flx::State model, optimiser;
  int epoch = 0;
  int64_t step = 0;

  // Copies the states into a model and its optimiser state (made by setup()
  // with the same rule); a CheckpointError naming the file otherwise.
  template <class M>
  void restore(const M& m, flx::OptState& opt) const {
    try {
      flx::loadmodel(m, model);
      flx::loadmodel(opt, optimiser);
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

  // Saves the checkpoint of `epoch`, then the model alone.
  void save(const flx::State& model, const flx::State& optimiser, int epoch, int64_t step) const;
  // Writes model.safetensors alone: after a resume, since a run killed
  // between the two files of save() left the previous epoch's there.
  void save_model(const flx::State& model, int epoch, int64_t step) const;

 private:
  std::string dir_;
};

}  // namespace flx_train

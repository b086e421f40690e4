// flx-train's command line: every argument is checked here, before anything
// is read or written, so a typo costs no training time.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace flx_train {

struct Args {
  std::string model = "mlp";  // or "cnn"
  int epochs = 10;  // the model's recipe: mlp 10, cnn 5
  int64_t batchsize = 64;
  uint64_t seed = 1;
  std::string device;  // backend name; empty: get_device()
  int ordinal = 0;     // of device
  bool ordinal_given = false;  // NAME:ORDINAL, not NAME
  // The learning rate of each step (schedule.hpp). The defaults are the
  // model's recipe (parse sets them, with epochs): mlp: exp, lr 1e-3, decay
  // 0.75, no warm-up; cnn: cosine, lr 3e-3, 0.3 epochs of warm-up.
  std::string schedule = "exp";  // or "cosine"
  double lr = 1e-3;
  double decay = 0.75;  // learning rate factor per epoch (exp)
  double warmup = 0;    // epochs (a fraction too) of linear warm-up
  std::string checkpoint_dir = "checkpoints";
  bool resume = false;
  std::string metrics;
  std::string logdir;  // TensorBoard's event files go here (empty: none)
  int64_t limit = 0;  // train on the first N examples only (0: all)
  // The model's precision: f32, or bf16/f16 (the model converted, the data
  // at each batch, MixedPrecision(Float32, Adam) around the rule, and for
  // f16 dynamic loss scaling).
  std::string precision = "f32";
  bool distributed = false;  // data-parallel over the ranks of an MPI job
  std::string command;  // the command line, as a shell would take it back (for the TensorBoard log)
};

// A bad command line: main prints it and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The arguments, parsed by CLI11 and each checked (a number is all digits and
// in range, the device name is known); a UsageError saying which flag, which
// value and what was expected otherwise. Prints the help and exits 0 for
// --help.
Args parse(int argc, char** argv);

// Can `path` be made as a directory (or is it one we may write in), and can
// `file` be created or appended to? Creates nothing; a UsageError naming the
// flag, the path and the system's reason otherwise.
void check_writable_dir(const std::string& flag, const std::string& path);
void check_writable_file(const std::string& flag, const std::string& path);

}  // namespace flx_train

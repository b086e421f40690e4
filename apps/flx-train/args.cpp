#include "args.hpp"

#include <flx/device.hpp>
#include <flx/error.hpp>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

namespace fs = std::filesystem;

namespace flx_train {

std::string usage_text() {
  return "usage: flx-train [--model mlp|cnn] [--epochs N] [--batchsize N] [--seed N] [--device NAME[:ORDINAL]]\n"
         "                 [--lr X] [--decay X] [--checkpoint-dir DIR] [--resume] [--metrics FILE] [--limit N]\n"
         "                 [--distributed]\n"
         "Trains a model on Fashion-MNIST (Adam, learning rate lr * decay^(epoch-1)): --model mlp (default), a\n"
         "784-256-256-10 MLP, or cnn, two blocks of 3x3 convolution, BatchNorm, relu and 2x2 max pooling\n"
         "(32 and 64 channels), then Dense(3136 => 128, relu) and Dense(128 => 10).\n"
         "The device defaults to get_device(): the GPU backend preference, else a functional GPU, else the CPU.\n"
         "Progress goes to stderr; one JSON object per epoch to stdout (and appended to --metrics FILE).\n"
         "After each epoch: DIR/checkpoint.safetensors (model, optimiser state and epoch, in one file written\n"
         "atomically: --resume continues from it) and DIR/model.safetensors (the model alone, for loadmodel).\n"
         "Defaults: --epochs 10 --batchsize 64 --seed 1 --lr 1e-3 --decay 0.75 --checkpoint-dir checkpoints\n"
         "--limit 0 (all training images). Exit status: 0 done, 1 failed, 2 bad arguments.\n"
         "--distributed: data-parallel training under an MPI launcher (mpiexec -n N flx-train --distributed):\n"
         "each rank trains on its share of the images (MPI; NCCL when the device is CUDA, one GPU per rank,\n"
         "each taking GPU node_rank % ndevices) and gradients are averaged across ranks. --batchsize is per\n"
         "rank, as in PyTorch's DDP: a step takes N x batchsize images. Rank 0 alone prints and writes the\n"
         "checkpoints (--resume reads them on rank 0 only).\n";
}

namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& expected) {
  throw UsageError("bad value \"" + value + "\" for " + flag + ": expected " + expected);
}

// The whole of v as a T (std::from_chars: no sign on unsigned numbers, no
// leading space, no trailing junk), else a UsageError.
template <class T>
T number(const std::string& flag, const std::string& v, const std::string& expected) {
  T x{};
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, x);
  if (v.empty() || ec != std::errc() || ptr != end) bad(flag, v, expected);
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(x)) bad(flag, v, expected);
  return x;
}

template <class T>
T at_least(const std::string& flag, const std::string& v, T lo, const std::string& expected) {
  T x = number<T>(flag, v, expected);
  if (x < lo) bad(flag, v, expected);
  return x;
}

// NAME[:ORDINAL], NAME one of supported_devices() (any case).
void parse_device(const std::string& v, Args& a) {
  const std::string expected = "NAME or NAME:ORDINAL, NAME one of CPU, CUDA, AMDGPU, Metal, OpenCL and ORDINAL >= 0";
  auto colon = v.find(':');
  try {
    a.device = std::string(flx::backend_name(flx::backend_id_from_name(v.substr(0, colon))));
  } catch (const flx::ArgumentError&) {
    bad("--device", v, expected);
  }
  if (colon != std::string::npos) {
    std::string ord = v.substr(colon + 1);
    int x = 0;
    auto [ptr, ec] = std::from_chars(ord.data(), ord.data() + ord.size(), x);
    if (ord.empty() || ec != std::errc() || ptr != ord.data() + ord.size() || x < 0) bad("--device", v, expected);
    a.ordinal = x;
    a.ordinal_given = true;
  }
}

// The nearest existing ancestor of p (p itself if it exists).
fs::path existing_part(fs::path p, std::error_code& ec) {
  p = fs::absolute(p, ec);
  std::error_code missing;  // set for a path that is not there: no error here
  while (!ec && !fs::exists(fs::symlink_status(p, missing)) && p.has_relative_path()) p = p.parent_path();
  return p;
}

// May we create entries in dir (an existing path)? errno's text if not.
std::string cannot_write_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::strerror(ENOTDIR);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  return "";
}

}  // namespace

void check_writable_dir(const std::string& flag, const std::string& path) {
  std::error_code ec;
  fs::path p = existing_part(path, ec);
  std::string why = ec ? ec.message() : cannot_write_in(p);
  if (!why.empty())
    throw UsageError(flag + " " + path + ": cannot create or write the directory (" + p.string() + ": " + why +
                     "); choose a directory you can write to");
}

void check_writable_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  fs::path p = existing_part(path, ec);
  std::string why;
  if (ec) why = ec.message();
  else if (p == fs::absolute(path, ec)) {  // the file is there: we append to it
    if (fs::is_directory(p, ec)) why = std::strerror(EISDIR);
    else if (::access(p.c_str(), W_OK) != 0) why = std::strerror(errno);
  } else {
    why = cannot_write_in(p);
  }
  if (!why.empty())
    throw UsageError(flag + " " + path + ": cannot create or append to the file (" + p.string() + ": " + why +
                     "); choose a path you can write to");
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(f + " needs a value");
      return argv[++i];
    };
    if (f == "-h" || f == "--help") {
      std::fputs(usage_text().c_str(), stdout);
      std::exit(0);
    } else if (f == "--epochs") {
      a.epochs = at_least<int>(f, value(), 1, "a whole number of epochs >= 1");
    } else if (f == "--batchsize") {
      a.batchsize = at_least<int64_t>(f, value(), 1, "a whole number of images per batch >= 1");
    } else if (f == "--seed") {
      a.seed = number<uint64_t>(f, value(), "a whole number from 0 to " +
                                                std::to_string(std::numeric_limits<uint64_t>::max()));
    } else if (f == "--device") {
      parse_device(value(), a);
    } else if (f == "--lr") {
      std::string v = value();
      a.lr = number<double>(f, v, "a learning rate > 0, such as 1e-3");
      if (!(a.lr > 0)) bad(f, v, "a learning rate > 0, such as 1e-3");
    } else if (f == "--decay") {
      std::string v = value();
      a.decay = number<double>(f, v, "a factor per epoch > 0 and <= 1, such as 0.75");
      if (!(a.decay > 0 && a.decay <= 1)) bad(f, v, "a factor per epoch > 0 and <= 1, such as 0.75");
    } else if (f == "--checkpoint-dir") {
      a.checkpoint_dir = value();
      if (a.checkpoint_dir.empty()) bad(f, "", "a directory");
    } else if (f == "--resume") {
      a.resume = true;
    } else if (f == "--metrics") {
      a.metrics = value();
      if (a.metrics.empty()) bad(f, "", "a file name");
    } else if (f == "--limit") {
      a.limit = at_least<int64_t>(f, value(), 0, "a number of training images >= 0 (0: all)");
    } else if (f == "--model") {
      a.model = value();
      if (a.model != "mlp" && a.model != "cnn") bad(f, a.model, "mlp or cnn");
    } else if (f == "--distributed") {
#if FLX_HAVE_DISTRIBUTED
      a.distributed = true;
#else
      throw UsageError("--distributed: this flx-train was built without MPI (flx::distributed is built when "
                       "OpenMPI is installed: Debian's libopenmpi-dev and openmpi-bin; then rebuild)");
#endif
    } else {
      throw UsageError("unknown option " + f);
    }
  }
  if (a.distributed && a.device == "CUDA" && a.ordinal_given)
    throw UsageError("--device CUDA:" + std::to_string(a.ordinal) +
                     " with --distributed: each rank takes the GPU node_rank % ndevices of its machine; give "
                     "--device CUDA, and hide GPUs with CUDA_VISIBLE_DEVICES");
  return a;
}

}  // namespace flx_train

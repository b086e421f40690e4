#include "args.hpp"

#include <CLI/CLI.hpp>
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

namespace {

// A value option: its flag, the placeholder and help that --help prints, and
// how its text becomes part of Args. CLI11 reads every value as text and the
// setters convert it strictly: CLI11's own conversions would take "1e3" as a
// batch size and wrap "-1" into a huge seed.
struct ValueOption {
  const char* flag;
  const char* placeholder;
  const char* help;
  void (*set)(Args&, const std::string& flag, const std::string& value);
};

// --model comes first: its recipe sets the defaults of the schedule's options.
const ValueOption value_options[] = {
    {"--model", "mlp|cnn",
     "the model (default mlp; both below)",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v != "mlp" && v != "cnn") bad(f, v, "mlp or cnn");
       a.model = v;
     }},
    {"--epochs", "N", "epochs to train (default: mlp 10, cnn 5)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.epochs = at_least<int>(f, v, 1, "a whole number of epochs >= 1");
     }},
    {"--batchsize", "N", "images per step (default 64; per rank with --distributed)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.batchsize = at_least<int64_t>(f, v, 1, "a whole number of images per batch >= 1");
     }},
    {"--seed", "N", "seed of the initial weights and the shuffles (default 1)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.seed = number<uint64_t>(f, v, "a whole number from 0 to " +
                                           std::to_string(std::numeric_limits<uint64_t>::max()));
     }},
    {"--device", "NAME[:ORDINAL]",
     "CPU, CUDA, AMDGPU, Metal or OpenCL; ORDINAL from 0 (default: get_device())",
     [](Args& a, const std::string&, const std::string& v) { parse_device(v, a); }},
    {"--schedule", "exp|cosine", "the learning rate's schedule (default: the model's; below)",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v != "exp" && v != "cosine") bad(f, v, "exp or cosine");
       a.schedule = v;
     }},
    {"--lr", "X", "Adam's learning rate: the schedule's peak (default: mlp 1e-3, cnn 3e-3)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.lr = number<double>(f, v, "a learning rate > 0, such as 1e-3");
       if (!(a.lr > 0)) bad(f, v, "a learning rate > 0, such as 1e-3");
     }},
    {"--decay", "X", "exp's factor per epoch: lr * decay^(epoch-1) (default 0.75)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.decay = number<double>(f, v, "a factor per epoch > 0 and <= 1, such as 0.75");
       if (!(a.decay > 0 && a.decay <= 1)) bad(f, v, "a factor per epoch > 0 and <= 1, such as 0.75");
     }},
    {"--warmup", "EPOCHS", "epochs of linear warm-up to lr, a fraction too (default: mlp 0, cnn 0.3)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.warmup = number<double>(f, v, "a number of epochs >= 0, such as 0.3");
       if (!(a.warmup >= 0)) bad(f, v, "a number of epochs >= 0, such as 0.3");
     }},
    {"--checkpoint-dir", "DIR",
     "where each epoch's checkpoint goes (default checkpoints; below)",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v.empty()) bad(f, v, "a directory");
       a.checkpoint_dir = v;
     }},
    {"--metrics", "FILE", "also append each epoch's JSON line to FILE",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v.empty()) bad(f, v, "a file name");
       a.metrics = v;
     }},
    {"--logdir", "DIR", "write TensorBoard logs to DIR each epoch (below)",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v.empty()) bad(f, v, "a directory");
       a.logdir = v;
     }},
    {"--precision", "f32|bf16|f16", "the model's element type (default f32; below)",
     [](Args& a, const std::string& f, const std::string& v) {
       if (v != "f32" && v != "bf16" && v != "f16") bad(f, v, "f32, bf16 or f16");
       a.precision = v;
     }},
    {"--limit", "N", "train on the first N images only (default 0: all 60000)",
     [](Args& a, const std::string& f, const std::string& v) {
       a.limit = at_least<int64_t>(f, v, 0, "a number of training images >= 0 (0: all)");
     }},
};

const char* const description =
    "flx-train: trains a model on Fashion-MNIST with Adam. Progress goes to stderr, one JSON object per epoch "
    "to stdout.";
const char* const footer =
    "Models: mlp, Dense 784-256-256-10 with relu; cnn, two blocks of 3x3 Conv, BatchNorm, relu and 2x2 MaxPool\n"
    "(32 and 64 channels), then Dense 3136-128-10.\n"
    "Schedules, per step: exp, lr * decay^(epoch-1); cosine, lr * (1 + cos(pi * step / steps)) / 2 over the\n"
    "whole run (--resume with more --epochs stretches it); either after --warmup epochs rising linearly to lr.\n"
    "Each model has its recipe: mlp, 10 epochs of exp with lr 1e-3 and decay 0.75; cnn, 5 epochs of cosine\n"
    "with lr 3e-3 and 0.3 epochs of warm-up.\n"
    "The device defaults to get_device(): the GPU backend preference, else a functional GPU, else the CPU.\n"
    "After each epoch: DIR/checkpoint.safetensors (model, optimiser state and epoch, in one file written\n"
    "atomically: --resume continues from it) and DIR/model.safetensors (the model alone, for loadmodel).\n"
    "--distributed: data-parallel training under an MPI launcher (mpiexec -n N flx-train --distributed): each\n"
    "rank trains on its share of the images (MPI; NCCL when the device is CUDA, one GPU per rank, each taking\n"
    "GPU node_rank % ndevices) and gradients are averaged across ranks. --batchsize is per rank, as in\n"
    "PyTorch's DDP: a step takes N x batchsize images. Rank 0 alone prints and writes the checkpoints.\n"
    "--logdir DIR: after each epoch, TensorBoard scalars (loss, test_accuracy, learning_rate,\n"
    "samples_per_second, epoch: the JSON line's values) and a histogram of every tensor of the model, at the\n"
    "run's step count; a resumed run adds its file to the same DIR. To look: tensorboard --logdir DIR.\n"
    "--precision bf16|f16: the model in BFloat16 or Float16 (BatchNorm's parameters stay Float32), each batch\n"
    "converted to it, Adam wrapped in MixedPrecision(Float32, ...) (Float32 copies of the weights in the\n"
    "optimiser state); f16 also scales the loss dynamically (LossScaler: PyTorch's GradScaler defaults) and\n"
    "skips a step whose gradients overflowed. Checkpoints keep their format; --resume may change the precision.\n"
    "Exit status: 0 done, 1 failed, 2 bad arguments.\n";

// flx-train's options in CLI11. Parsing fills only the texts; the setters
// convert them afterwards, in the order of the table.
struct CommandLine {
  CLI::App app{description, "flx-train"};
  std::vector<CLI::Option*> values;
  CLI::Option* resume;
  CLI::Option* distributed;

  CommandLine() {
    app.allow_extras();  // unknown options are ours to report, with our wording
    app.set_help_flag("-h,--help", "print this help and exit");
    app.get_formatter()->column_width(32);
    for (const ValueOption& o : value_options)
      values.push_back(app.add_option(o.flag, o.help)->type_name(o.placeholder)->take_last());
    resume = app.add_flag("--resume")->description("continue from the checkpoint in --checkpoint-dir");
    distributed = app.add_flag("--distributed")->description("data-parallel over the ranks of an MPI job (below)");
    app.footer(footer);
  }

  // CLI11's error for a value that is missing names its option first
  // ("--epochs: 1 required N missing"): said as before, "--epochs needs a value".
  static UsageError missing_value(const CLI::ArgumentMismatch& e) {
    const std::string m = e.what();
    for (const ValueOption& o : value_options)
      if (m.rfind(std::string(o.flag) + ":", 0) == 0)
        return UsageError(std::string(o.flag) + " needs a value (" + o.placeholder + ")");
    return UsageError(m);
  }

  // The value option `flag` as CLI11 read it.
  CLI::Option* value(const std::string& flag) const {
    size_t i = 0;
    while (value_options[i].flag != flag) ++i;
    return values[i];
  }

  // Runs the option's setter when the option was given.
  void set_if_given(Args& a, const ValueOption& o) const {
    if (const CLI::Option* v = value(o.flag); v->count() > 0) o.set(a, o.flag, v->as<std::string>());
  }

  Args parse(int argc, char** argv) {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::fputs(app.help().c_str(), stdout);
      std::exit(0);
    } catch (const CLI::ArgumentMismatch& e) {
      throw missing_value(e);
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    for (const std::string& extra : app.remaining())
      throw UsageError(extra.rfind('-', 0) == 0 ? "unknown option " + extra
                                               : "unexpected argument \"" + extra + "\": flx-train takes options only");
    // The model first: its recipe gives the schedule's defaults, which
    // the options given then override.
    Args a;
    set_if_given(a, value_options[0]);  // --model
    if (a.model == "cnn") {
      a.epochs = 5;
      a.schedule = "cosine";
      a.lr = 3e-3;
      a.warmup = 0.3;
    }
    for (const ValueOption& o : value_options)
      if (&o != &value_options[0]) set_if_given(a, o);
    if (a.schedule != "exp" && value("--decay")->count() > 0)
      throw UsageError("--decay applies to --schedule exp only, and this run's schedule is " + a.schedule +
                       "; add --schedule exp, or leave --decay out");
    if (a.warmup >= a.epochs)
      throw UsageError("--warmup " + value("--warmup")->as<std::string>() +
                       ": the warm-up must end before the last epoch (--epochs " + std::to_string(a.epochs) + ")");
    a.resume = resume->count() > 0;
    if (distributed->count() > 0) {
#if FLX_HAVE_DISTRIBUTED
      a.distributed = true;
      // Each rank would judge its own gradients' overflow before the
      // average, and a rank that skipped would leave the others waiting.
      if (a.precision == "f16")
        throw UsageError("--precision f16 with --distributed: loss scaling is not yet agreed across ranks; train "
                         "with --precision bf16 (which needs no loss scaling), or without --distributed");
#else
      throw UsageError("--distributed: this flx-train was built without MPI (flx::distributed is built when "
                       "OpenMPI is installed: Debian's libopenmpi-dev and openmpi-bin; then rebuild)");
#endif
    }
    return a;
  }
};

}  // namespace

namespace {

// A word as a POSIX shell takes it back: as it is when it holds only safe
// characters, else in single quotes.
std::string shell_word(const std::string& w) {
  const bool safe = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                      "0123456789-_=+.,:/@%") == std::string::npos;
  if (safe) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

Args parse(int argc, char** argv) {
  Args a = CommandLine().parse(argc, argv);
  a.command = "flx-train";
  for (int i = 1; i < argc; ++i) a.command += " " + shell_word(argv[i]);
  if (a.distributed && a.device == "CUDA" && a.ordinal_given)
    throw UsageError("--device CUDA:" + std::to_string(a.ordinal) +
                     " with --distributed: each rank takes the GPU node_rank % ndevices of its machine; give "
                     "--device CUDA, and hide GPUs with CUDA_VISIBLE_DEVICES");
  return a;
}

}  // namespace flx_train

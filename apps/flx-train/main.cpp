// flx-train: the main job. Trains an MLP on Fashion-MNIST on any device,
// with a progress bar (stderr), test accuracy after each epoch, a checkpoint
// each epoch, --resume, and metrics as JSON lines (stdout, and --metrics FILE).
//
//   flx-train [--epochs 10] [--batchsize 64] [--seed 1] [--device OpenCL[:1]]
//             [--lr 1e-3] [--decay 0.75] [--checkpoint-dir DIR] [--resume]
//             [--metrics FILE] [--limit N]
#include <flx/flx.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "progress.hpp"

using namespace flx;
namespace fs = std::filesystem;

namespace {

struct Args {
  int epochs = 10;
  int64_t batchsize = 64;
  uint64_t seed = 1;
  std::string device;  // empty: get_device()
  double lr = 1e-3;
  double decay = 0.75;  // learning rate factor per epoch
  std::string checkpoint_dir = "checkpoints";
  bool resume = false;
  std::string metrics;
  int64_t limit = 0;  // train on the first N examples only (0: all)
};

[[noreturn]] void usage(const std::string& error) {
  if (!error.empty()) std::fprintf(stderr, "flx-train: %s\n\n", error.c_str());
  std::fprintf(stderr,
               "usage: flx-train [--epochs N] [--batchsize N] [--seed N] [--device NAME[:ORDINAL]]\n"
               "                 [--lr X] [--decay X] [--checkpoint-dir DIR] [--resume] [--metrics FILE] [--limit N]\n"
               "Trains a 784-256-256-10 MLP on Fashion-MNIST (Adam, learning rate lr * decay^(epoch-1)).\n"
               "The device defaults to get_device(): the GPU backend preference, else a functional GPU, else the CPU.\n"
               "Progress goes to stderr; one JSON object per epoch to stdout (and appended to --metrics FILE).\n"
               "Checkpoints: DIR/model.safetensors and DIR/optimiser.safetensors after each epoch.\n");
  std::exit(error.empty() ? 0 : 2);
}

template <class T>
T number(const std::string& flag, const std::string& v) {
  std::istringstream is(v);
  T x;
  if (!(is >> x) || !is.eof()) usage("bad value for " + flag + ": \"" + v + "\"");
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(f + " needs a value");
      return argv[++i];
    };
    if (f == "-h" || f == "--help") usage("");
    else if (f == "--epochs") a.epochs = number<int>(f, value());
    else if (f == "--batchsize") a.batchsize = number<int64_t>(f, value());
    else if (f == "--seed") a.seed = number<uint64_t>(f, value());
    else if (f == "--device") a.device = value();
    else if (f == "--lr") a.lr = number<double>(f, value());
    else if (f == "--decay") a.decay = number<double>(f, value());
    else if (f == "--checkpoint-dir") a.checkpoint_dir = value();
    else if (f == "--resume") a.resume = true;
    else if (f == "--metrics") a.metrics = value();
    else if (f == "--limit") a.limit = number<int64_t>(f, value());
    else usage("unknown option " + f);
  }
  if (a.epochs < 1) usage("--epochs must be at least 1");
  if (a.batchsize < 1) usage("--batchsize must be at least 1");
  return a;
}

Device pick_device(const std::string& spec) {
  if (spec.empty()) return get_device();
  auto colon = spec.find(':');
  std::string name = spec.substr(0, colon);
  int ordinal = colon == std::string::npos ? 0 : number<int>("--device", spec.substr(colon + 1));
  return get_device(name, ordinal);
}

using Model = decltype(Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)));

// Fraction of the test set the model classifies correctly.
double accuracy(const Model& model, const Tensor& x, const Tensor& y) {
  int64_t n = x.size(1), correct = 0;
  for (int64_t i = 0; i < n; i += 1000) {
    int64_t j = std::min(n, i + 1000);
    correct += sum(onecold(model(x.slice_last(i, j))) == y.slice_last(i, j)).item<int64_t>();
  }
  return double(correct) / double(n);
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    set_seed(args.seed);
    Device dev = pick_device(args.device);
    auto [xtr4, ytr] = datasets::fashion_mnist("train");
    auto [xte4, yte] = datasets::fashion_mnist("test");
    Tensor xtr = reshape(xtr4, {784, -1}), xte = reshape(xte4, {784, -1});
    if (args.limit > 0 && args.limit < xtr.size(1)) {
      xtr = xtr.slice_last(0, args.limit);
      ytr = ytr.slice_last(0, args.limit);
    }
    std::fprintf(stderr, "flx-train: Fashion-MNIST, %lld training and %lld test images, on %s\n",
                 static_cast<long long>(xtr.size(1)), static_cast<long long>(xte.size(1)), dev.str().c_str());

    Model model = Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)) | dev;
    OptState opt = setup(Adam(args.lr), model);
    fs::create_directories(args.checkpoint_dir);
    const std::string model_path = (fs::path(args.checkpoint_dir) / "model.safetensors").string();
    const std::string opt_path = (fs::path(args.checkpoint_dir) / "optimiser.safetensors").string();
    int first_epoch = 1;
    int64_t step = 0;
    if (args.resume) {
      if (!fs::exists(model_path) || !fs::exists(opt_path))
        throw ArgumentError("--resume: no checkpoint in " + args.checkpoint_dir + " (expected model.safetensors and "
                            "optimiser.safetensors); train without --resume first");
      State ms = load(model_path), os = load(opt_path);
      const std::string epoch = ms.metadata().count("epoch") ? ms.metadata().at("epoch") : "?";
      const std::string opt_epoch = os.metadata().count("epoch") ? os.metadata().at("epoch") : "?";
      if (epoch == "?" || epoch != opt_epoch)
        throw CheckpointError("--resume: " + model_path + " is from epoch " + epoch + " but " + opt_path +
                              " from epoch " + opt_epoch + "; the run was cut off between the two writes. "
                              "Train without --resume, or restore a matching pair");
      loadmodel(model, ms);
      loadmodel(opt, os);
      first_epoch = std::stoi(epoch) + 1;
      if (ms.metadata().count("step")) step = std::stoll(ms.metadata().at("step"));
      std::fprintf(stderr, "flx-train: resumed after epoch %d\n", first_epoch - 1);
    }

    Tensor xte_d = xte | dev, yte_d = yte | dev;  // the test set fits: move it once
    flx_train::MetricsLog metrics(args.metrics);
    const bool terminal = isatty(STDERR_FILENO);
    double acc = 0;
    for (int epoch = first_epoch; epoch <= args.epochs; ++epoch) {
      adjust(opt, args.lr * std::pow(args.decay, epoch - 1));
      // One seeded shuffle per epoch, so a resumed run sees the same batches.
      DataLoader loader(std::tuple{xtr, ytr},
                        {.batchsize = args.batchsize, .shuffle = true, .seed = args.seed * 1000003 + uint64_t(epoch)});
      flx_train::ProgressBar bar(epoch, args.epochs, loader.size(), terminal);
      const auto t0 = std::chrono::steady_clock::now();
      // The running loss stays on the device: reading it every step would
      // make a GPU wait for each step to finish before queueing the next.
      Tensor loss_sum = zeros(Float32, Shape{}) | dev;
      int64_t seen = 0, batch = 0;
      for (auto [x, y] : loader | dev) {
        auto [l, grads] =
            withgradient([&](const Model& m) { return logitcrossentropy(m(x), onehotbatch(y, 10)); }, model);
        update(opt, model, std::get<0>(grads));
        int64_t b = x.size(1);
        loss_sum = loss_sum + l * double(b);
        seen += b;
        ++step;
        if (bar.due(++batch)) bar.step(batch, loss_sum.item<double>() / double(seen), seen);
      }
      const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      acc = accuracy(model, xte_d, yte_d);
      const double mean_loss = loss_sum.item<double>() / double(seen);
      bar.finish(mean_loss, acc, seen);
      std::ostringstream js;
      js << "{\"epoch\":" << epoch << ",\"step\":" << step << ",\"loss\":" << mean_loss
         << ",\"test_accuracy\":" << acc << ",\"samples\":" << seen << ",\"train_seconds\":" << train_s
         << ",\"samples_per_second\":" << double(seen) / train_s << ",\"device\":\"" << dev.str() << "\"}";
      metrics.write(js.str());
      std::printf("%s\n", js.str().c_str());
      std::fflush(stdout);
      // Each file is written atomically; the optimiser first, so that a model
      // file of epoch N always has its optimiser state beside it.
      State os = state(opt), ms = state(model);
      os.metadata()["epoch"] = ms.metadata()["epoch"] = std::to_string(epoch);
      ms.metadata()["step"] = std::to_string(step);
      save(opt_path, os);
      save(model_path, ms);
    }
    if (first_epoch > args.epochs)
      std::fprintf(stderr, "flx-train: the checkpoint is already at epoch %d of %d; nothing to do\n", first_epoch - 1,
                   args.epochs);
    else
      std::fprintf(stderr, "flx-train: test accuracy %.4f after %d epochs\n", acc, args.epochs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flx-train: %s\n", e.what());
    return 1;
  }
}

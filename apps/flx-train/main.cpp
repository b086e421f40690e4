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
#include <filesystem>
#include <sstream>
#include <string>

#include "args.hpp"
#include "checkpoint.hpp"
#include "progress.hpp"

using namespace flx;
using namespace flx_train;
namespace fs = std::filesystem;

namespace {

using Model = decltype(Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)));

// Fraction of the test set the model classifies correctly; the UInt8 images
// are widened 1000 at a time, on the device.
double accuracy(const Model& model, const Tensor& pixels, const Tensor& y) {
  int64_t n = pixels.size(1), correct = 0;
  for (int64_t i = 0; i < n; i += 1000) {
    int64_t j = std::min(n, i + 1000);
    const Tensor x = datasets::scaled_pixels(pixels.slice_last(i, j));
    correct += sum(onecold(model(x)) == y.slice_last(i, j)).item<int64_t>();
  }
  return double(correct) / double(n);
}

// A training batch as the model takes it, made on the loader's background
// thread before the batch goes to the device: Float32 pixels in [0, 1] and
// one-hot targets (made on the host: onehotbatch checks its labels' range,
// which on a GPU would mean waiting for it at every step).
std::tuple<Tensor, Tensor> training_batch(const std::tuple<Tensor, Tensor>& b) {
  return {datasets::scaled_pixels(std::get<0>(b)), onehotbatch(std::get<1>(b), 10)};
}

// Checks every argument and output path; creates nothing.
Args checked_args(int argc, char** argv) {
  Args a = parse(argc, argv);
  check_writable_dir("--checkpoint-dir", a.checkpoint_dir);
  if (!a.metrics.empty()) check_writable_file("--metrics", a.metrics);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = checked_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "flx-train: %s\n\n%s", e.what(), usage_text().c_str());
    return 2;
  }
  try {
    set_seed(args.seed);
    Device dev = args.device.empty() ? get_device() : get_device(args.device, args.ordinal);
    Model model = Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)) | dev;
    OptState opt = setup(Adam(args.lr), model);
    const CheckpointDir checkpoints(args.checkpoint_dir);
    int first_epoch = 1;
    int64_t step = 0;
    if (args.resume) {  // everything checked before anything is written
      Checkpoint c = checkpoints.load();
      c.restore(model, opt);
      first_epoch = c.epoch + 1;
      step = c.step;
    }
    checkpoints.prepare();
    if (args.resume) {
      checkpoints.save_model(state(model), first_epoch - 1, step);
      std::fprintf(stderr, "flx-train: resumed after epoch %d\n", first_epoch - 1);
    }
    if (!args.metrics.empty()) fs::create_directories(fs::absolute(args.metrics).parent_path());
    MetricsLog metrics(args.metrics);

    // The images stay UInt8, as stored (a quarter of Float32's memory);
    // each batch is widened on its way to the device (training_batch).
    auto [xtr4, ytr] = datasets::fashion_mnist("train", UInt8);
    auto [xte4, yte] = datasets::fashion_mnist("test", UInt8);
    Tensor xtr = reshape(xtr4, {784, -1}), xte = reshape(xte4, {784, -1});
    if (args.limit > 0 && args.limit < xtr.size(1)) {
      xtr = xtr.slice_last(0, args.limit);
      ytr = ytr.slice_last(0, args.limit);
    }
    std::fprintf(stderr, "flx-train: Fashion-MNIST, %lld training and %lld test images, on %s\n",
                 static_cast<long long>(xtr.size(1)), static_cast<long long>(xte.size(1)), dev.str().c_str());

    Tensor xte_d = xte | dev, yte_d = yte | dev;  // the test set fits: move it once
    const bool terminal = isatty(STDERR_FILENO);
    double acc = 0;
    for (int epoch = first_epoch; epoch <= args.epochs; ++epoch) {
      adjust(opt, args.lr * std::pow(args.decay, epoch - 1));
      // One seeded shuffle per epoch, so a resumed run sees the same batches.
      DataLoader loader(mapobs(training_batch, std::tuple{xtr, ytr}),
                        {.batchsize = args.batchsize, .shuffle = true, .seed = args.seed * 1000003 + uint64_t(epoch)});
      flx_train::ProgressBar bar(epoch, args.epochs, loader.size(), terminal);
      const auto t0 = std::chrono::steady_clock::now();
      // The running loss stays on the device: reading it every step would
      // make a GPU wait for each step to finish before queueing the next.
      Tensor loss_sum = zeros(Float32, Shape{}) | dev;
      int64_t seen = 0, batch = 0;
      for (auto [x, y] : loader | dev) {
        auto [l, grads] = withgradient([&](const Model& m) { return logitcrossentropy(m(x), y); }, model);
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
      checkpoints.save(state(model), state(opt), epoch, step);
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

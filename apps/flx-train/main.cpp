// flx-train: the main job. Trains an MLP or a CNN on Fashion-MNIST on any device,
// with a progress bar (stderr), test accuracy after each epoch, a checkpoint
// each epoch, --resume, metrics as JSON lines (stdout, and --metrics FILE)
// and TensorBoard logs (--logdir DIR). With --distributed, under mpiexec,
// data-parallel over the ranks of the job.
//
//   flx-train [--model mlp|cnn] [--epochs N] [--batchsize 64] [--seed 1] [--device OpenCL[:1]]
//             [--schedule exp|cosine] [--lr X] [--decay X] [--warmup EPOCHS] [--checkpoint-dir DIR]
//             [--resume] [--metrics FILE] [--logdir DIR] [--precision f32|bf16|f16] [--limit N]
//             [--distributed]
#include <flx/flx.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "args.hpp"
#include "checkpoint.hpp"
#include "divergence.hpp"
#include "epoch_metrics.hpp"
#include "launcher.hpp"
#include "precision.hpp"
#include "progress.hpp"
#include "schedule.hpp"
#include "team.hpp"
#include "training_board.hpp"
#if FLX_HAVE_DISTRIBUTED
#include "team_mpi.hpp"
#endif

using namespace flx;
using namespace flx_train;
namespace fs = std::filesystem;

namespace {

auto mlp() { return Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)); }

// The loader's batches are (784, N) columns: the CNN's first layer views
// them as (28, 28, 1, N) images (a reshape: no copy).
struct Images {
  Tensor operator()(const Tensor& x) const { return reshape(x, {28, 28, 1, -1}); }
  static const char* name() { return "images"; }
};
auto cnn() {
  return Chain(Images(), Conv({3, 3}, 1, 32, {.pad = 1}), BatchNorm(32, relu), MaxPool({2, 2}),
               Conv({3, 3}, 32, 64, {.pad = 1}), BatchNorm(64, relu), MaxPool({2, 2}), Flatten(),
               Dense(64 * 7 * 7, 128, relu), Dense(128, 10));
}

// How many images of `test` (UInt8 pixels, labels) the model classifies
// correctly; the pixels are widened `piece` at a time (the training batch),
// on the device, to the model's precision, so that evaluation needs no more
// memory than a training step (a CNN's activations for 1000 images are
// hundreds of MB), and reuses the blocks of the training step's sizes.
template <class Model, class Data>
int64_t correct(const Model& model, const Data& test, int64_t piece, DType precision) {
  const int64_t n = numobs(test);
  int64_t right = 0;
  for (int64_t i = 0; i < n; i += piece) {
    auto [pixels, y] = getobs(test, i, std::min(n, i + piece));
    const Tensor hits = onecold(model(datasets::scaled_pixels(pixels).to(precision))) == y;
    right += sum(hits).item<int64_t>();
  }
  return right;
}

// A training batch as the model takes it, made on the loader's background
// thread before the batch goes to the device: pixels in [0, 1] in the
// model's precision (Float32 values, rounded for bf16 and f16) and one-hot
// targets (made on the host: onehotbatch checks its labels' range, which on
// a GPU would mean waiting for it at every step).
struct TrainingBatch {
  DType precision;
  std::tuple<Tensor, Tensor> operator()(const std::tuple<Tensor, Tensor>& b) const {
    return {datasets::scaled_pixels(std::get<0>(b)).to(precision), onehotbatch(std::get<1>(b), 10)};
  }
};

// The optimiser state: Adam, or for bf16 and f16 Adam inside
// MixedPrecision(Float32, ...) (Float32 copies of the weights), each as the
// team wants it (averaged across ranks with --distributed).
template <class Team, class Model>
OptState optimiser(const Args& args, const Team& team, const Model& model) {
  if (args.precision == "f32") return setup(team.rule(Adam(args.lr)), model);
  return setup(team.rule(MixedPrecision(Float32, Adam(args.lr))), model);
}

// Checks every argument and output path; creates nothing.
Args checked_args(int argc, char** argv) {
  Args a = parse(argc, argv);
  check_writable_dir("--checkpoint-dir", a.checkpoint_dir);
  if (!a.metrics.empty()) check_writable_file("--metrics", a.metrics);
  if (!a.logdir.empty()) check_writable_dir("--logdir", a.logdir);
  return a;
}

// Trains as the team says: alone, or as one rank of a data-parallel job,
// where only the leader prints and writes files.
template <class Team, class Model>
int train(const Args& args, const Team& team, const Model& initial) {
  if (args.limit > 0 && args.limit < team.size()) {
    if (team.leader())
      std::fprintf(stderr, "flx-train: --limit %lld: fewer training images than the %d ranks; each needs one\n",
                   static_cast<long long>(args.limit), team.size());
    return 2;
  }
  const Device dev = team.device();
  const DType precision = precision_dtype(args.precision);
  Model model = to_precision(initial, precision) | dev;
  OptState opt = optimiser(args, team, model);
  // Float16 only: BFloat16 has Float32's range.
  LossScaler scaler({.enabled = args.precision == "f16"});
  const CheckpointDir checkpoints(args.checkpoint_dir);
  int first_epoch = 1;
  int64_t step = 0;
  // Where the run stands, for the checkpoints.
  auto run_point = [&](int epoch) {
    RunPoint at{.epoch = epoch, .step = step, .precision = args.precision};
    if (scaler.options().enabled) at.loss_scale = std::pair{scaler.scale(), scaler.good_steps()};
    return at;
  };
  // The leader alone reads the checkpoint and writes files; when it cannot,
  // every rank stops (status 1), before training.
  std::optional<MetricsLog> metrics;
  std::optional<TrainingBoard> board;
  std::string failed;
  if (team.leader()) {
    try {
      if (args.resume) {  // everything checked before anything is written
        Checkpoint c = checkpoints.load();
        c.restore(model, opt);
        first_epoch = c.at.epoch + 1;
        step = c.at.step;
        if (c.at.loss_scale && scaler.options().enabled) scaler.restore(c.at.loss_scale->first, c.at.loss_scale->second);
        if (c.at.precision != args.precision)
          std::fprintf(stderr, "flx-train: the checkpoint was trained in %s: its weights are converted to %s%s\n",
                       c.at.precision.c_str(), args.precision.c_str(),
                       args.precision == "f32" ? " (from its optimiser's Float32 copies)" : "");
      }
      checkpoints.prepare();
      if (args.resume) {
        checkpoints.save_model(state(model), run_point(first_epoch - 1));
        std::fprintf(stderr, "flx-train: resumed after epoch %d\n", first_epoch - 1);
      }
      if (!args.metrics.empty()) fs::create_directories(fs::absolute(args.metrics).parent_path());
      metrics.emplace(args.metrics);
      if (!args.logdir.empty() && first_epoch <= args.epochs) {
        std::ostringstream about;
        about << args.command << "\n";
        if (args.resume) about << "resumed after epoch " << first_epoch - 1 << " (step " << step << ")\n";
        about << "device: " << dev.str() << team.describe() << "\n";
        if (args.precision != "f32") about << "precision: " << args.precision << "\n";
        about << initial;
        board.emplace(args.logdir, args.resume ? step : -1, about.str());
      }
    } catch (const std::exception& e) {
      failed = e.what();
    }
  }
  if (!team.all(failed.empty())) {
    if (team.leader()) std::fprintf(stderr, "flx-train: %s\n", failed.c_str());
    return 1;
  }
  team.synchronize(model, opt, first_epoch, step);

  // The images stay UInt8, as stored (a quarter of Float32's memory);
  // each batch is widened on its way to the device (training_batch).
  auto [xtr4, ytr] = datasets::fashion_mnist("train", UInt8);
  auto [xte4, yte] = datasets::fashion_mnist("test", UInt8);
  Tensor xtr = reshape(xtr4, {784, -1}), xte = reshape(xte4, {784, -1});
  int64_t ntrain = args.limit > 0 ? std::min(args.limit, xtr.size(1)) : xtr.size(1);
  // Equal shares, so that every rank takes the same steps of the same size:
  // at most size - 1 images are left out (PyTorch's drop_last for shares).
  ntrain -= ntrain % team.size();
  if (ntrain < xtr.size(1)) {
    xtr = xtr.slice_last(0, ntrain);
    ytr = ytr.slice_last(0, ntrain);
  }
  const auto train_data = team.share(std::tuple{xtr, ytr});
  const auto test_data = team.share(std::tuple{xte | dev, yte | dev});  // the test set fits: moved once
  if (team.leader())
    std::fprintf(stderr, "flx-train: Fashion-MNIST, %lld training and %lld test images, on %s%s\n",
                 static_cast<long long>(ntrain), static_cast<long long>(xte.size(1)), dev.str().c_str(),
                 team.describe().c_str());

  const bool terminal = isatty(STDERR_FILENO);
  double acc = 0;
  for (int epoch = first_epoch; epoch <= args.epochs; ++epoch) {
    // One seeded shuffle per epoch, so a resumed run sees the same batches.
    DataLoader loader(mapobs(TrainingBatch{precision}, train_data),
                      {.batchsize = args.batchsize, .shuffle = true, .seed = args.seed * 1000003 + uint64_t(epoch)});
    std::optional<ProgressBar> bar;
    if (team.leader()) bar.emplace(epoch, args.epochs, loader.size(), terminal);
    const auto t0 = std::chrono::steady_clock::now();
    // The running loss stays on the device: reading it every step would
    // make a GPU wait for each step to finish before queueing the next.
    Tensor loss_sum = zeros(Float32, Shape{}) | dev;
    EpochLosses losses(args, epoch, loader.size(), step);
    int64_t seen = 0, batch = 0;
    double lr = 0;
    for (auto [x, y] : loader | dev) {
      lr = learning_rate(args, epoch, batch, loader.size());
      adjust(opt, lr);
      // The loss is Float32 in every precision (flx's losses widen halves);
      // scaled only for f16 (scaler.scale() is 1 otherwise).
      const double loss_scale = scaler.scale();
      auto [l, grads] =
          withgradient([&](const Model& m) { return scaler.scale(logitcrossentropy(m(x), y)); }, model);
      // A step of f16 whose gradients overflowed is skipped (the scale
      // backs off): `step` counts the optimiser steps taken.
      if (scaler.update(opt, model, std::get<0>(grads))) ++step;
      int64_t b = x.size(1);
      const Tensor unscaled = l * (1.0 / loss_scale);
      loss_sum = loss_sum + unscaled * double(b);
      losses.add(unscaled);
      seen += b;
      ++batch;  // the bar shows the leader's own running loss
      if (bar && bar->due(batch)) bar->step(batch, loss_sum.item<double>() / double(seen), seen * team.size());
    }
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    acc = team.sum(double(correct(model, test_data, args.batchsize, precision))) / double(xte.size(1));
    const double samples = team.sum(double(seen));
    const double mean_loss = team.sum(loss_sum.item<double>()) / samples;
    // NaN or Inf: stop (every rank alike) before anything of it is saved.
    losses.check(mean_loss, checkpoints.checkpoint_path());
    losses.check_model(state(model), checkpoints.checkpoint_path());
    if (!team.leader()) continue;
    bar->finish(mean_loss, acc, int64_t(samples));
    const EpochMetrics m{.epoch = epoch,
                         .step = step,
                         .loss = mean_loss,
                         .test_accuracy = acc,
                         .samples = int64_t(samples),
                         .train_seconds = train_s,
                         .samples_per_second = samples / train_s,
                         .learning_rate = lr,
                         .device = dev.str(),
                         .workers = Team::distributed ? team.size() : 0};
    const std::string js = m.json();
    metrics->write(js);
    std::printf("%s\n", js.c_str());
    std::fflush(stdout);
    // TensorBoard before the checkpoint: a run killed in between logged an
    // epoch its resumption logs again, and the purge step hides the first.
    if (board) board->log_epoch(m, state(model));
    checkpoints.save(state(model), state(opt), run_point(epoch));
  }
  if (!team.leader()) return 0;
  if (first_epoch > args.epochs)
    std::fprintf(stderr, "flx-train: the checkpoint is already at epoch %d of %d; nothing to do\n", first_epoch - 1,
                 args.epochs);
  else
    std::fprintf(stderr, "flx-train: test accuracy %.4f after %d epochs\n", acc, args.epochs);
  return 0;
}

// Makes the team (the device; MPI with --distributed) and trains. A failure
// at run time ends this process with status 1, and with --distributed the
// whole job (MPI_Abort), so that no rank is left waiting for it.
template <class Team>
int run(const Args& args) {
  std::optional<Team> team;
  try {
    team.emplace(args);
    set_seed(args.seed);  // the model's initial weights
    return args.model == "cnn" ? train(args, *team, cnn()) : train(args, *team, mlp());
  } catch (const std::exception& e) {
    return team ? team->fail(e.what()) : Team::fail_to_start(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {  // on every rank, before MPI starts
    args = checked_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "flx-train: %s\nRun flx-train --help for every option.\n", e.what());
    return 2;
  }
  // Several processes of one launcher without --distributed: each would
  // train alone and write the same files.
  if (const auto world = launched_world(); !args.distributed && world && world->size > 1) {
    std::fprintf(stderr,
                 "flx-train: this is one of %lld processes of an MPI launcher (%s=%lld), but without --distributed "
                 "each would train alone and write the same checkpoint directory. Add --distributed to train as "
                 "one data-parallel job (mpiexec -n %lld flx-train --distributed ...), or run one flx-train "
                 "without the launcher.\n",
                 static_cast<long long>(world->size), world->variable.c_str(), static_cast<long long>(world->size),
                 static_cast<long long>(world->size));
    return 2;
  }
#if FLX_HAVE_DISTRIBUTED
  if (args.distributed) return run<MpiTeam>(args);
#endif
  return run<SoloTeam>(args);
}

// flx-train: the main job. Trains an MLP or a CNN on Fashion-MNIST on any device,
// with a progress bar (stderr), test accuracy after each epoch, a checkpoint
// each epoch, --resume, metrics as JSON lines (stdout, and --metrics FILE)
// and TensorBoard logs (--logdir DIR). With --distributed, under mpiexec,
// data-parallel over the ranks of the job.
//
//   flx-train [--model mlp|cnn] [--epochs N] [--batchsize 64] [--seed 1] [--device OpenCL[:1]]
//             [--schedule exp|cosine] [--lr X] [--decay X] [--warmup EPOCHS] [--checkpoint-dir DIR]
//             [--resume] [--metrics FILE] [--logdir DIR] [--limit N] [--distributed]
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
// on the device, so that evaluation needs no more memory than a training
// step (a CNN's activations for 1000 images are hundreds of MB), and reuses
// the blocks of the training step's sizes.
template <class Model, class Data>
int64_t correct(const Model& model, const Data& test, int64_t piece) {
  const int64_t n = numobs(test);
  int64_t right = 0;
  for (int64_t i = 0; i < n; i += piece) {
    auto [pixels, y] = getobs(test, i, std::min(n, i + piece));
    const Tensor hits = onecold(model(datasets::scaled_pixels(pixels))) == y;
    right += sum(hits).item<int64_t>();
  }
  return right;
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
  Model model = initial | dev;
  OptState opt = setup(team.rule(Adam(args.lr)), model);
  const CheckpointDir checkpoints(args.checkpoint_dir);
  int first_epoch = 1;
  int64_t step = 0;
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
        first_epoch = c.epoch + 1;
        step = c.step;
      }
      checkpoints.prepare();
      if (args.resume) {
        checkpoints.save_model(state(model), first_epoch - 1, step);
        std::fprintf(stderr, "flx-train: resumed after epoch %d\n", first_epoch - 1);
      }
      if (!args.metrics.empty()) fs::create_directories(fs::absolute(args.metrics).parent_path());
      metrics.emplace(args.metrics);
      if (!args.logdir.empty() && first_epoch <= args.epochs) {
        std::ostringstream about;
        about << args.command << "\n";
        if (args.resume) about << "resumed after epoch " << first_epoch - 1 << " (step " << step << ")\n";
        about << "device: " << dev.str() << team.describe() << "\n" << initial;
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
    DataLoader loader(mapobs(training_batch, train_data),
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
      auto [l, grads] = withgradient([&](const Model& m) { return logitcrossentropy(m(x), y); }, model);
      update(opt, model, std::get<0>(grads));
      int64_t b = x.size(1);
      loss_sum = loss_sum + l * double(b);
      losses.add(l);
      seen += b;
      ++step;
      ++batch;  // the bar shows the leader's own running loss
      if (bar && bar->due(batch)) bar->step(batch, loss_sum.item<double>() / double(seen), seen * team.size());
    }
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    acc = team.sum(double(correct(model, test_data, args.batchsize))) / double(xte.size(1));
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
    checkpoints.save(state(model), state(opt), epoch, step);
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

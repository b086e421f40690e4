// The program the fault tests run under mpirun (test_faults.py on one
// machine, test_two_hosts.py across two network namespaces): an MLP trained
// data-parallel in Float64 with DistributedOptimizer, each rank on its
// share of every batch, so that a driver can stop, kill or crash a rank at
// a known step and watch the job end.
//
//   fault_worker [--steps N] [--step-sleep SECONDS]
//                [--throw-at STEP | --stall-at STEP | --mismatch KIND] --on-rank R
//
// --throw-at: rank R throws a std::runtime_error at STEP, uncaught.
// --stall-at: rank R stops making progress at STEP (sleeps in its own code,
// as a rank stuck in a loop would), while flx's thread still answers.
// --mismatch: before training, rank R makes a collective unlike the
// others': `size` (an allreduce of 6 Float32 elements, the others 4),
// `dtype` (Float64, the others Float32), `collective` (a bcast, the others
// an allreduce), `model` (a DistributedOptimizer step over a wider model).
//
// It prints one line per event on stdout, flushed at once, for the driver:
//   worker rank R of N pid P
//   step K rank R                      after each step (K from 1)
//   throwing rank R step K             just before --throw-at's exception
//   stalling rank R step K             from --stall-at on
//   result rank R checksum C max_rel_diff D
// At the end every rank computes, in this process, what one process makes of
// the same steps on whole batches (the same rule, no MPI) and prints the
// largest relative difference of its parameters from that reference
// (Float64: about 1e-14, from the order of the sums). Exit status 0 when it
// is at most 1e-6.
#include <flx/distributed.hpp>
#include <flx/flx.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

using namespace flx;
namespace dist = flx::distributed;

namespace {

constexpr int64_t kIn = 8, kHidden = 16, kBatch = 13;  // uneven shares for 2 to 12 ranks

struct Args {
  int steps = 20;
  double step_sleep = 0;
  int throw_at = -1, stall_at = -1, on_rank = -1;
  std::string mismatch;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "fault_worker: %s\nusage: fault_worker [--steps N] [--step-sleep S] "
               "[--throw-at STEP | --stall-at STEP] --on-rank R\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(k + " needs a value");
    const char* v = argv[++i];
    if (k == "--steps") a.steps = std::atoi(v);
    else if (k == "--step-sleep") a.step_sleep = std::atof(v);
    else if (k == "--throw-at") a.throw_at = std::atoi(v);
    else if (k == "--stall-at") a.stall_at = std::atoi(v);
    else if (k == "--on-rank") a.on_rank = std::atoi(v);
    else if (k == "--mismatch") a.mismatch = v;
    else usage("unknown argument " + k);
  }
  if (a.steps < 1) usage("--steps must be at least 1");
  if ((a.throw_at >= 0 || a.stall_at >= 0 || !a.mismatch.empty()) != (a.on_rank >= 0))
    usage("--on-rank goes with --throw-at, --stall-at or --mismatch");
  if (!a.mismatch.empty() && a.mismatch != "size" && a.mismatch != "dtype" && a.mismatch != "collective" &&
      a.mismatch != "model")
    usage("--mismatch takes size, dtype, collective or model");
  return a;
}

// The same initial model on every rank and in the reference.
auto make_model() {
  set_seed(42);
  auto m = Chain(Dense(kIn, kHidden, flx::tanh), Dense(kHidden, 1));
  return fmap([](const Tensor& t) { return t.to(Float64); }, m);
}

// Batch k of the data (deterministic: a function of k only): x in [-1, 1],
// y a smooth function of x.
std::pair<Tensor, Tensor> batch(int k) {
  std::vector<double> x(static_cast<size_t>(kIn * kBatch)), y(static_cast<size_t>(kBatch));
  for (int64_t j = 0; j < kBatch; ++j) {
    double s = 0;
    for (int64_t i = 0; i < kIn; ++i) {
      const double v = std::sin(0.37 * double(k * kBatch + j) + 1.3 * double(i));
      x[size_t(j * kIn + i)] = v;  // column-major: observation j is column j
      s += v * double(i + 1);
    }
    y[size_t(j)] = std::tanh(0.2 * s);
  }
  return {tensor(x, {kIn, kBatch}), tensor(y, {1, kBatch})};
}

// The loss of a share of a batch, as a part of the whole batch's mean: the
// ranks' gradients summed (DistributedOptions::op = Sum) are then the whole
// batch's gradient whatever the shares' sizes.
template <class M>
Tensor loss(const M& m, const Tensor& x, const Tensor& y) {
  return sum(square(m(x) - y)) / double(kBatch);
}

std::vector<double> flat(const auto& model) {
  std::vector<double> out;
  for (const Tensor& p : leaves(model)) {
    auto v = (p | cpu).template to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void say(const char* fmt, auto... args) {
  std::printf(fmt, args...);
  std::fflush(stdout);
}

// --mismatch: `odd` (rank R) makes a collective unlike the others'.
void mismatch(const dist::MPIBackend& b, const std::string& kind, bool odd) {
  say("mismatch %s rank %d\n", kind.c_str(), b.rank());
  if (kind == "size") dist::allreduce(b, ones(Float32, {odd ? 6 : 4}));
  if (kind == "dtype") dist::allreduce(b, ones(odd ? Float64 : Float32, {4}));
  if (kind == "collective") {
    if (odd) dist::bcast(b, ones(Float32, {4}), 0);
    else dist::allreduce(b, ones(Float32, {4}));
  }
  if (kind == "model") {
    set_seed(1);
    auto m = Chain(Dense(kIn, odd ? kHidden + 3 : kHidden, flx::tanh), Dense(odd ? kHidden + 3 : kHidden, 1));
    auto opt = setup(dist::DistributedOptimizer(b, Adam(0.01)), m);
    auto [x, y] = batch(1);
    auto [l, g] = withgradient([&](const auto& model) { return loss(model, x, y); }, m);
    update(opt, m, std::get<0>(g));
  }
  say("mismatch %s rank %d survived\n", kind.c_str(), b.rank());
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  auto backend = dist::initialize<dist::MPIBackend>();
  const int rank = backend.rank(), size = backend.size();
  say("worker rank %d of %d pid %d\n", rank, size, int(getpid()));
  if (!args.mismatch.empty()) {
    mismatch(backend, args.mismatch, rank == args.on_rank);
    return 0;
  }

  auto model = make_model();
  auto opt = setup(dist::DistributedOptimizer(backend, Adam(0.01), {.op = dist::ReduceOp::Sum}), model);
  const auto [start, stop] = dist::share_of(kBatch, rank, size);
  for (int k = 1; k <= args.steps; ++k) {
    if (k == args.throw_at && rank == args.on_rank) {
      say("throwing rank %d step %d\n", rank, k);
      throw std::runtime_error("fault_worker: rank " + std::to_string(rank) + " throws at step " +
                               std::to_string(k) + " (--throw-at)");
    }
    if (k == args.stall_at && rank == args.on_rank) {
      say("stalling rank %d step %d\n", rank, k);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    auto [x, y] = batch(k);
    Tensor xs = getobs(x, start, stop), ys = getobs(y, start, stop);
    auto [l, g] = withgradient([&](const auto& m) { return loss(m, xs, ys); }, model);
    update(opt, model, std::get<0>(g));
    say("step %d rank %d\n", k, rank);
    if (args.step_sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(args.step_sleep));
  }

  // One process on whole batches, with the plain rule.
  auto ref = make_model();
  auto ref_opt = setup(Adam(0.01), ref);
  for (int k = 1; k <= args.steps; ++k) {
    auto [x, y] = batch(k);
    auto [l, g] = withgradient([&](const auto& m) { return loss(m, x, y); }, ref);
    update(ref_opt, ref, std::get<0>(g));
  }
  const auto mine = flat(model), theirs = flat(ref);
  double worst = 0, checksum = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    worst = std::max(worst, std::abs(mine[i] - theirs[i]) / std::max(std::abs(theirs[i]), 1e-12));
    checksum += mine[i] * double(i % 7 + 1);
  }
  say("result rank %d checksum %.17g max_rel_diff %.3g\n", rank, checksum, worst);
  return worst <= 1e-6 ? 0 : 1;
}

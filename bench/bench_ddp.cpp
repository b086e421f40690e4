// Data-parallel training steps on the CPU (issue 18), driven by
// bench/compare_ddp.py. The flx-train MLP (784-256-256-10, relu,
// logitcrossentropy against one-hot targets, Adam 1e-3) on Fashion-MNIST
// batches made before the timing starts (UInt8 images widened with
// scaled_pixels, as flx-train's loader does).
//
//   mpiexec -n 2 bench_ddp --mode ddp,no-overlap,comm-off --threads 1 --batch 256
//   bench_ddp --mode single --threads 2 --batch 512
//
// Modes (each one a fresh model and optimiser from the same seed, then
// --warmup untimed and --steps timed steps; rank r of n takes columns
// [r B, (r+1) B) of each global batch of n B images, so 2 ranks at 256 see
// the very batches one process at 512 does):
//   ddp        DistributedOptimizer(backend, Adam(1e-3)), buckets overlapped
//              with the backward pass (DistributedOptions::overlap = true)
//   no-overlap the same with overlap = false: every allreduce in update()
//   comm-off   the same processes, running at the same time, each stepping
//              with plain Adam and no collective: a rank's step without
//              communication
//   single     one process (no MPI), plain Adam: run without mpiexec
//
// Rank 0 prints one JSON line per mode. Times are medians over the timed
// steps; a figure of the job is the largest over the ranks (the job goes at
// its slowest rank's pace), and *_per_rank lists every rank's:
//   step_ms          withgradient + update, one step
//   grad_ms          withgradient (forward and backward, buckets filled and
//                    started during the pass when overlapping)
//   update_ms        update (waiting for gradients in flight, then Adam)
//   samples_per_s    global batch / step time
//   wait_ms          StepStats::wait_seconds: update()'s wait for gradients
//   wait_share       the sum of the waits over the sum of the step times
//   buckets, allreduces, overlapped  StepStats of the last step
//   lead_first_ms, lead_last_ms  StepStats::started_before_backward_end of the
//                    earliest and latest bucket (median over steps)
//   backward_end_to_update_ms    StepStats::backward_end_to_update
//   cpu_ms           CPU time of the process per step, every thread (the
//                    step's, flx's communication thread, MPI's), largest rank
//   skew_ms          from the first to the last rank returning from
//                    withgradient (one machine: one clock)
//   tail_ms          from the last rank returning from withgradient to the
//                    first one returning from update
//   params_agree     every rank holds the same parameters at the end
#include <flx/distributed.hpp>
#include <flx/flx.hpp>

#include "bench_common.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace flx;
namespace dist = flx::distributed;

namespace {

using Clock = std::chrono::steady_clock;
using MLP = decltype(Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)));

struct Options {
  std::vector<std::string> modes = {"ddp"};
  int64_t batch = 256;  // per process
  int steps = 100, warmup = 10, pool = 32;
  int threads = 0;  // 0: FLX_NUM_THREADS or the default
  int64_t hidden = 256;
  double bucket_mib = 25, first_bucket_mib = 1;
  bool synthetic = false;  // random images instead of Fashion-MNIST (the smoke test)
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double total(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

bool distributed_mode(const std::string& m) { return m == "ddp" || m == "no-overlap" || m == "comm-off"; }

struct Batch {
  Tensor x, y;  // (784, B) Float32, (10, B) one-hot
};

// This process's share of `pool` global batches of `workers` * B images.
std::vector<Batch> make_batches(const Options& o, int rank, int workers) {
  const int64_t global = o.batch * workers;
  std::vector<Batch> out;
  if (o.synthetic) {
    set_seed(7 + uint64_t(rank));
    std::mt19937_64 rng(11 + uint64_t(rank));
    for (int k = 0; k < o.pool; ++k) {
      std::vector<int64_t> labels(size_t(o.batch));
      for (auto& l : labels) l = int64_t(rng() % 10);
      out.push_back({rand(784, o.batch), onehotbatch(labels, 10)});
    }
    return out;
  }
  auto [images, labels] = datasets::fashion_mnist("train", UInt8);
  const Tensor x = reshape(images, {784, -1});
  const int64_t n = std::min<int64_t>(o.pool, x.size(1) / global);
  FLX_CHECK(n > 0, ArgumentError, "bench_ddp: a global batch of ", global, " is larger than the dataset");
  for (int64_t k = 0; k < n; ++k) {
    const int64_t a = k * global + rank * o.batch, b = a + o.batch;
    out.push_back({datasets::scaled_pixels(x.slice_last(a, b)), onehotbatch(labels.slice_last(a, b), 10)});
  }
  return out;
}

// The figures one process measured in one mode, in a fixed order (gathered
// across ranks as one Float64 tensor).
enum Fig { kStep, kGrad, kUpdate, kWait, kShare, kBuckets, kAllreduces, kOverlapped, kLeadFirst, kLeadLast,
           kEndToUpdate, kChecksum, kCpu, kFigs };

// CPU seconds this process has used (every thread: the step's and MPI's).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct ModeRun {
  std::vector<double> figs;          // kFigs of them
  std::vector<double> ends, dones;   // per timed step: when withgradient and update returned (steady clock, s)
};

ModeRun run_mode(const std::string& mode, const Options& o, const std::vector<Batch>& batches,
                 const dist::DistributedBackend* backend) {
  auto barrier = [&] {
    if (backend) dist::allreduce(*backend, 0.0, dist::ReduceOp::Sum);
  };
  set_seed(42);
  MLP model = Chain(Dense(784, o.hidden, relu), Dense(o.hidden, o.hidden, relu), Dense(o.hidden, 10));
  if (backend) model = dist::synchronize(*backend, model, 0);
  const bool comm = mode == "ddp" || mode == "no-overlap";
  OptState opt = comm ? setup(dist::DistributedOptimizer(*backend, Adam(1e-3),
                                                         {.bucket_mib = o.bucket_mib,
                                                          .first_bucket_mib = o.first_bucket_mib,
                                                          .overlap = mode == "ddp"}),
                              model)
                      : setup(Adam(1e-3), model);
  std::vector<double> step, grad, upd, wait, lead_first, lead_last, end_to_update;
  ModeRun run;
  auto stamp = [](Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
  dist::StepStats last;
  barrier();
  double cpu0 = cpu_seconds();
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const Batch& b = batches[size_t(i) % batches.size()];
    if (i == o.warmup) cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    auto [l, grads] = withgradient([&](const MLP& m) { return logitcrossentropy(m(b.x), b.y); }, model);
    const auto t1 = Clock::now();
    update(opt, model, std::get<0>(grads));
    const auto t2 = Clock::now();
    flx_bench::keep(l);
    if (i < o.warmup) continue;
    step.push_back(std::chrono::duration<double>(t2 - t0).count());
    grad.push_back(std::chrono::duration<double>(t1 - t0).count());
    upd.push_back(std::chrono::duration<double>(t2 - t1).count());
    run.ends.push_back(stamp(t1));
    run.dones.push_back(stamp(t2));
    if (!comm) continue;
    last = dist::last_step_stats(opt);
    wait.push_back(last.wait_seconds);
    end_to_update.push_back(last.backward_end_to_update);
    const auto& s = last.started_before_backward_end;
    lead_first.push_back(s.empty() ? 0 : *std::max_element(s.begin(), s.end()));
    lead_last.push_back(s.empty() ? 0 : *std::min_element(s.begin(), s.end()));
  }
  const double cpu = cpu_seconds() - cpu0;
  barrier();
  // A checksum of the parameters: ranks that agree hold the same one.
  double checksum = 0;
  for (const Tensor& p : leaves(model)) checksum += sum(abs(p)).item<double>();
  const double ms = 1e3;
  std::vector<double>& f = run.figs;
  f.assign(kFigs, 0.0);
  f[kStep] = median(step) * ms;
  f[kGrad] = median(grad) * ms;
  f[kUpdate] = median(upd) * ms;
  f[kWait] = median(wait) * ms;
  f[kShare] = comm ? total(wait) / total(step) : 0;
  f[kBuckets] = double(last.buckets);
  f[kAllreduces] = double(last.allreduces);
  f[kOverlapped] = double(last.overlapped);
  f[kLeadFirst] = median(lead_first) * ms;
  f[kLeadLast] = median(lead_last) * ms;
  f[kEndToUpdate] = median(end_to_update) * ms;
  f[kChecksum] = checksum;
  f[kCpu] = cpu / o.steps * ms;
  return run;
}

std::string list(const std::vector<double>& v, int fig, int workers, const char* fmt) {
  std::string s = "[";
  char buf[64];
  for (int r = 0; r < workers; ++r) {
    std::snprintf(buf, sizeof buf, fmt, v[size_t(r * kFigs + fig)]);
    s += (r ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

// From every rank's timeline (one machine, so one clock), medians over the
// steps of: skew, from the first to the last rank finishing its backward
// pass; tail, from the last one finishing it to the first one finishing its
// update (the allreduce after the last rank joins it, then the rule).
struct Timeline {
  double skew_ms = 0, tail_ms = 0;
};
Timeline timeline(const std::vector<double>& ends, const std::vector<double>& dones, int workers, int steps) {
  std::vector<double> skew, tail;
  for (int i = 0; i < steps; ++i) {
    double first = 1e300, last = -1e300, done = 1e300;
    for (int r = 0; r < workers; ++r) {
      first = std::min(first, ends[size_t(r * steps + i)]);
      last = std::max(last, ends[size_t(r * steps + i)]);
      done = std::min(done, dones[size_t(r * steps + i)]);
    }
    skew.push_back(last - first);
    tail.push_back(done - last);
  }
  return {median(skew) * 1e3, median(tail) * 1e3};
}

void print(const std::string& mode, const Options& o, const std::vector<double>& all, int workers, Timeline tl) {
  auto worst = [&](int fig) {
    double m = all[size_t(fig)];
    for (int r = 1; r < workers; ++r) m = std::max(m, all[size_t(r * kFigs + fig)]);
    return m;
  };
  const bool comm = mode == "ddp" || mode == "no-overlap";
  bool agree = true;
  for (int r = 1; r < workers; ++r) agree &= all[size_t(r * kFigs + kChecksum)] == all[kChecksum];
  const double step_ms = worst(kStep);
  std::printf(
      "{\"mode\": \"%s\", \"ranks\": %d, \"threads\": %d, \"threads_in_use\": %d, \"batch_per_rank\": %lld, "
      "\"global_batch\": %lld, \"hidden\": %lld, \"steps\": %d, \"warmup\": %d, \"pool\": %d, \"data\": \"%s\", "
      "\"bucket_mib\": %g, \"first_bucket_mib\": %g, "
      "\"step_ms\": %.4f, \"step_ms_per_rank\": %s, \"grad_ms\": %.4f, \"update_ms\": %.4f, "
      "\"samples_per_s\": %.1f, \"wait_ms\": %.4f, \"wait_ms_per_rank\": %s, \"wait_share\": %.4f, "
      "\"wait_share_per_rank\": %s, \"buckets\": %d, \"allreduces\": %d, \"overlapped\": %d, "
      "\"lead_first_ms\": %.4f, \"lead_last_ms\": %.4f, \"backward_end_to_update_ms\": %.4f, "
      "\"skew_ms\": %.4f, \"tail_ms\": %.4f, \"cpu_ms\": %.4f, \"params_agree\": %s}\n",
      mode.c_str(), workers, num_threads(), num_threads_in_use(), static_cast<long long>(o.batch),
      static_cast<long long>(o.batch * workers), static_cast<long long>(o.hidden), o.steps, o.warmup, o.pool,
      o.synthetic ? "synthetic" : "fashion-mnist", o.bucket_mib, o.first_bucket_mib, step_ms,
      list(all, kStep, workers, "%.4f").c_str(), worst(kGrad), worst(kUpdate), double(o.batch * workers) / step_ms * 1e3,
      worst(kWait), list(all, kWait, workers, "%.4f").c_str(), worst(kShare),
      list(all, kShare, workers, "%.4f").c_str(), int(all[kBuckets]), int(all[kAllreduces]), int(all[kOverlapped]),
      all[kLeadFirst], all[kLeadLast], all[kEndToUpdate], tl.skew_ms, tl.tail_ms, worst(kCpu),
      !comm ? "null" : agree ? "true" : "false");
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: [mpiexec -n 2] bench_ddp [--mode ddp,no-overlap,comm-off | --mode single] [--batch B]\n"
               "         [--steps N] [--warmup N] [--pool N] [--threads N] [--bucket-mib MiB]\n"
               "         [--first-bucket-mib MiB] [--hidden H] [--synthetic]\n");
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return flx_bench::option_value("bench_ddp", argc, argv, &i); };
    if (a == "--mode") o.modes = split(next());
    else if (a == "--batch") o.batch = std::atoll(next().c_str());
    else if (a == "--steps") o.steps = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::max(0, std::atoi(next().c_str()));
    else if (a == "--pool") o.pool = std::atoi(next().c_str());
    else if (a == "--threads") o.threads = std::atoi(next().c_str());
    else if (a == "--hidden") o.hidden = std::atoll(next().c_str());
    else if (a == "--bucket-mib") o.bucket_mib = std::atof(next().c_str());
    else if (a == "--first-bucket-mib") o.first_bucket_mib = std::atof(next().c_str());
    else if (a == "--synthetic") o.synthetic = true;
    else if (a == "-h" || a == "--help") return usage(0);
    else {
      std::fprintf(stderr, "bench_ddp: unknown argument %s\n", a.c_str());
      return usage(2);
    }
  }
  bool any_dist = false, single = false;
  for (const auto& m : o.modes) {
    if (m == "single") single = true;
    else if (distributed_mode(m)) any_dist = true;
    else {
      std::fprintf(stderr, "bench_ddp: unknown mode %s\n", m.c_str());
      return usage(2);
    }
  }
  if ((any_dist && single) || o.modes.empty() || o.batch < 1 || o.steps < 1 || o.pool < 1 || o.hidden < 1) {
    std::fprintf(stderr, "bench_ddp: single runs alone, without mpiexec; sizes must be positive\n");
    return usage(2);
  }
  if (o.threads > 0) set_num_threads(o.threads);

  if (single) {
    const auto batches = make_batches(o, 0, 1);
    for (const auto& m : o.modes) {
      const ModeRun run = run_mode(m, o, batches, nullptr);
      print(m, o, run.figs, 1, timeline(run.ends, run.dones, 1, o.steps));
    }
    return 0;
  }
  const auto backend = dist::initialize<dist::MPIBackend>();
  const int workers = dist::total_workers(backend), rank = dist::local_rank(backend);
  const auto batches = make_batches(o, rank, workers);
  for (const auto& m : o.modes) {
    const ModeRun mine = run_mode(m, o, batches, &backend);
    // Every rank's figures and timeline, in rank order.
    auto gather = [&](const std::vector<double>& v) {
      std::vector<double> all(size_t(workers) * v.size(), 0.0);
      std::copy(v.begin(), v.end(), all.begin() + std::ptrdiff_t(rank * v.size()));
      return dist::allreduce(backend, tensor(all), dist::ReduceOp::Sum).to_vector<double>();
    };
    const auto figs = gather(mine.figs), ends = gather(mine.ends), dones = gather(mine.dones);
    if (rank == 0) print(m, o, figs, workers, timeline(ends, dones, workers, o.steps));
  }
  return 0;
}

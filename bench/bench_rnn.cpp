// flx recurrent-layer benchmarks (issue 20). Prints one JSON object per line:
//
//   {"name": "lstm_step", "ns_per_iter": 4.1e7, "min_ns": ..., "max_ns": ..., "repeats": 7,
//    "iters": 8, "device": "CPU", "threads": 2, "flops": ..., "gflops": ...}
//
// ns_per_iter is the median over `repeats` timed runs of `iters` iterations
// (calibrated so that one run lasts about --min-time seconds, after a
// warm-up), the runs interleaved (round r times every benchmark once before
// round r + 1), each ending with synchronize(device), as bench_cnn does.
// bench/compare_rnn.py parses these lines.
//
//   bench_rnn [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] [--small] [--list]
//
// Benchmarks, on x (128, 64, 32): 128 features, 64 time steps, batch 32
// (--small: (8, 5, 3), hidden 16):
//   lstm_step   one training step of LSTM(128 => 256): withgradient of
//               mean(square(lstm(x))), then update with Adam(1e-3)
//   lstm_fwd    lstm(x) outside gradient (inference)
//   gru_step    the training step of GRU(128 => 256; recurrent_bias=true),
//               PyTorch's nn.GRU's arithmetic
//   rnn_step    the training step of RNN(128 => 256, tanh)
// flops: the products' multiply-adds × 2 per iteration (a step: forward,
// then the input's, the weights' and the recurrent gradients: 3 × forward).
#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"

using namespace flx;

namespace {

using Clock = std::chrono::steady_clock;
using flx_bench::keep;

struct Options {
  std::string device = "CPU";
  std::string filter;
  int repeats = 7;
  double min_time = 0.3;
  bool small = false;
  bool list = false;
};

struct Runner {
  std::function<void()> step;
  double flops = 0;  // per iteration
};

struct Bench {
  std::string name;
  std::function<Runner(Device, bool small)> make;
};

struct Size {
  int64_t in, hidden, time, batch;
};
Size size_of(bool small) { return small ? Size{8, 16, 5, 3} : Size{128, 256, 64, 32}; }

// Forward multiply-adds × 2 of a layer of k gates over the sequence.
double forward_flops(const Size& s, int k) {
  return 2.0 * double(k * s.hidden) * double(s.in + s.hidden) * double(s.time * s.batch);
}

template <class Layer>
struct StepState {
  Layer model;
  OptState opt;
  Tensor x;
};

template <class Layer>
Runner make_step(Layer model, Device dev, const Size& s, int k) {
  model = model | dev;
  OptState opt = setup(Adam(1e-3), model);
  set_seed(1234);
  Tensor x = rand(s.in, s.time, s.batch) | dev;
  auto st = std::make_shared<StepState<Layer>>(StepState<Layer>{std::move(model), std::move(opt), std::move(x)});
  return {[st] {
            auto [l, grads] = withgradient([&](const Layer& m) { return mean(square(m(st->x))); }, st->model);
            update(st->opt, st->model, std::get<0>(grads));
            keep(l);
          },
          3 * forward_flops(s, k)};
}

Runner make_forward(Device dev, const Size& s) {
  set_seed(42);
  auto lstm = std::make_shared<LSTM>(LSTM(s.in, s.hidden) | dev);
  set_seed(1234);
  auto x = std::make_shared<Tensor>(rand(s.in, s.time, s.batch) | dev);
  return {[lstm, x] {
            Tensor y = (*lstm)(*x);
            keep(y);
          },
          forward_flops(s, 4)};
}

std::vector<Bench> benches() {
  return {
      {"lstm_step",
       [](Device d, bool sm) {
         const Size s = size_of(sm);
         set_seed(42);
         return make_step(LSTM(s.in, s.hidden), d, s, 4);
       }},
      {"lstm_fwd", [](Device d, bool sm) { return make_forward(d, size_of(sm)); }},
      {"gru_step",
       [](Device d, bool sm) {
         const Size s = size_of(sm);
         set_seed(42);
         return make_step(GRU(s.in, s.hidden, {.recurrent_bias = true}), d, s, 3);
       }},
      {"rnn_step",
       [](Device d, bool sm) {
         const Size s = size_of(sm);
         set_seed(42);
         return make_step(RNN(s.in, s.hidden), d, s, 1);
       }},
  };
}

double run_ns(Runner& r, Device dev, int64_t iters) {
  synchronize(dev);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) r.step();
  synchronize(dev);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
}

// Warm-up (memory pools), then iterations per run so that one lasts about
// min_time, from the fastest pass seen.
int64_t calibrate(Runner& r, Device dev, double min_time) {
  double best = 1e300, spent = 0;
  for (int k = 0; k < 2 || (spent < 0.5e9 * min_time && k < 1000); ++k) {
    double ns = run_ns(r, dev, 1);
    best = std::min(best, ns);
    spent += ns;
  }
  return std::max<int64_t>(1, int64_t(min_time * 1e9 / best));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return flx_bench::option_value("bench_rnn", argc, argv, &i); };
    if (a == "--device") o.device = next();
    else if (a == "--filter") o.filter = next();
    else if (a == "--repeats") o.repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") o.min_time = std::atof(next().c_str());
    else if (a == "--small") o.small = true;
    else if (a == "--list") o.list = true;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: bench_rnn [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] "
          "[--small] [--list]\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_rnn: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<Bench> chosen;
  for (auto& b : benches())
    if (o.filter.empty() || b.name.find(o.filter) != std::string::npos) chosen.push_back(b);
  if (o.list) {
    for (auto& b : chosen) std::printf("%s\n", b.name.c_str());
    return 0;
  }
  try {
    const Device dev = flx_bench::parse_device(o.device);
    std::vector<Runner> runners;
    std::vector<int64_t> iters;
    for (auto& b : chosen) {
      runners.push_back(b.make(dev, o.small));
      iters.push_back(calibrate(runners.back(), dev, o.min_time));
    }
    std::vector<std::vector<double>> ns(chosen.size());
    for (int r = 0; r < o.repeats; ++r)
      for (size_t i = 0; i < chosen.size(); ++i) ns[i].push_back(run_ns(runners[i], dev, iters[i]));
    for (size_t i = 0; i < chosen.size(); ++i) {
      std::vector<double> v = ns[i];
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      const double flops = runners[i].flops;
      std::printf(
          "{\"name\": \"%s\", \"ns_per_iter\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"repeats\": %zu, "
          "\"iters\": %lld, \"device\": \"%s\", \"threads\": %d, \"threads_in_use\": %d, \"small\": %s, \"flops\": %.0f, "
          "\"gflops\": %.3f}\n",
          chosen[i].name.c_str(), median, v.front(), v.back(), n, static_cast<long long>(iters[i]),
          dev.str().c_str(), num_threads(), num_threads_in_use(), o.small ? "true" : "false", flops, flops / median);
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_rnn: %s\n", e.what());
    return 1;
  }
  return 0;
}

// flx convolution benchmarks (issue 19). Prints one JSON object per line:
//
//   {"name": "cnn_step_b16", "ns_per_iter": 4.1e6, "min_ns": ..., "max_ns": ..., "repeats": 7,
//    "iters": 40, "device": "CPU", "threads": 2, "flops": 0, "gflops": 0}
//
// ns_per_iter is the median over `repeats` timed runs of `iters` iterations
// (iters calibrated so that one run lasts about --min-time seconds, after a
// warm-up). The runs are interleaved: round r times every benchmark once
// before round r + 1 starts, so a slow phase of a shared machine spreads
// over all of them instead of landing on one. Every timed run ends with
// synchronize(device). bench/compare_cnn.py parses these lines.
//
//   bench_cnn [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] [--small] [--list]
//
// Benchmarks:
//   cnn_step_b16, cnn_step_b128  one training step of flx-train's CNN (apps/flx-train/main.cpp: cnn()):
//                     Conv((3,3), 1=>32, pad=1), BatchNorm(32, relu), MaxPool((2,2)),
//                     Conv((3,3), 32=>64, pad=1), BatchNorm(64, relu), MaxPool((2,2)),
//                     flatten, Dense(3136 => 128, relu), Dense(128 => 10) on (28, 28, 1, B)
//                     inputs: withgradient of
//                     logitcrossentropy(model(x), onehot), then update with Adam(1e-3)
//   conv3x3_fwd       crosscor of x (56, 56, 64, 32) with w (3, 3, 64, 64), pad 1, no bias
//   conv3x3_fwd_bwd   the same forward, then the gradients of x and w (withgradient of
//                     sum(crosscor(x, w))): the backward is fwd_bwd - fwd, with a
//                     6.4-million-element sum and its fill on top of the two gradients
// flops: the convolution's multiply-adds × 2 per iteration (forward 2·N·K·C·9·H·W,
// backward twice that); gflops = flops / ns_per_iter. --small: tiny sizes (a smoke test).
#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
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

auto cnn() {
  return Chain(Conv({3, 3}, 1, 32, {.pad = 1}), BatchNorm(32, relu), MaxPool({2, 2}), Conv({3, 3}, 32, 64, {.pad = 1}),
               BatchNorm(64, relu), MaxPool({2, 2}), Flatten(), Dense(64 * 7 * 7, 128, relu), Dense(128, 10));
}
using CNN = decltype(cnn());

constexpr int kPool = 4;  // distinct batches, cycled through

struct StepState {
  CNN model;
  OptState opt;
  std::vector<Tensor> xs, ys;
  int k = 0;
};

Runner make_step(Device dev, int64_t batch) {
  set_seed(42);
  CNN model = cnn() | dev;
  OptState opt = setup(Adam(1e-3), model);
  std::vector<Tensor> xs, ys;
  std::mt19937_64 rng(1234);
  for (int p = 0; p < kPool; ++p) {
    xs.push_back(rand(28, 28, 1, batch) | dev);
    std::vector<int64_t> lab(static_cast<size_t>(batch));
    for (auto& v : lab) v = int64_t(rng() % 10);
    ys.push_back(onehotbatch(tensor(lab, Shape{batch}), 10) | dev);  // as flx-train's loader makes them
  }
  auto s = std::make_shared<StepState>(StepState{std::move(model), std::move(opt), std::move(xs), std::move(ys)});
  return {[s] {
            const Tensor& x = s->xs[s->k];
            const Tensor& y = s->ys[s->k];
            s->k = (s->k + 1) % kPool;
            auto [l, grads] = withgradient([&](const CNN& m) { return logitcrossentropy(m(x), y); }, s->model);
            update(s->opt, s->model, std::get<0>(grads));
            keep(l);
          },
          0};
}

// The large 3×3 convolution: N=32, C=64 -> 64, 56×56, pad 1 (--small: N=2,
// C=8 -> 8, 12×12).
struct ConvSize {
  int64_t n, c, k, hw;
};
ConvSize conv_size(bool small) { return small ? ConvSize{2, 8, 8, 12} : ConvSize{32, 64, 64, 56}; }
double conv_flops(const ConvSize& s) { return 2.0 * double(s.n * s.k * s.c * 9 * s.hw * s.hw); }

Runner make_conv(Device dev, bool small, bool backward) {
  const ConvSize s = conv_size(small);
  set_seed(7);
  auto x = std::make_shared<Tensor>(randn(s.hw, s.hw, s.c, s.n) | dev);
  auto w = std::make_shared<Tensor>(randn(3, 3, s.c, s.k) * 0.05 | dev);
  const double f = conv_flops(s);
  if (!backward)
    return {[x, w] {
              Tensor y = crosscor(*x, *w, Tensor(), {.pad = 1});
              keep(y);
            },
            f};
  return {[x, w] {
            auto g = gradient([](const Tensor& a, const Tensor& b) { return sum(crosscor(a, b, Tensor(), {.pad = 1})); },
                              *x, *w);
            keep(g);
          },
          3 * f};
}

std::vector<Bench> benches() {
  return {
      {"cnn_step_b16", [](Device d, bool sm) { return make_step(d, sm ? 2 : 16); }},
      {"cnn_step_b128", [](Device d, bool sm) { return make_step(d, sm ? 4 : 128); }},
      {"conv3x3_fwd", [](Device d, bool sm) { return make_conv(d, sm, false); }},
      {"conv3x3_fwd_bwd", [](Device d, bool sm) { return make_conv(d, sm, true); }},
  };
}

double run_ns(Runner& r, Device dev, int64_t iters) {
  synchronize(dev);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) r.step();
  synchronize(dev);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
}

// Warm-up (plans, primitives, memory pools), then iterations per run so that
// one lasts about min_time, from the fastest pass seen.
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
    auto next = [&] { return flx_bench::option_value("bench_cnn", argc, argv, &i); };
    if (a == "--device") o.device = next();
    else if (a == "--filter") o.filter = next();
    else if (a == "--repeats") o.repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") o.min_time = std::atof(next().c_str());
    else if (a == "--small") o.small = true;
    else if (a == "--list") o.list = true;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: bench_cnn [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] "
          "[--small] [--list]\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_cnn: unknown argument %s\n", a.c_str());
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
    std::fprintf(stderr, "bench_cnn: %s\n", e.what());
    return 1;
  }
  return 0;
}

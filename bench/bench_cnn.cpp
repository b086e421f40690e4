// flx convolution benchmarks (issue 19). Prints one JSON object per line:
//
//   {"name": "cnn_step_b16", "ns_per_iter": 4.1e6, "min_ns": ..., "max_ns": ..., "repeats": 7,
//    "iters": 40, "device": "CPU", "threads": 2, "flops": 0, "gflops": 0}
//
// ns_per_iter is the median of interleaved timed runs (bench_interleaved.hpp:
// round r times every benchmark once before round r + 1, each run ending
// with synchronize(device)). bench/compare_cnn.py parses these lines.
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
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_interleaved.hpp"

using namespace flx;

namespace {

using flx_bench::Bench;
using flx_bench::keep;
using flx_bench::Runner;

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

}  // namespace

int main(int argc, char** argv) { return flx_bench::run_interleaved("bench_cnn", argc, argv, benches()); }

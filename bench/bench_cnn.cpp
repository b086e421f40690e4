// flx convolution benchmarks (issue 19). Prints one JSON object per line:
//
//   {"name": "cnn_step_b16", "ns_per_iter": 4.1e6, "min_ns": ..., "max_ns": ..., "repeats": 7,
//    "iters": 40, "device": "CPU", "threads": 2, "flops": 0, "gflops": 0}
//
// ns_per_iter is the median of interleaved timed runs (bench_interleaved.hpp:
// round r times every benchmark once before round r + 1, each run ending
// with synchronize(device)). bench/compare_cnn.py parses these lines.
//
//   bench_cnn [--device CPU|CUDA:0|OpenCL:0] [--precision P[,P...]] [--filter SUBSTR] [--repeats N]
//             [--min-time S] [--small] [--list]
//
// --precision f32 (the default), bf16 or f16, or a list (f32,bf16) whose
// benchmarks are all interleaved, each name but f32's ending in _bf16 or
// _f16: the model in that type as flx-train --precision runs it
// (bf16(model), BatchNorm's parameters staying Float32; Adam under
// MixedPrecision(Float32, ...); the images in the model's type, the labels
// Float32), and the convolutions' and products' operands in it too; the
// loss scaling of f16 is left out (a scaled step costs the same).
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
//   gemm_1024         matmul of two 1024 x 1024 matrices
//   gemm_mlp_b64, gemm_mlp_b512  the products of a training step of the MLP of bench_flx
//                     (Dense 784 => 256 => 256 => 10) at that batch: 3 forward (W x), 3
//                     weight gradients (dY xᵀ), 2 input gradients (Wᵀ dY)
// flops: the convolution's multiply-adds × 2 per iteration (forward 2·N·K·C·9·H·W,
// backward twice that); gflops = flops / ns_per_iter. --small: tiny sizes (a smoke test).
#include <flx/flx.hpp>

#include <algorithm>
#include <array>
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

Runner make_step(Device dev, int64_t batch, DType g_precision) {
  set_seed(42);
  CNN model = to_precision(cnn(), g_precision) | dev;
  OptState opt = g_precision == Float32 ? setup(Adam(1e-3), model) : setup(MixedPrecision(Float32, Adam(1e-3)), model);
  std::vector<Tensor> xs, ys;
  std::mt19937_64 rng(1234);
  for (int p = 0; p < kPool; ++p) {
    xs.push_back(rand(28, 28, 1, batch).to(g_precision) | dev);
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

Runner make_conv(Device dev, bool small, bool backward, DType g_precision) {
  const ConvSize s = conv_size(small);
  set_seed(7);
  auto x = std::make_shared<Tensor>(randn(s.hw, s.hw, s.c, s.n).to(g_precision) | dev);
  auto w = std::make_shared<Tensor>((randn(3, 3, s.c, s.k) * 0.05).to(g_precision) | dev);
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

// Products of (m, n, k) shapes, op(A) and op(B) made before timing (transpose), of dtype t.
Runner make_gemms(Device dev, const std::vector<std::array<int64_t, 5>>& shapes, DType t) {
  set_seed(3);
  struct Product {
    Tensor a, b;
  };
  auto ps = std::make_shared<std::vector<Product>>();
  double flops = 0;
  for (auto [m, n, k, ta, tb] : shapes) {
    // op(A) m x k, op(B) k x n: A stored k x m when transposed
    Tensor a = (rand(ta ? k : m, ta ? m : k) - 0.5).to(t) | dev, b = (rand(tb ? n : k, tb ? k : n) - 0.5).to(t) | dev;
    ps->push_back({ta ? transpose(a) : a, tb ? transpose(b) : b});
    flops += 2.0 * double(m * n * k);
  }
  return {[ps] {
            for (const Product& p : *ps) keep(matmul(p.a, p.b));
          },
          flops};
}

// The MLP's products at batch b: forward W (out x in) * x (in x b), weight
// gradients dY (out x b) * xᵀ, input gradients Wᵀ * dY.
std::vector<std::array<int64_t, 5>> mlp_shapes(int64_t b) {
  std::vector<std::array<int64_t, 5>> s;
  const int64_t dims[][2] = {{784, 256}, {256, 256}, {256, 10}};
  for (auto [in, out] : dims) s.push_back({out, b, in, 0, 0});
  for (auto [in, out] : dims) s.push_back({out, in, b, 0, 1});
  for (int i = 1; i < 3; ++i) s.push_back({dims[i][0], b, dims[i][1], 1, 0});
  return s;
}

std::vector<Bench> benches(const std::vector<DType>& precisions) {
  std::vector<Bench> out;
  for (DType t : precisions) {
    const std::string sfx = t == Float32 ? "" : t == BFloat16 ? "_bf16" : "_f16";
    out.push_back({"cnn_step_b16" + sfx, [t](Device d, bool sm) { return make_step(d, sm ? 2 : 16, t); }});
    out.push_back({"cnn_step_b128" + sfx, [t](Device d, bool sm) { return make_step(d, sm ? 4 : 128, t); }});
    out.push_back({"conv3x3_fwd" + sfx, [t](Device d, bool sm) { return make_conv(d, sm, false, t); }});
    out.push_back({"conv3x3_fwd_bwd" + sfx, [t](Device d, bool sm) { return make_conv(d, sm, true, t); }});
    out.push_back({"gemm_1024" + sfx, [t](Device d, bool sm) {
                     const int64_t n = sm ? 64 : 1024;
                     return make_gemms(d, {{n, n, n, 0, 0}}, t);
                   }});
    out.push_back({"gemm_mlp_b64" + sfx, [t](Device d, bool sm) { return make_gemms(d, mlp_shapes(sm ? 8 : 64), t); }});
    out.push_back(
        {"gemm_mlp_b512" + sfx, [t](Device d, bool sm) { return make_gemms(d, mlp_shapes(sm ? 16 : 512), t); }});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // --precision is bench_cnn's own: taken out before the common options.
  std::vector<char*> rest{argv[0]};
  std::vector<DType> precisions;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--precision") {
      rest.push_back(argv[i]);
      continue;
    }
    const std::string list = i + 1 < argc ? argv[++i] : "";
    precisions.clear();
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string p = list.substr(at, comma - at);
      if (p != "f32" && p != "bf16" && p != "f16") {
        std::fprintf(stderr, "bench_cnn: --precision takes f32, bf16 or f16, or a list of them; got '%s'\n",
                     list.c_str());
        return 2;
      }
      precisions.push_back(p == "bf16" ? BFloat16 : p == "f16" ? Float16 : Float32);
      at = comma + 1;
    }
  }
  if (precisions.empty()) precisions.push_back(Float32);
  return flx_bench::run_interleaved("bench_cnn", int(rest.size()), rest.data(), benches(precisions));
}

// One training step of the MLP that bench_flx and bench_gemm_drivers time:
// Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)),
// withgradient of logitcrossentropy against onehotbatch(labels, 10), then
// update of setup(Adam(1e-3), model). Each call of the returned step takes
// the next of 8 distinct random batches (inputs and labels), cycled
// through, so the model does not just memorise one batch.
#pragma once

#include <flx/flx.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "bench_common.hpp"

namespace flx_bench {

inline std::function<void()> mlp_training_step(int64_t batch) {
  using namespace flx;
  using MLP = decltype(Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)));
  constexpr int kPool = 8;
  struct State {
    MLP model;
    OptState opt;
    std::vector<Tensor> xs, labels;
    int k = 0;
  };
  set_seed(42);
  MLP model = Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10));
  OptState opt = setup(Adam(1e-3), model);
  std::vector<Tensor> xs, labels;
  std::mt19937_64 rng(1234);
  for (int p = 0; p < kPool; ++p) {
    xs.push_back(rand(784, batch));
    std::vector<int64_t> lab(static_cast<size_t>(batch));
    for (auto& v : lab) v = int64_t(rng() % 10);
    labels.push_back(tensor(lab, Shape{batch}));
  }
  auto s = std::make_shared<State>(State{std::move(model), std::move(opt), std::move(xs), std::move(labels)});
  return [s] {
    const Tensor& x = s->xs[size_t(s->k)];
    const Tensor& y = s->labels[size_t(s->k)];
    s->k = (s->k + 1) % kPool;
    auto [l, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), onehotbatch(y, 10)); }, s->model);
    update(s->opt, s->model, std::get<0>(grads));
    keep(l);
  };
}

}  // namespace flx_bench

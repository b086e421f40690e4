// The model zoo's ResNet-18 (examples/resnet.hpp) training step, for
// bench/compare_resnet.py. Prints one JSON line per benchmark (see
// bench_interleaved.hpp):
//
//   resnet18_step_b32   withgradient of logitcrossentropy(model(x), onehot) and update with
//                       Adam(1e-3), on (32, 32, 3, 32) images and a 10-class head: what
//                       examples/resnet does each step (4 batches of random images cycled)
//   resnet18_fwd_b32    the forward pass alone, in training mode (batch statistics)
//
//   bench_resnet [--device CPU|CUDA:0] [--filter SUBSTR] [--repeats N] [--min-time S] [--small]
//
// --small: batch 2 (a smoke test).
#include <flx/flx.hpp>

#include <memory>
#include <random>
#include <vector>

#include "bench_interleaved.hpp"
#include "resnet.hpp"

using namespace flx;

namespace {

using flx_bench::Bench;
using flx_bench::keep;
using flx_bench::Runner;

struct StepState {
  zoo::ResNet18 model;
  OptState opt;
  std::vector<Tensor> xs, ys;
  int k = 0;
};

Runner make(Device dev, int64_t batch, bool step) {
  set_seed(42);
  auto model = zoo::resnet18(10) | dev;
  OptState opt = setup(Adam(1e-3), model);
  std::vector<Tensor> xs, ys;
  std::mt19937_64 rng(1234);
  for (int p = 0; p < 4; ++p) {
    xs.push_back(rand(32, 32, 3, batch) | dev);
    std::vector<int64_t> lab(static_cast<size_t>(batch));
    for (auto& v : lab) v = int64_t(rng() % 10);
    ys.push_back(onehotbatch(tensor(lab, Shape{batch}), 10) | dev);
  }
  auto s = std::make_shared<StepState>(StepState{std::move(model), std::move(opt), std::move(xs), std::move(ys)});
  if (!step)
    return {[s] {
              const Tensor& x = s->xs[s->k];
              s->k = (s->k + 1) % 4;
              keep(trainmode(s->model)(x));
            },
            0};
  return {[s] {
            const Tensor& x = s->xs[s->k];
            const Tensor& y = s->ys[s->k];
            s->k = (s->k + 1) % 4;
            auto [l, grads] =
                withgradient([&](const zoo::ResNet18& m) { return logitcrossentropy(m(x), y); }, s->model);
            update(s->opt, s->model, std::get<0>(grads));
            keep(l);
          },
          0};
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Bench> benches = {
      {"resnet18_step_b32", [](Device d, bool small) { return make(d, small ? 2 : 32, true); }},
      {"resnet18_fwd_b32", [](Device d, bool small) { return make(d, small ? 2 : 32, false); }},
  };
  return flx_bench::run_interleaved("bench_resnet", argc, argv, benches);
}

// flx recurrent-layer benchmarks (issue 20). Prints one JSON object per line:
//
//   {"name": "lstm_step", "ns_per_iter": 4.1e7, "min_ns": ..., "max_ns": ..., "repeats": 7,
//    "iters": 8, "device": "CPU", "threads": 2, "flops": ..., "gflops": ...}
//
// ns_per_iter is the median of interleaved timed runs (bench_interleaved.hpp,
// as bench_cnn). bench/compare_rnn.py parses these lines.
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
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_interleaved.hpp"

using namespace flx;

namespace {

using flx_bench::Bench;
using flx_bench::keep;
using flx_bench::Runner;

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

}  // namespace

int main(int argc, char** argv) { return flx_bench::run_interleaved("bench_rnn", argc, argv, benches()); }

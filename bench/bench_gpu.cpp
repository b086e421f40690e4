// flx GPU benchmarks (issue 10, item 7), through the public API only (no CUDA
// header): the same program times CUDA:0, OpenCL:0 or the CPU. Prints one
// JSON object per line, as bench_flx does:
//
//   {"name": "mlp_step_b128", "ns_per_iter": 812.5, "min_ns": ..., "max_ns": ...,
//    "repeats": 7, "iters": 240, "device": "CUDA:0", "bytes": 0, "flops": 0, ...}
//
// Every timed run ends with flx::synchronize(device), so ns_per_iter is the
// time of the queued GPU work, not of queueing it (except dispatch_*, which
// times the host side on purpose). bench/compare_gpu.py runs it with --serve
// and interleaves its rounds with the same benchmarks in PyTorch.
//
//   bench_gpu [--device CUDA:0] [--small] [--filter SUBSTR] [--repeats N] [--min-time S] [--list] [--serve]
//
// --serve: read benchmark names from stdin, one per line; for each, time one
// round (the first request of a name builds its state, warms up and
// calibrates the iteration count, untimed) and print its JSON line. "quit"
// or end of input stops.
//
// Benchmarks (--small shrinks every size, for a CPU or PoCL smoke test):
//   dispatch_add_f32_100   host time to queue c = a + b on 100 elements (chunks of
//                          256 ops; the synchronize after each chunk is not timed)
//   mlp_step_b128          one training step of Chain(Dense(784,256,relu),
//   mlp_step_b4096         Dense(256,256,relu), Dense(256,10)): withgradient of
//                          logitcrossentropy against one-hot targets already on the
//                          device, then update with Adam(1e-3)
//   mlp_step_b128_onehot   the same with onehotbatch(labels, 10) in every step, as
//                          flx-train does (onehotbatch checks the labels' range)
//   gemm_mlp_step          Chain(Dense(4096,4096,relu) x2, Dense(4096,4096)), batch
//                          8192, mse loss, Adam: a GEMM-bound training step
//   gemm_mlp_gemms         the GEMMs that step needs, alone, as flx matmuls: 3
//                          forward, 3 weight gradients, 2 input gradients (the
//                          first layer's input needs none)
//   add_f32_2e28           c = a + b on 2^28 Float32 (bytes: 3 x 4 x N)
//   neg_f32_2e28           c = -a on 2^28 Float32 (bytes: 2 x 4 x N): flx's own
//                          copy-like map
//   loader_h2d             one pass of DataLoader(X, batchsize 8192) | device over a
//                          784 x 65536 Float32 host tensor (bytes: all of X)
//   epoch_data_on_device   one epoch (60000 samples, batch 512) of mlp training
//   epoch_data_from_host   with the data on the device already / brought from the
//                          host by DataLoader(...) | device
//   gemm_{f32,bf16,f16}_8192   one 8192 x 8192 x 8192 matmul of that dtype
//   conv3x3_{f32,bf16,f16}_fwd  a 3x3 convolution 128 => 128, pad 1, on 32 images
//                          of 56 x 56, of that dtype; _grad: withgradient of
//                          the sum of its output (the weight's and bias's gradients)
#include <flx/flx.hpp>

#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace flx;

namespace {

using Clock = std::chrono::steady_clock;

using flx_bench::keep;

struct Options {
  std::string device = "CUDA:0";
  std::string filter;
  int repeats = 7;
  double min_time = 0.2;  // seconds per timed run
  bool small = false;
  bool list = false;
  bool serve = false;
};

// One benchmark's state, built once. step() queues one iteration's work.
struct Runner {
  std::function<void()> step;
  bool host_only = false;  // time the queueing only (dispatch)
  double bytes = 0, flops = 0;  // per iteration, for rates
  std::string extra;            // more JSON fields (", \"k\": v")
};

struct Bench {
  std::string name;
  std::function<Runner(Device, bool small)> make;
};

// ---- timing ------------------------------------------------------------------

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ns per iteration of one timed run of `iters` iterations.
double run_ns(Runner& r, Device dev, int64_t iters) {
  if (!r.host_only) {
    synchronize(dev);
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) r.step();
    synchronize(dev);
    return seconds_since(t0) * 1e9 / double(iters);
  }
  // Queue chunks small enough not to fill the GPU's launch queue (which
  // would make queueing wait for the GPU); time only the queueing.
  constexpr int64_t kChunk = 256;
  double total = 0;
  for (int64_t done = 0; done < iters; done += kChunk) {
    int64_t n = std::min(kChunk, iters - done);
    synchronize(dev);
    auto t0 = Clock::now();
    for (int64_t i = 0; i < n; ++i) r.step();
    total += seconds_since(t0);
  }
  synchronize(dev);
  return total * 1e9 / double(iters);
}

// Warm up (first calls load kernels, create handles, fill memory pools), then
// choose iterations so one timed run lasts about min_time.
int64_t calibrate(Runner& r, Device dev, double min_time) {
  double per = 1e300;
  auto t0 = Clock::now();
  for (int k = 0; k < 3 || (seconds_since(t0) < 0.5 * min_time && k < 1000); ++k)
    per = std::min(per, run_ns(r, dev, r.host_only ? 256 : 1));
  return std::max<int64_t>(1, int64_t(min_time * 1e9 / per));
}

void print_line(const std::string& name, const Runner& r, Device dev, std::vector<double> ns, int64_t iters) {
  std::sort(ns.begin(), ns.end());
  size_t n = ns.size();
  double median = n % 2 ? ns[n / 2] : 0.5 * (ns[n / 2 - 1] + ns[n / 2]);
  std::printf(
      "{\"name\": \"%s\", \"ns_per_iter\": %.3f, \"min_ns\": %.3f, \"max_ns\": %.3f, \"repeats\": %zu, "
      "\"iters\": %lld, \"device\": \"%s\", \"bytes\": %.0f, \"flops\": %.0f%s}\n",
      name.c_str(), median, ns.front(), ns.back(), n, static_cast<long long>(iters), dev.str().c_str(), r.bytes,
      r.flops, r.extra.c_str());
  std::fflush(stdout);
}

// ---- benchmarks ----------------------------------------------------------------

Runner make_dispatch(Device dev, bool) {
  auto a = std::make_shared<Tensor>(rand(100) | dev);
  auto b = std::make_shared<Tensor>(rand(100) | dev);
  Runner r;
  r.host_only = true;
  r.step = [a, b] {
    Tensor c = *a + *b;
    keep(c);
  };
  return r;
}

using MLP = decltype(Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)));
constexpr int kPool = 8;  // distinct batches, cycled through

struct MlpState {
  MLP model;
  OptState opt;
  std::vector<Tensor> xs, ys, labels;
  int k = 0;
};

std::shared_ptr<MlpState> mlp_state(Device dev, int64_t batch) {
  set_seed(42);
  MLP model = Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)) | dev;
  OptState opt = setup(Adam(1e-3), model);
  auto s = std::make_shared<MlpState>(MlpState{std::move(model), std::move(opt), {}, {}, {}});
  std::mt19937_64 rng(1234);
  for (int p = 0; p < kPool; ++p) {
    std::vector<int64_t> lab(static_cast<size_t>(batch));
    for (auto& v : lab) v = int64_t(rng() % 10);
    Tensor labels = tensor(lab, Shape{batch});
    s->xs.push_back(rand(784, batch) | dev);
    s->ys.push_back(onehotbatch(labels, 10) | dev);
    s->labels.push_back(labels | dev);
  }
  return s;
}

Runner make_mlp(Device dev, int64_t batch, bool onehot_each_step) {
  auto s = mlp_state(dev, batch);
  Runner r;
  r.flops = 3.0 * 2.0 * double(batch) * (784.0 * 256 + 256.0 * 256 + 256.0 * 10);
  r.extra = ", \"batch\": " + std::to_string(batch);
  r.step = [s, onehot_each_step] {
    const Tensor& x = s->xs[size_t(s->k)];
    Tensor y = onehot_each_step ? onehotbatch(s->labels[size_t(s->k)], 10) : s->ys[size_t(s->k)];
    s->k = (s->k + 1) % kPool;
    auto [l, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), y); }, s->model);
    update(s->opt, s->model, std::get<0>(grads));
    keep(l);
  };
  return r;
}

using GemmMLP = decltype(Chain(Dense(1, 1, relu), Dense(1, 1, relu), Dense(1, 1)));

Runner make_gemm_step(Device dev, bool small) {
  const int64_t w = small ? 128 : 4096, batch = small ? 256 : 8192;
  set_seed(7);
  struct S {
    GemmMLP model;
    OptState opt;
    Tensor x, y;
  };
  GemmMLP model = Chain(Dense(w, w, relu), Dense(w, w, relu), Dense(w, w)) | dev;
  OptState opt = setup(Adam(1e-4), model);
  auto s = std::make_shared<S>(S{std::move(model), std::move(opt), rand(w, batch) | dev, rand(w, batch) | dev});
  Runner r;
  r.flops = 8.0 * 2.0 * double(w) * double(w) * double(batch);  // the 8 GEMMs of gemm_mlp_gemms
  r.extra = ", \"width\": " + std::to_string(w) + ", \"batch\": " + std::to_string(batch);
  r.step = [s] {
    auto [l, grads] = withgradient([&](const auto& m) { return mse(m(s->x), s->y); }, s->model);
    update(s->opt, s->model, std::get<0>(grads));
    keep(l);
  };
  return r;
}

// The step's GEMMs with the same (m, n, k): forward W·X (w×w · w×b), input
// gradient Wᵀ·G (same shape class), weight gradient G·Xᵀ (w×b · b×w). flx's
// matmul has no transpose flags, so the transposed operands are made once,
// untimed.
Runner make_gemm_alone(Device dev, bool small) {
  const int64_t w = small ? 128 : 4096, batch = small ? 256 : 8192;
  struct S {
    Tensor W, X, G, Xt;
  };
  auto s = std::make_shared<S>(
      S{rand(w, w) | dev, rand(w, batch) | dev, rand(w, batch) | dev, rand(batch, w) | dev});
  Runner r;
  r.flops = 8.0 * 2.0 * double(w) * double(w) * double(batch);
  r.extra = ", \"width\": " + std::to_string(w) + ", \"batch\": " + std::to_string(batch) + ", \"gemms\": 8";
  r.step = [s] {
    for (int layer = 0; layer < 3; ++layer) keep(matmul(s->W, s->X));   // forward
    for (int layer = 0; layer < 3; ++layer) keep(matmul(s->G, s->Xt));  // dW
    for (int layer = 0; layer < 2; ++layer) keep(matmul(s->W, s->G));   // dX (not for layer 1)
  };
  return r;
}

Runner make_map(Device dev, bool small, bool binary) {
  const int64_t n = small ? (int64_t(1) << 16) : (int64_t(1) << 28);
  // Made on the host (factories are CPU-only) and moved once.
  auto a = std::make_shared<Tensor>(full(Float32, 1.0, Shape{n}) | dev);
  auto b = std::make_shared<Tensor>(full(Float32, 2.0, Shape{n}) | dev);
  Runner r;
  r.bytes = (binary ? 3.0 : 2.0) * 4.0 * double(n);
  r.extra = ", \"n\": " + std::to_string(n);
  if (binary)
    r.step = [a, b] { keep(*a + *b); };
  else
    r.step = [a] { keep(-*a); };
  return r;
}

Runner make_loader(Device dev, bool small) {
  const int64_t n = small ? 4096 : 65536, bs = small ? 512 : 8192;
  auto loader = std::make_shared<DataLoader<Tensor>>(rand(784, n), DataLoaderOptions{.batchsize = bs, .seed = 1});
  Runner r;
  r.bytes = 4.0 * 784.0 * double(n);
  r.extra = ", \"batch\": " + std::to_string(bs) + ", \"samples\": " + std::to_string(n);
  r.step = [loader, dev] {
    for (const Tensor& x : *loader | dev) keep(x);
  };
  return r;
}

Runner make_epoch(Device dev, bool small, bool from_host) {
  const int64_t n = small ? 2048 : 60000, bs = small ? 256 : 512;
  set_seed(3);
  Tensor X = rand(784, n);
  std::vector<int64_t> lab(static_cast<size_t>(n));
  std::mt19937_64 rng(99);
  for (auto& v : lab) v = int64_t(rng() % 10);
  Tensor Y = onehotbatch(tensor(lab, Shape{n}), 10);  // one-hot on the host: no per-step label checks
  struct S {
    MLP model;
    OptState opt;
    std::tuple<Tensor, Tensor> data;
  };
  MLP model = Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)) | dev;
  OptState opt = setup(Adam(1e-3), model);
  auto data = from_host ? std::tuple{X, Y} : std::tuple{X | dev, Y | dev};
  auto s = std::make_shared<S>(S{std::move(model), std::move(opt), data});
  Runner r;
  r.bytes = 4.0 * (784.0 + 10.0) * double(n);
  r.extra = ", \"batch\": " + std::to_string(bs) + ", \"samples\": " + std::to_string(n);
  r.step = [s, dev, bs] {
    DataLoader loader(s->data, {.batchsize = bs, .seed = 1});
    for (auto [x, y] : loader | dev) {
      auto [l, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), y); }, s->model);
      update(s->opt, s->model, std::get<0>(grads));
      keep(l);
    }
  };
  return r;
}

// (f) low precision: one product of two n x n matrices of dtype t (Float32
// computes in FP32, the halves on the tensor cores with float accumulation).
Runner make_gemm_dtype(Device dev, bool small, DType t) {
  const int64_t n = small ? 256 : 8192;
  auto a = std::make_shared<Tensor>((rand(n, n) | dev).to(t));
  auto b = std::make_shared<Tensor>((rand(n, n) | dev).to(t));
  Runner r;
  r.flops = 2.0 * double(n) * double(n) * double(n);
  r.extra = ", \"n\": " + std::to_string(n);
  r.step = [a, b] { keep(matmul(*a, *b)); };
  return r;
}

// (f) a 3x3 convolution, 128 => 128 channels, pad 1, on (56, 56, 128, 32)
// images of dtype t: forward alone, or withgradient of the sum of its output
// (forward, input-gradient-free backward: the weight's and bias's gradients).
Runner make_conv_dtype(Device dev, bool small, DType t, bool backward) {
  const int64_t hw = small ? 8 : 56, c = small ? 8 : 128, batch = small ? 2 : 32;
  set_seed(5);
  Conv conv({3, 3}, c, c, ConvOptions{.pad = 1});
  conv.weight = conv.weight.to(t);
  conv.bias = conv.bias.to(t);
  auto m = std::make_shared<Conv>(conv | dev);
  auto x = std::make_shared<Tensor>((rand(hw, hw, c, batch) | dev).to(t));
  Runner r;
  r.flops = (backward ? 2.0 : 1.0) * 2.0 * double(hw * hw * batch) * double(c) * double(c) * 9.0;
  r.extra = ", \"batch\": " + std::to_string(batch) + ", \"channels\": " + std::to_string(c);
  if (backward)
    r.step = [m, x] {
      auto [l, g] = withgradient([&](const Conv& cv) { return sum(cv(*x)); }, *m);
      keep(std::get<0>(g).weight);
    };
  else
    r.step = [m, x] { keep((*m)(*x)); };
  return r;
}

std::vector<Bench> benches() {
  return {
      {"dispatch_add_f32_100", make_dispatch},
      {"mlp_step_b128", [](Device d, bool sm) { return make_mlp(d, sm ? 16 : 128, false); }},
      {"mlp_step_b4096", [](Device d, bool sm) { return make_mlp(d, sm ? 256 : 4096, false); }},
      {"mlp_step_b128_onehot", [](Device d, bool sm) { return make_mlp(d, sm ? 16 : 128, true); }},
      {"gemm_mlp_step", make_gemm_step},
      {"gemm_mlp_gemms", make_gemm_alone},
      {"add_f32_2e28", [](Device d, bool sm) { return make_map(d, sm, true); }},
      {"neg_f32_2e28", [](Device d, bool sm) { return make_map(d, sm, false); }},
      {"loader_h2d", make_loader},
      {"epoch_data_on_device", [](Device d, bool sm) { return make_epoch(d, sm, false); }},
      {"epoch_data_from_host", [](Device d, bool sm) { return make_epoch(d, sm, true); }},
      {"gemm_f32_8192", [](Device d, bool sm) { return make_gemm_dtype(d, sm, Float32); }},
      {"gemm_bf16_8192", [](Device d, bool sm) { return make_gemm_dtype(d, sm, BFloat16); }},
      {"gemm_f16_8192", [](Device d, bool sm) { return make_gemm_dtype(d, sm, Float16); }},
      {"conv3x3_f32_fwd", [](Device d, bool sm) { return make_conv_dtype(d, sm, Float32, false); }},
      {"conv3x3_bf16_fwd", [](Device d, bool sm) { return make_conv_dtype(d, sm, BFloat16, false); }},
      {"conv3x3_f16_fwd", [](Device d, bool sm) { return make_conv_dtype(d, sm, Float16, false); }},
      {"conv3x3_f32_grad", [](Device d, bool sm) { return make_conv_dtype(d, sm, Float32, true); }},
      {"conv3x3_bf16_grad", [](Device d, bool sm) { return make_conv_dtype(d, sm, BFloat16, true); }},
      {"conv3x3_f16_grad", [](Device d, bool sm) { return make_conv_dtype(d, sm, Float16, true); }},
  };
}

// A message as a JSON string's contents (quotes, backslashes and newlines blanked).
std::string json_safe(std::string what) {
  for (auto& c : what)
    if (c == '"' || c == '\\' || c == '\n') c = ' ';
  return what;
}

// --serve: one round per requested name, states kept between requests.
int serve(const Options& o, Device dev) {
  std::map<std::string, Bench> by_name;
  for (auto& b : benches()) by_name.emplace(b.name, b);
  struct Live {
    Runner r;
    int64_t iters;
  };
  std::map<std::string, Live> live;
  std::printf("{\"ready\": true, \"device\": \"%s\"}\n", dev.str().c_str());
  std::fflush(stdout);
  std::string name;
  while (std::getline(std::cin, name)) {
    if (name.empty()) continue;
    if (name == "quit") break;
    try {
      if (name.rfind("drop ", 0) == 0) {  // free a benchmark's state (large tensors)
        live.erase(name.substr(5));
        synchronize(dev);
        std::printf("{\"dropped\": \"%s\"}\n", name.substr(5).c_str());
        std::fflush(stdout);
        continue;
      }
      auto it = by_name.find(name);
      if (it == by_name.end()) throw std::runtime_error("unknown benchmark " + name);
      auto l = live.find(name);
      if (l == live.end()) {
        Runner r = it->second.make(dev, o.small);
        int64_t iters = calibrate(r, dev, o.min_time);
        l = live.emplace(name, Live{std::move(r), iters}).first;
      }
      print_line(name, l->second.r, dev, {run_ns(l->second.r, dev, l->second.iters)}, l->second.iters);
    } catch (const std::exception& e) {
      std::printf("{\"name\": \"%s\", \"error\": \"%s\"}\n", name.c_str(), json_safe(e.what()).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return flx_bench::option_value("bench_gpu", argc, argv, &i); };
    if (a == "--device") o.device = next();
    else if (a == "--filter") o.filter = next();
    else if (a == "--repeats") o.repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") o.min_time = std::atof(next().c_str());
    else if (a == "--small") o.small = true;
    else if (a == "--list") o.list = true;
    else if (a == "--serve") o.serve = true;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: bench_gpu [--device CUDA:0] [--small] [--filter SUBSTR] [--repeats N] [--min-time S] [--list] "
          "[--serve]\n"
          "  --device NAME[:ORDINAL]  CUDA:0 (default), OpenCL:0, CPU\n"
          "  --small                  tiny sizes (a smoke test on the CPU or PoCL)\n"
          "  --serve                  read benchmark names from stdin, time one round of each\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_gpu: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.list) {
    for (const auto& b : benches()) std::printf("%s\n", b.name.c_str());
    return 0;
  }
  Device dev = Device::cpu();
  try {
    dev = flx_bench::parse_device(o.device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: device %s is not usable: %s\n", o.device.c_str(), e.what());
    return 3;
  }
  if (o.serve) return serve(o, dev);
  int failed = 0;
  for (const auto& b : benches()) {
    if (!o.filter.empty() && b.name.find(o.filter) == std::string::npos) continue;
    try {
      Runner r = b.make(dev, o.small);
      int64_t iters = calibrate(r, dev, o.min_time);
      std::vector<double> ns;
      for (int k = 0; k < o.repeats; ++k) ns.push_back(run_ns(r, dev, iters));
      print_line(b.name, r, dev, ns, iters);
    } catch (const NotImplemented& e) {  // a dtype the device lacks (the CPU's half convolutions): said, not failed
      std::printf("{\"name\": \"%s\", \"unsupported\": \"%s\"}\n", b.name.c_str(), json_safe(e.what()).c_str());
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_gpu: %s failed: %s\n", b.name.c_str(), e.what());
      ++failed;
    }
  }
  return failed ? 1 : 0;
}

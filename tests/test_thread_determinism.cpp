// Same inputs, same bits, whatever the thread count and the load (issue
// 16). The CPU backend cuts GEMMs and big reductions into pieces fixed by
// the shape, never by the threads free at the moment (cpu_gemm_tiles.hpp),
// so the same work at 1, 2, 3 and 16 threads, and with the adaptive pool
// beside busy competitors, must give identical bits: products of the shapes
// whose bits once changed with the thread count, batched, transposed (the
// backward rules' products), in every floating dtype, Dense's fused
// epilogue forward and backward, big reductions, softmax and Adam steps;
// BFloat16 products and convolutions in oneDNN's own kernels (each piece
// single-threaded over the whole sum, as the Float32 ones);
// and conv nets, whose filter gradients and batch statistics the CPU's dnn
// table sums in pieces fixed by the batch (cpu_dnn_conv.cpp), as it does an
// LSTM's weight gradients (cpu_dnn_rnn.cpp), and attention (its tasks
// fixed by the shape: cpu_dnn_attention.cpp).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cpu/cpu_load.hpp"
#include "cpu/cpu_pool.hpp"
#include "test_util.hpp"

using namespace flx;
using V = std::vector<Tensor>;

namespace {

struct Result {
  std::string what;
  std::vector<double> values;  // exact: every floating dtype converts to Float64 exactly
};

struct Work {
  std::vector<Result> out;
  void add(const std::string& what, const Tensor& t) { out.push_back({what, t.to(Float64).to_vector<double>()}); }
};

std::string shape_name(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

// C = A B (m×k by k×n) and the backward rule's transposed products dA = G Bᵀ
// and dB = Aᵀ G, from inputs made by one seed.
void products(Work& w, DType t, int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  set_seed(uint64_t(m * 7 + n * 5 + k * 3 + batch));
  Shape sa = batch > 1 ? Shape{m, k, batch} : Shape{m, k}, sb = batch > 1 ? Shape{k, n, batch} : Shape{k, n};
  Shape sc = batch > 1 ? Shape{m, n, batch} : Shape{m, n};
  Tensor a = (rand(Float64, sa) - 0.5).to(t), b = (rand(Float64, sb) - 0.5).to(t), g = (rand(Float64, sc) - 0.5).to(t);
  const std::string name = std::string(dtype_name(t)) + " " + shape_name(m, n, k) +
                           (batch > 1 ? " batch " + std::to_string(batch) : "");
  w.add(name + " A*B", matmul(a, b));
  auto [da, db] = gradient([&](const Tensor& x, const Tensor& y) { return sum(matmul(x, y) * g); }, a, b);
  w.add(name + " G*B'", da);
  w.add(name + " A'*G", db);
}

// Dense through gemm_epilogue: bias and activation fused forward, the bias
// gradient fused into the weight gradient backward.
void dense(Work& w, DType t, Activation act, const char* act_name) {
  set_seed(5);
  const int64_t out = 256, in = 784, batch = 64;
  Tensor wt = (rand(Float64, {out, in}) * 0.1 - 0.05).to(t), b = (rand(Float64, {out}) - 0.5).to(t);
  Tensor x = rand(Float64, {in, batch}).to(t), c = (rand(Float64, {out, batch}) - 0.5).to(t);
  const std::string name = std::string("Dense ") + act_name + " " + std::string(dtype_name(t));
  w.add(name + " forward", Dense(wt, b, act)(x));
  V g = std::get<0>(gradient([&](const V& v) { return sum(Dense(v[0], v[1], act)(v[2]) * c); }, V{wt, b, x}));
  w.add(name + " dW", g[0]);
  w.add(name + " db", g[1]);
  w.add(name + " dx", g[2]);
}

void reductions(Work& w, DType t) {
  set_seed(9);
  const std::string name = std::string(dtype_name(t)) + " ";
  Tensor x = (rand(Float64, {5 * 65536 + 17}) - 0.3).to(t);  // whole-tensor reductions cut into chunks
  w.add(name + "sum", sum(x));
  w.add(name + "mean", mean(x));
  w.add(name + "maximum", maximum(x));
  w.add(name + "minimum", minimum(x));
  Tensor m = (rand(Float64, {1000, 700}) - 0.3).to(t);
  w.add(name + "sum over dim 0", sum(m, {0}));
  w.add(name + "sum over dim 1", sum(m, {1}));
  w.add(name + "softmax", softmax(m));
  w.add(name + "logsoftmax", logsoftmax(m));
}

// Three Adam steps of `model` on random inputs of shape x_shape (the batch
// last) with labels cycling through 10 classes; the losses, the trained
// parameters and Adam's state recorded under `name`.
template <class Model>
void train_steps(Work& w, const std::string& name, Model model, const Shape& x_shape) {
  OptState opt = setup(Adam(1e-3), model);
  const int64_t batch = x_shape[x_shape.ndims() - 1];
  for (int step = 0; step < 3; ++step) {
    Tensor x = rand(Float32, x_shape);
    std::vector<int64_t> lab(static_cast<size_t>(batch));
    for (size_t i = 0; i < lab.size(); ++i) lab[i] = int64_t((i * 7 + size_t(step)) % 10);
    const Tensor y = onehotbatch(tensor(lab, Shape{batch}), 10);
    auto [l, grads] = withgradient([&](const auto& mm) { return logitcrossentropy(mm(x), y); }, model);
    update(opt, model, std::get<0>(grads));
    w.add(name + " loss " + std::to_string(step), l);
  }
  for (const auto& [n, t] : state(model)) w.add(name + " trained " + n, t);
  for (const auto& [n, t] : state(opt)) w.add(name + " Adam " + n, t);
}

// Training steps of an MLP (the flx-train model): forward, backward, Adam.
void training(Work& w) {
  set_seed(11);
  train_steps(w, "mlp", Chain(Dense(784, 256, relu), Dense(256, 256, relu), Dense(256, 10)), Shape{784, 64});
}

// Training steps of a CNN as flx-train's (convolutions, BatchNorm, max
// pooling, Dense) at a batch of 20 (pieces of two sizes in the CPU's dnn
// table), of a U-Net level, and a strided, grouped convolution with its
// gradients.
void convnet(Work& w) {
  set_seed(13);
  train_steps(w, "cnn",
              Chain(Conv({3, 3}, 1, 8, {.pad = 1}), BatchNorm(8, relu), MaxPool({2, 2}), Conv({3, 3}, 8, 16, {.pad = 1}),
                    BatchNorm(16, relu), MaxPool({2, 2}), Flatten(), Dense(16 * 7 * 7, 10)),
              Shape{28, 28, 1, 20});
  // A U-Net level: GroupNorm (the dnn table's groupnorm), nearest upsampling
  // (a broadcast copy) and its gradient (a reduction of 4 values an output).
  set_seed(14);
  train_steps(w, "unet level",
              Chain(Conv({3, 3}, 1, 8, {.pad = 1}), GroupNorm(8, 4, relu), MaxPool({2, 2}),
                    Upsample({.scale = {2}}), Conv({3, 3}, 8, 2, {.pad = 1}), InstanceNorm(2, {.affine = true}),
                    Flatten(), Dense(2 * 28 * 28, 10)),
              Shape{28, 28, 1, 20});
  Tensor x = rand(Float32, {19, 17, 4, 37}) - 0.5, k = rand(Float32, {3, 3, 2, 6}) - 0.5, b = rand(Float32, {6});
  const ConvOptions o{.stride = {2, 1}, .pad = 1, .groups = 2};
  w.add("grouped conv forward", conv(x, k, b, o));
  auto [dx, dk, db] = gradient([&](const Tensor& xx, const Tensor& kk, const Tensor& bb) {
    return sum(square(conv(xx, kk, bb, o)));
  }, x, k, b);
  w.add("grouped conv dx", dx);
  w.add("grouped conv dw", dk);
  w.add("grouped conv db", db);
}

// Convolutions in a half type, forward with a bias and both gradients, at
// batches cut into pieces of two sizes (the filter's and bias's gradients
// summed over them).
void half_convs(Work& w, DType t) {
  const ConvOptions plain{.pad = 1}, grouped{.stride = {2, 1}, .pad = 1, .groups = 2};
  for (auto [x_shape, k_shape, o] : {std::tuple{Shape{14, 14, 32, 37}, Shape{3, 3, 32, 64}, plain},
                                     std::tuple{Shape{28, 28, 1, 20}, Shape{3, 3, 1, 8}, plain},
                                     std::tuple{Shape{19, 17, 4, 37}, Shape{3, 3, 2, 6}, grouped}}) {
    set_seed(uint64_t(x_shape.numel()));
    Tensor x = (rand(Float64, x_shape) - 0.5).to(t), k = (rand(Float64, k_shape) - 0.5).to(t);
    Tensor b = (rand(Float64, {k_shape[3]}) - 0.5).to(t);
    const std::string name = std::string(dtype_name(t)) + " conv " + std::to_string(k_shape[2]) + "=>" +
                             std::to_string(k_shape[3]) + " batch " + std::to_string(x_shape[3]);
    const Tensor y = conv(x, k, b, o);
    Tensor c = (rand(Float64, y.shape()) - 0.5).to(t);
    w.add(name + " forward", y);
    auto [dx, dk, db] = gradient([&](const Tensor& xx, const Tensor& kk, const Tensor& bb) {
      return sum(conv(xx, kk, bb, o) * c);
    }, x, k, b);
    w.add(name + " dx", dx);
    w.add(name + " dw", dk);
    w.add(name + " db", db);
  }
}

// Training steps of recurrent layers at a batch of 37: the CPU's oneDNN LSTM
// (the dnn table's rnn_*, two pieces of unequal sizes whose weight gradients
// it sums in piece order), then a GRU and an RNN on flx's own kernels; the
// last step's outputs summed over time feed a Dense.
struct Recurrent {
  LSTM lstm;
  GRU gru;
  RNN rnn;
  Dense head;
  Tensor operator()(const Tensor& x) const {
    const Tensor h = rnn(gru(lstm(x)));
    return head(reshape(sum(h, {1}), {h.shape()[0], h.shape()[2]}));
  }
};
FLX_FUNCTOR(Recurrent, lstm, gru, rnn, head)

void recurrent(Work& w) {
  set_seed(17);
  train_steps(w, "recurrent", Recurrent{LSTM(8, 16), GRU(16, 12), RNN(12, 12), Dense(12, 10)}, Shape{8, 6, 37});
}

// Attention without its scores on the CPU's kernel (the dnn table's
// attention_*): forward and every gradient, with a task per group (16
// groups), and with dK/dV per key block and dQ per query block (6 groups,
// causal), a mask, a bias and dropout; tiles ragged at both ends.
void attention(Work& w, DType t) {
  const Dropout drop(0.2);
  struct Shape4 {
    int64_t heads, batch, q_len, kv_len;
    bool causal;
  };
  for (const Shape4& s : {Shape4{8, 2, 300, 200, false}, Shape4{2, 3, 300, 300, true}}) {
    set_seed(uint64_t(s.heads * 100 + s.q_len));
    const int64_t d = 16 * s.heads;
    Tensor q = (rand(Float64, {d, s.q_len, s.batch}) - 0.5).to(t), k = (rand(Float64, {d, s.kv_len, s.batch}) - 0.5).to(t);
    Tensor v = (rand(Float64, {d, s.kv_len, s.batch}) - 0.5).to(t), c = (rand(Float64, {d, s.q_len, s.batch}) - 0.5).to(t);
    Tensor bias = (rand(Float64, {s.kv_len, s.q_len, 1, s.batch}) - 0.5).to(t);
    Tensor mask = rand(Float64, {s.kv_len, s.q_len}) > 0.2;
    const std::string name = "attention " + std::string(dtype_name(t)) + (s.causal ? " causal" : " masked");
    const AttentionOptions o{.mask = s.causal ? Tensor{} : mask, .causal = s.causal, .bias = bias, .scores = false};
    w.add(name + " forward", dot_product_attention(q, k, v, s.heads, o).first);
    set_seed(3);
    V g = std::get<0>(gradient([&](const V& x) {
      const AttentionOptions ob{.mask = o.mask, .causal = o.causal, .bias = x[3], .scores = false};
      return sum(dot_product_attention(x[0], x[1], x[2], s.heads, ob, &drop).first * c);
    }, V{q, k, v, bias}));
    const char* names[] = {" dq", " dk", " dv", " dbias"};
    for (size_t i = 0; i < g.size(); ++i) w.add(name + names[i], g[i]);
  }
}

std::vector<Result> compute() {
  Work w;
  for (DType t : {Float32, Float64}) {
    // The shapes of issue 16 and of the MLP's layers at batch 64.
    products(w, t, 256, 64, 784);
    products(w, t, 784, 256, 512);
    products(w, t, 256, 784, 64);
    products(w, t, 256, 64, 256);
    products(w, t, 10, 64, 256);
    // Long and thin, odd sizes, many small products and a few big ones.
    products(w, t, 300, 30, 3000);
    products(w, t, 517, 3, 130);
    products(w, t, 100, 100, 100);
    products(w, t, 37, 53, 71);
    products(w, t, 64, 80, 96, 5);
    products(w, t, 16, 16, 64, 40);
    products(w, t, 256, 200, 256, 3);
    dense(w, t, relu, "relu");
    dense(w, t, gelu, "gelu");
    dense(w, t, identity, "identity");
    reductions(w, t);
  }
  for (DType t : {Float16, BFloat16}) {
    products(w, t, 256, 64, 784);
    products(w, t, 64, 80, 96, 5);
    reductions(w, t);
  }
  // BFloat16 in oneDNN's own kernels where the CPU has them
  // (cpu_native_halves.hpp): products of several tiles, Dense, and
  // convolutions whose filter gradients are summed over pieces.
  products(w, BFloat16, 784, 256, 512);
  products(w, BFloat16, 300, 30, 3000);
  products(w, BFloat16, 37, 53, 71);
  products(w, BFloat16, 16, 16, 64, 40);
  dense(w, BFloat16, relu, "relu");
  half_convs(w, BFloat16);
  for (DType t : {Float32, Float64, BFloat16}) attention(w, t);
  training(w);
  convnet(w);
  recurrent(w);
  return w.out;
}

// Restores the pool's settings.
struct PoolSettings {
  int saved = num_threads();
  PoolSettings(int n, bool adaptive) {
    set_num_threads(n);
    cpu_backend::set_pool_adaptive(adaptive);
  }
  ~PoolSettings() {
    set_num_threads(saved);
    cpu_backend::set_pool_adaptive(true);
  }
};

// Threads spinning on as many cores as there are, while they live.
struct BusyCompetitors {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  explicit BusyCompetitors(int n) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
  }
  ~BusyCompetitors() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

void expect_same_bits(const std::vector<Result>& ref, const std::vector<Result>& got, const std::string& setting) {
  ASSERT_EQ(ref.size(), got.size()) << setting;
  int differing = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(ref[i].what, got[i].what);
    ASSERT_EQ(ref[i].values.size(), got[i].values.size()) << ref[i].what;
    if (std::memcmp(ref[i].values.data(), got[i].values.data(), ref[i].values.size() * sizeof(double)) == 0) continue;
    size_t at = 0;
    while (std::memcmp(&ref[i].values[at], &got[i].values[at], sizeof(double)) == 0) ++at;
    ADD_FAILURE() << setting << ": " << ref[i].what << " differs from its result on one thread, first at element "
                  << at << ": " << got[i].values[at] << " against " << ref[i].values[at];
    if (++differing == 10) return;
  }
}

}  // namespace

TEST(ThreadDeterminism, SameBitsOnAnyNumberOfThreadsAndUnderLoad) {
  std::vector<Result> one;
  {
    PoolSettings s(1, false);
    one = compute();
  }
  for (int n : {2, 3, 16}) {  // 16: the split of a big machine (more threads than cores is allowed)
    PoolSettings s(n, false);
    expect_same_bits(one, compute(), std::to_string(n) + " threads");
  }
  // The adaptive pool beside busy threads changes its thread count as it
  // measures the load: twice through, so that it has time to.
  const int cores = cpu_backend::usable_cores();
  PoolSettings s(std::max(3, cores), true);
  BusyCompetitors busy(cores);
  for (int round = 0; round < 2; ++round) expect_same_bits(one, compute(), "adaptive pool, busy competitors");
}

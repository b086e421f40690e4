// Where a recurrent layer's parameters come from (src/layers/recurrent.cpp,
// include/flx/layers/recurrent.hpp): PyTorch's checkpoints of nn.RNN,
// nn.LSTM and nn.GRU turned into Flux's names and biases, and Flux's
// keywords init_kernel, init_recurrent_kernel and bias = false for every
// cell and layer, with the errors of each. The layers' arithmetic:
// test_recurrent.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::TempDir;
using flx::testing::expect_close;
using flx::testing::expect_error;
using flx::testing::expect_values;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;

namespace {
using Vec = std::vector<double>;
}  // namespace

// ---- PyTorch's checkpoints ------------------------------------------------------------

TEST(RecurrentCheckpoints, TorchNamesAndBiasesBecomeFluxs) {
  // nn.GRU(2, 1)'s entries under "enc.", with a Dense beside them that stays as it is.
  State s;
  s.insert("enc.weight_ih_l0", tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}));
  s.insert("enc.weight_hh_l0", tensor(std::vector<float>{7, 8, 9}, {3, 1}));
  s.insert("enc.bias_ih_l0", tensor(std::vector<float>{0.5f, 1.5f, 2.5f}, {3}));
  s.insert("enc.bias_hh_l0", tensor(std::vector<float>{10, 20, 30}, {3}));
  s.insert("head.weight", ones(2, 1));
  const State g = torch_to_gru(s, {.prefix = "enc.", .into = "layers.0."});
  std::vector<std::string> keys;
  for (const auto& [k, t] : g) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.0.cell.Wi", "layers.0.cell.Wh", "layers.0.cell.b",
                                            "layers.0.cell.bh", "head.weight"}));
  EXPECT_EQ(g.at("layers.0.cell.Wi").id(), s.at("enc.weight_ih_l0").id());  // the weights as they are
  expect_values(g.at("layers.0.cell.b"), {10.5, 21.5, 2.5});                // b_ih + (b_hr, b_hz, 0)
  expect_values(g.at("layers.0.cell.bh"), {30});                            // b_hn
  auto model = Chain(GRU(2, 1, {.recurrent_bias = true}), Dense(1, 2));
  std::get<1>(model.layers).bias = Tensor{};
  loadmodel(model, rename(g, {{"head.", "layers.1."}}));
  expect_values(std::get<0>(model.layers).cell.bh, {30});
  // LSTM and RNN: the two biases summed; the layer number picks a stacked module's layer.
  State l;
  l.insert("weight_ih_l1", zeros(8, 3));
  l.insert("weight_hh_l1", zeros(8, 2));
  l.insert("bias_ih_l1", ones(8));
  l.insert("bias_hh_l1", full(2.0f, 8));
  expect_values(torch_to_lstm(l, {.layer = 1}).at("cell.bias"), Vec(8, 3.0));
  State r;
  r.insert("weight_ih_l0", zeros(2, 3));
  r.insert("weight_hh_l0", zeros(2, 2));
  const State rnn = torch_to_rnn(r);  // bias=False: no biases to convert
  EXPECT_FALSE(rnn.contains("cell.bias"));
  loadmodel(RNN(3, 2, flx::tanh, {.bias = false}), rnn);
}

TEST(RecurrentCheckpoints, WhatFluxsLayersCannotHoldIsRefused) {
  State s;
  s.insert("lstm.weight_ih_l0", zeros(8, 3));
  s.insert("lstm.weight_hh_l0", zeros(8, 2));
  s.insert("lstm.bias_ih_l0", zeros(8));
  s.insert("lstm.bias_hh_l0", zeros(8));
  expect_error<CheckpointError>([&] { torch_to_lstm(s); },
                                {"torch_to_lstm", "no \"weight_ih_l0\"", "it holds lstm.weight_ih_l0", "{.prefix"});
  expect_error<CheckpointError>([&] { torch_to_gru(s, {.prefix = "lstm."}); },
                                {"torch_to_gru", "\"lstm.weight_ih_l0\" has shape (8×3)", "[3·hidden, input]"});
  State bidirectional = s;
  bidirectional.insert("lstm.weight_ih_l0_reverse", zeros(8, 3));
  expect_error<CheckpointError>([&] { torch_to_lstm(bidirectional, {.prefix = "lstm."}); },
                                {"bidirectional nn.LSTM", "one direction"});
  State projected = s;
  projected.insert("lstm.weight_hr_l0", zeros(1, 2));
  expect_error<CheckpointError>([&] { torch_to_lstm(projected, {.prefix = "lstm."}); }, {"proj_size"});
  State one_bias;
  one_bias.insert("weight_ih_l0", zeros(8, 3));
  one_bias.insert("weight_hh_l0", zeros(8, 2));
  one_bias.insert("bias_ih_l0", zeros(8));
  expect_error<CheckpointError>([&] { torch_to_lstm(one_bias); }, {"has \"bias_ih_l0\" but not \"bias_hh_l0\""});
  State bad_hh;
  bad_hh.insert("weight_ih_l0", zeros(8, 3));
  bad_hh.insert("weight_hh_l0", zeros(8, 3));
  expect_error<CheckpointError>([&] { torch_to_lstm(bad_hh); }, {"\"weight_hh_l0\" has shape (8×3)", "must be (8×2)"});
  // A PyTorch GRU into a GRU without the candidate's recurrent bias: loadmodel names the extra entry.
  State g;
  g.insert("weight_ih_l0", zeros(6, 3));
  g.insert("weight_hh_l0", zeros(6, 2));
  g.insert("bias_ih_l0", zeros(6));
  g.insert("bias_hh_l0", zeros(6));
  expect_error<CheckpointError>([&] { loadmodel(GRU(3, 2), torch_to_gru(g)); }, {"cell.bh"});
}

// ---- Flux's keywords: init_kernel, init_recurrent_kernel and bias = false ---------------

namespace {
// W Wᵀ = I for a wide W (rows orthonormal), Wᵀ W = I for a tall one (columns
// orthonormal), both for a square one: Flux's orthogonal of (rows, cols).
void expect_orthogonal(const Tensor& w, double gain, const std::string& what) {
  ASSERT_EQ(w.ndims(), 2) << what;
  const Tensor m = w.to(Float64);
  const int64_t r = m.shape()[0], c = m.shape()[1], n = std::min(r, c);
  Vec eye(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = gain * gain;
  if (r <= c) expect_values(matmul(m, transpose(m)), eye, 1e-5, what + ": W Wᵀ");
  if (r >= c) expect_values(matmul(transpose(m), m), eye, 1e-5, what + ": Wᵀ W");
}

// Each cell's and layer's constructor of (3 => 5) with options o, by kind.
template <class F>
void for_each_recurrent(const RecurrentOptions& o, F&& f) {
  f("RNNCell", RNNCell(3, 5, flx::tanh, o).Wi, RNNCell(3, 5, flx::tanh, o));
  f("RNN", RNN(3, 5, flx::tanh, o).cell.Wi, RNN(3, 5, flx::tanh, o).cell);
  f("LSTMCell", LSTMCell(3, 5, o).Wi, LSTMCell(3, 5, o));
  f("LSTM", LSTM(3, 5, o).cell.Wi, LSTM(3, 5, o).cell);
  f("GRUCell", GRUCell(3, 5, o).Wi, GRUCell(3, 5, o));
  f("GRU", GRU(3, 5, o).cell.Wi, GRU(3, 5, o).cell);
  f("GRUv3Cell", GRUv3Cell(3, 5, o).Wi, GRUv3Cell(3, 5, o));
  f("GRUv3", GRUv3(3, 5, o).cell.Wi, GRUv3(3, 5, o).cell);
}
}  // namespace

// RecurrentOptions' .init_kernel and .init_recurrent_kernel take an
// initialiser as Dense's .init does: orthogonal gives (semi-)orthogonal
// kernels of Flux's shapes, for every cell and layer.
TEST(RecurrentInit, OrthogonalKernelsAreOrthogonal) {
  set_seed(21);
  const RecurrentOptions o{.init_kernel = orthogonal, .init_recurrent_kernel = orthogonal};
  for_each_recurrent(o, [](const std::string& what, const Tensor&, const auto& cell) {
    expect_orthogonal(cell.Wi, 1, what + " Wi");  // (k·5, 3): tall, orthonormal columns
    expect_orthogonal(cell.Wh, 1, what + " Wh");  // (k·5, 5): square for RNN, else tall
    if constexpr (std::is_same_v<std::decay_t<decltype(cell)>, GRUv3Cell>) expect_orthogonal(cell.Wh_h, 1, what + " Wh_h̃");
  });
  // A wide kernel, (out, in) with in > out: orthonormal rows; and a gain through a lambda.
  const RNN wide(7, 2, flx::tanh, {.init_kernel = orthogonal,
                                   .init_recurrent_kernel = [](const Shape& s) { return orthogonal(s, {.gain = 2}); }});
  EXPECT_EQ(wide.cell.Wi.shape(), (Shape{2, 7}));
  expect_orthogonal(wide.cell.Wi, 1, "RNN(7 => 2) Wi");
  expect_orthogonal(wide.cell.Wh, 2, "RNN(7 => 2) Wh, gain 2");
  // Only the kernels change: the bias is zeros, the initial state zeros, and it runs.
  const LSTM lstm(3, 5, {.learned_state = true, .init_recurrent_kernel = orthogonal});
  expect_values(lstm.cell.bias, Vec(20, 0.0), 0);
  expect_values(lstm.state0.h, Vec(5, 0.0), 0);
  expect_orthogonal(lstm.cell.Wh, 1, "LSTM Wh");
  EXPECT_EQ(lstm(rand({3, 4, 2})).shape(), (Shape{5, 4, 2}));
  // Other initialisers as they are: kaiming_normal's kernels, glorot's recurrent one.
  const GRU gru(30, 40, {.init_kernel = kaiming_normal});
  const auto v = gru.cell.Wi.to_vector<float>();
  double var = 0;
  for (float e : v) var += double(e) * e;
  var /= double(v.size());
  EXPECT_NEAR(var, 2.0 / 30, 0.15 * 2.0 / 30);  // kaiming_normal(120, 30): std √2 / √fan_in, fan_in = 30
}

// A custom initialiser is called with Flux's dims, kernel (k·out, in),
// recurrent kernel (k·out, out) (GRUv3's Wh_h̃ too: (out, out)), in Flux's
// order, and what it returns becomes the kernel.
TEST(RecurrentInit, AnInitialiserGetsFluxsDimsAndItsResultIsTheKernel) {
  std::vector<Shape> kernel, recurrent;
  const RecurrentOptions o{
      .init_kernel = [&](const Shape& s) { kernel.push_back(s); return full(Float32, 0.25, s); },
      .init_recurrent_kernel = [&](const Shape& s) { recurrent.push_back(s); return full(Float32, -0.5, s); }};
  const std::vector<std::tuple<std::string, int64_t, bool>> kinds = {
      {"RNNCell", 1, false}, {"RNN", 1, false},  {"LSTMCell", 4, false}, {"LSTM", 4, false},
      {"GRUCell", 3, false}, {"GRU", 3, false},  {"GRUv3Cell", 3, true}, {"GRUv3", 3, true}};
  size_t at = 0;
  for_each_recurrent(o, [&](const std::string& what, const Tensor&, const auto& cell) {
    const auto& [name, k, v3] = kinds[at++];
    ASSERT_EQ(what, name);
    // for_each_recurrent builds each twice (its Wi, then the cell): two calls each.
    ASSERT_EQ(kernel.size(), 2u) << what;
    ASSERT_EQ(recurrent.size(), v3 ? 4u : 2u) << what;
    EXPECT_EQ(kernel[0], (Shape{k * 5, 3})) << what;
    EXPECT_EQ(recurrent[0], (Shape{k * 5, 5})) << what;
    if (v3) EXPECT_EQ(recurrent[1], (Shape{5, 5})) << what;
    expect_values(cell.Wi, Vec(size_t(k * 15), 0.25), 0, what + " Wi");
    expect_values(cell.Wh, Vec(size_t(k * 25), -0.5), 0, what + " Wh");
    if constexpr (std::is_same_v<std::decay_t<decltype(cell)>, GRUv3Cell>) expect_values(cell.Wh_h, Vec(25, -0.5), 0);
    kernel.clear();
    recurrent.clear();
  });
  EXPECT_EQ(at, kinds.size());
  // The default is glorot_uniform for both, drawn Wi first, then Wh (then
  // Wh_h̃): naming it gives the same bits as leaving it out.
  const RecurrentOptions glorot{.init_kernel = glorot_uniform, .init_recurrent_kernel = glorot_uniform};
  set_seed(22);
  const GRUv3 a(3, 5);
  set_seed(22);
  const GRUv3 b(3, 5, glorot);
  expect_close(a.cell.Wi, b.cell.Wi, 0);
  expect_close(a.cell.Wh, b.cell.Wh, 0);
  expect_close(a.cell.Wh_h, b.cell.Wh_h, 0);
  set_seed(23);
  const LSTM c(3, 5);
  set_seed(23);
  const LSTM d(3, 5, {.init_recurrent_kernel = glorot_uniform});
  expect_close(c.cell.Wi, d.cell.Wi, 0);
  expect_close(c.cell.Wh, d.cell.Wh, 0);
  // A kernel of another element type makes the bias of that type (Flux's create_bias).
  const RNN r64(3, 5, flx::tanh, {.init_kernel = [](const Shape& s) { return glorot_uniform(s).to(Float64); },
                                  .init_recurrent_kernel = [](const Shape& s) { return glorot_uniform(s).to(Float64); }});
  EXPECT_EQ(r64.cell.bias.dtype(), Float64);
  EXPECT_EQ(r64(rand64({3, 4, 2})).dtype(), Float64);
}

namespace {
// A layer's copy with a zero bias of its weights in place of none.
RNN with_zero_bias(const RNN& l) {
  return RNN(RNNCell(l.cell.Wi, l.cell.Wh, zeros(l.cell.Wi.dtype(), Shape{l.cell.Wi.shape()[0]}), l.cell.act));
}
LSTM with_zero_bias(const LSTM& l) {
  return LSTM(LSTMCell(l.cell.Wi, l.cell.Wh, zeros(l.cell.Wi.dtype(), Shape{l.cell.Wi.shape()[0]})));
}
GRU with_zero_bias(const GRU& l) {
  return GRU(GRUCell(l.cell.Wi, l.cell.Wh, zeros(l.cell.Wi.dtype(), Shape{l.cell.Wi.shape()[0]}), l.cell.bh));
}
GRUv3 with_zero_bias(const GRUv3& l) {
  return GRUv3(GRUv3Cell(l.cell.Wi, l.cell.Wh, zeros(l.cell.Wi.dtype(), Shape{l.cell.Wi.shape()[0]}), l.cell.Wh_h));
}
Tensor last_of(const Tensor& h) { return h; }
Tensor last_of(const LSTMState& s) { return s.c; }

// The layer without a bias against the same layer with a zero bias, and
// against its cell step by step (the runner's fused op, where the layer has
// one, against the cell's plain ops, detail::scan_steps): the loss, and the
// gradients of the kernels, the input and the initial state.
template <class Layer, class State>
void expect_no_bias_is_zero_bias(const Layer& layer, const Tensor& x, const State& s0, double tol,
                                 const std::string& what) {
  ASSERT_EQ(leaves(layer.cell).size() + 1, leaves(with_zero_bias(layer).cell).size()) << what;
  auto by_layer = [](const auto& l, const Tensor& xs, const State& s) {
    auto r = l.with_state(xs, s);
    return weighted(r.output, 31) + sum(last_of(r.state) * 3.0);
  };
  auto by_steps = [](const Layer& l, const Tensor& xs, const State& s) {
    auto r = detail::scan_steps(l.cell, detail::as_sequence("steps", xs, -1), s);
    return weighted(r.output, 31) + sum(last_of(r.state) * 3.0);
  };
  const auto a = withgradient(by_layer, layer, x, s0);
  const auto b = withgradient(by_layer, with_zero_bias(layer), x, s0);
  const auto c = withgradient(by_steps, layer, x, s0);
  for (const auto* other : {&b, &c}) {
    const std::string w = what + (other == &b ? " vs a zero bias" : " vs its cell step by step");
    const double va = a.val.template item<double>(), vo = other->val.template item<double>();
    EXPECT_NEAR(va, vo, tol * std::fabs(vo)) << w;
    const auto& ga = std::get<0>(a.grad);
    const auto& go = std::get<0>(other->grad);
    expect_close(ga.cell.Wi, go.cell.Wi, tol, w + ": ∂Wi");
    expect_close(ga.cell.Wh, go.cell.Wh, tol, w + ": ∂Wh");
    expect_close(std::get<1>(a.grad), std::get<1>(other->grad), tol, w + ": ∂x");
    const auto la = leaves(std::get<2>(a.grad)), lo = leaves(std::get<2>(other->grad));
    ASSERT_EQ(la.size(), lo.size()) << w;
    for (size_t i = 0; i < la.size(); ++i) expect_close(la[i], lo[i], tol, w + ": ∂state");
  }
}
}  // namespace

// {.bias = false}: no bias parameter, and the layer is the layer with a zero
// bias, through the runner's fused op (Float64 and Float32: the compute
// table's kernels, which start the input projection from no bias; Float32
// LSTMs: oneDNN's, to which flx passes no bias and which reads zeros in its
// place) as through its cell step by step.
TEST(RecurrentInit, WithoutBiasIsTheLayerWithAZeroBiasFusedOrStepByStep) {
  for (DType t : {Float64, Float32}) {
    SCOPED_TRACE(dtype_name(t));
    set_seed(24);
    const double tol = t == Float64 ? 1e-11 : 3e-5;
    auto as = [t](const auto& m) { return fmap([t](const Tensor& w) { return w.to(t); }, m); };
    const Tensor x = (rand({3, 6, 4}) * 2.0 - 1.0).to(t);
    auto state = [&](int64_t n) { return (rand({5, n}) - 0.5).to(t); };
    const RecurrentOptions none{.bias = false};
    for (Activation act : {Activation(flx::tanh), Activation(relu), Activation(gelu)}) {
      const RNN rnn = as(RNN(3, 5, act, none));
      EXPECT_FALSE(rnn.cell.bias.defined());
      expect_no_bias_is_zero_bias(rnn, x, state(4), tol, "RNN " + shown(act));
    }
    const LSTM lstm = as(LSTM(3, 5, none));
    EXPECT_FALSE(lstm.cell.bias.defined());
    expect_no_bias_is_zero_bias(lstm, x, LSTMState{state(4), state(4)}, tol, "LSTM");
    const Tensor h1 = (rand({5}) - 0.5).to(t), c1 = (rand({5}) - 0.5).to(t);
    expect_no_bias_is_zero_bias(lstm, x, LSTMState{h1, c1}, tol, "LSTM from a vector state");
    expect_no_bias_is_zero_bias(lstm, x.slice_last(0, 1), LSTMState{state(1), state(1)}, tol, "LSTM, batch of one");
    const GRU gru = as(GRU(3, 5, none));
    EXPECT_FALSE(gru.cell.b.defined());
    expect_no_bias_is_zero_bias(gru, x, state(4), tol, "GRU");
    GRU gru_bh = as(GRU(3, 5, {.bias = false, .recurrent_bias = true}));
    gru_bh.cell.bh = (rand({5}) - 0.5).to(t);
    expect_no_bias_is_zero_bias(gru_bh, x, state(4), tol, "GRU with bh only");
    const GRUv3 v3 = as(GRUv3(3, 5, none));
    EXPECT_FALSE(v3.cell.b.defined());
    expect_no_bias_is_zero_bias(v3, x, state(4), tol, "GRUv3");
  }
}

TEST(RecurrentInit, WithoutBiasStateNamesNoBiasAndItTrainsSavesPrintsAndMoves) {
  set_seed(25);
  const RecurrentOptions none{.bias = false};
  auto model = Chain(LSTM(3, 4, none), GRU(4, 4, none), RNN(4, 4, flx::tanh, none), GRUv3(4, 4, none), Dense(4, 2));
  EXPECT_EQ(flx::testing::names_of(state(model)),
            (std::vector<std::string>{"layers.0.cell.Wi", "layers.0.cell.Wh", "layers.1.cell.Wi", "layers.1.cell.Wh",
                                      "layers.2.cell.Wi", "layers.2.cell.Wh", "layers.3.cell.Wi", "layers.3.cell.Wh",
                                      "layers.3.cell.Wh_h\u0303", "layers.4.weight", "layers.4.bias"}));
  EXPECT_EQ(shown(std::get<0>(model.layers)), "LSTM(3 => 4; bias=false)  # 112 parameters");
  EXPECT_EQ(shown(LSTM(3, 5, {.bias = false, .init_kernel = orthogonal})), "LSTM(3 => 5; bias=false)  # 160 parameters");
  EXPECT_EQ(shown(RNNCell(3, 5, relu, none)), "RNNCell(3 => 5, relu; bias=false)  # 40 parameters");
  EXPECT_EQ(shown(GRUCell(3, 5, none)), "GRUCell(3 => 5; bias=false)  # 120 parameters");
  EXPECT_EQ(shown(GRUv3Cell(3, 5, none)), "GRUv3Cell(3 => 5; bias=false)  # 145 parameters");
  // The initialisers do not print (Flux's show has no init keyword either).
  EXPECT_EQ(shown(GRU(3, 5, {.init_kernel = orthogonal})), shown(GRU(3, 5)));
  const Tensor x = rand({3, 6, 5});
  // Saved and loaded into a fresh model without biases: the same outputs.
  const TempDir dir;  // one per test and process: ctest runs tests in parallel
  const std::string path = dir / "flx_test_recurrent_nobias.safetensors";
  save(path, model);
  auto fresh = Chain(LSTM(3, 4, none), GRU(4, 4, none), RNN(4, 4, flx::tanh, none), GRUv3(4, 4, none), Dense(4, 2));
  loadmodel(fresh, load(path));
  expect_close(fresh(x), model(x), 0);
  // On every other device (moved as gpu() moves it, but by name: gpu() itself
  // warns once a process where there is no GPU, which Movement.* checks), the
  // same numbers.
  auto [g_cpu] = gradient([&](const auto& m) { return weighted(m(x), 26); }, model);
  for (const Device& dev : flx::testing::accelerator_devices()) {
    SCOPED_TRACE(dev.str());
    const auto on = model | dev;
    EXPECT_FALSE(std::get<0>(on.layers).cell.bias.defined());
    expect_close(on(x | dev), model(x), 1e-5, "output");
    auto [g_dev] = gradient([&](const auto& m) { return weighted(m(x | dev), 26); }, on);
    const auto gd = leaves(g_dev), gc = leaves(g_cpu);
    ASSERT_EQ(gd.size(), gc.size());
    for (size_t k = 0; k < gd.size(); ++k) expect_close(gd[k], gc[k], 1e-4, "gradient " + std::to_string(k));
  }
  // setup and update: a few Adam steps lower the loss, and no bias appears.
  auto loss = [&](const auto& m) { return mse(m(x), zeros(2, 6, 5)); };
  auto opt = setup(Adam(0.05), model);
  const double first = loss(model).item<double>();
  for (int i = 0; i < 20; ++i) {
    auto [l, grads] = withgradient(loss, model);
    update(opt, model, std::get<0>(grads));
  }
  EXPECT_LT(loss(model).item<double>(), 0.5 * first);
  EXPECT_FALSE(std::get<0>(model.layers).cell.bias.defined());
  EXPECT_FALSE(std::get<3>(model.layers).cell.b.defined());
  EXPECT_EQ(flx::testing::names_of(state(model)).size(), 11u);
}

// An initialiser that returns another shape: a DimensionMismatch naming the
// layer (not its cell, for a layer), the option, the kernel and both shapes,
// before anything else is drawn.
TEST(RecurrentErrors, ABadInitialiserIsATypedErrorNamingTheLayerAndTheShapes) {
  const InitFn transposed = [](const Shape& s) { return zeros(Float32, Shape{s[1], s[0]}); };
  const InitFn nothing = [](const Shape&) { return Tensor{}; };
  const InitFn flat = [](const Shape& s) { return zeros(Float32, Shape{s.numel()}); };
  expect_error<DimensionMismatch>([&] { LSTM(3, 5, {.init_kernel = transposed}); },
                                  {"LSTM: the .init_kernel function must return an array of the dims it is given, "
                                   "(20×3) for Wi (4·out, in); got 3×20"});
  expect_error<DimensionMismatch>([&] { LSTMCell(3, 5, {.init_kernel = transposed}); },
                                  {"LSTMCell: the .init_kernel function", "(20×3) for Wi (4·out, in); got 3×20"});
  expect_error<DimensionMismatch>([&] { GRU(3, 5, {.init_recurrent_kernel = nothing}); },
                                  {"GRU: the .init_recurrent_kernel function must return an array of the dims it is "
                                   "given, (15×5) for Wh (3·out, out); got undefined"});
  expect_error<DimensionMismatch>([&] { GRUCell(3, 5, {.init_recurrent_kernel = transposed}); },
                                  {"GRUCell: the .init_recurrent_kernel", "(15×5) for Wh (3·out, out); got 5×15"});
  expect_error<DimensionMismatch>([&] { RNN(3, 5, flx::tanh, {.init_kernel = flat}); },
                                  {"RNN: the .init_kernel", "(5×3) for Wi (out, in); got 15"});
  expect_error<DimensionMismatch>([&] { RNNCell(3, 5, relu, {.init_recurrent_kernel = flat}); },
                                  {"RNNCell: the .init_recurrent_kernel", "(5×5) for Wh (out, out); got 25"});
  // GRUv3's Wh_h̃ comes from init_recurrent_kernel too, with dims (out, out).
  const InitFn always_15x5 = [](const Shape&) { return zeros(Float32, Shape{15, 5}); };
  expect_error<DimensionMismatch>([&] { GRUv3(3, 5, {.init_recurrent_kernel = always_15x5}); },
                                  {"GRUv3: the .init_recurrent_kernel", "(5×5) for Wh_h\u0303 (out, out); got 15×5"});
  expect_error<DimensionMismatch>([&] { GRUv3Cell(3, 5, {.init_recurrent_kernel = always_15x5}); },
                                  {"GRUv3Cell: the .init_recurrent_kernel", "for Wh_h\u0303"});
  // The sizes and the other options are checked before an initialiser is called.
  int calls = 0;
  const InitFn counted = [&](const Shape& s) { ++calls; return glorot_uniform(s); };
  expect_error<ArgumentError>([&] { GRU(0, 5, {.init_kernel = counted}); }, {"GRU: sizes must be positive"});
  expect_error<ArgumentError>([&] { LSTM(3, 5, {.recurrent_bias = true, .init_kernel = counted}); },
                              {"LSTM", "recurrent_bias is an option of GRU and GRUCell only"});
  expect_error<ArgumentError>([&] { LSTMCell(3, 5, {.learned_state = true, .init_kernel = counted}); },
                              {"LSTMCell", "learned_state is an option of the layer"});
  EXPECT_EQ(calls, 0);
  // An initialiser's own error goes through as it is.
  expect_error<ArgumentError>([] { GRU(3, 5, {.init_kernel = [](const Shape& s) { return orthogonal(Shape{s[0]}); }}); },
                              {"orthogonal: needs two or more dims"});
}

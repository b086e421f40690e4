// The recurrent layers of src/layers/recurrent.cpp
// (include/flx/layers/recurrent.hpp, Flux 0.16's recurrent.jl): a step of
// each cell (RNNCell, LSTMCell, GRUCell, GRUv3Cell) against its formula
// computed here in plain doubles, the layers (RNN, LSTM, GRU, GRUv3,
// Recurrence of any cell) against their cells run step by step, Float64
// finite differences through several time steps (input, initial state,
// every parameter), the learned initial state, initialisation, printing,
// the functor machinery, halves, the errors, and a model of them on every
// device. Their initialisers, bias = false and PyTorch's checkpoints:
// test_recurrent_params.cpp; the devices case by case:
// conformance_seq_cases.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::TempDir;
using flx::testing::check_gradients;
using flx::testing::expect_close;
using flx::testing::expect_error;
using flx::testing::expect_message;
using flx::testing::expect_round_trip;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::ints;
using flx::testing::message_of;
using flx::testing::names_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {

// The reference: plain column-major doubles.
using Vec = std::vector<double>;
Vec values(const Tensor& t) { return t.to(Float64).to_vector<double>(); }
double sig(double v) { return 1 / (1 + std::exp(-v)); }
// y = W x for W (rows × cols), x one column.
Vec matvec(const Vec& w, int64_t rows, const Vec& x) {
  Vec y(size_t(rows), 0.0);
  for (size_t j = 0; j < x.size(); ++j)
    for (int64_t i = 0; i < rows; ++i) y[size_t(i)] += w[size_t(i) + j * size_t(rows)] * x[j];
  return y;
}
Vec column(const Vec& m, int64_t rows, int64_t j) { return Vec(m.begin() + j * rows, m.begin() + (j + 1) * rows); }
Vec add(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// One step of each cell for one column, by the formulas of Flux's docs.
Vec rnn_ref(const Vec& wi, const Vec& wh, const Vec& b, const Vec& x, const Vec& h) {
  const int64_t H = int64_t(h.size());
  Vec g = add(add(matvec(wi, H, x), matvec(wh, H, h)), b);
  for (double& v : g) v = std::tanh(v);
  return g;
}
std::pair<Vec, Vec> lstm_ref(const Vec& wi, const Vec& wh, const Vec& b, const Vec& x, const Vec& h, const Vec& c) {
  const size_t H = h.size();
  const Vec g = add(add(matvec(wi, int64_t(4 * H), x), matvec(wh, int64_t(4 * H), h)), b);
  Vec h2(H), c2(H);
  for (size_t k = 0; k < H; ++k) {
    const double i = sig(g[k]), f = sig(g[H + k]), gg = std::tanh(g[2 * H + k]), o = sig(g[3 * H + k]);
    c2[k] = f * c[k] + i * gg;
    h2[k] = o * std::tanh(c2[k]);
  }
  return {h2, c2};
}
Vec gru_ref(const Vec& wi, const Vec& wh, const Vec& b, const Vec& bh, const Vec& x, const Vec& h) {
  const size_t H = h.size();
  const Vec gx = matvec(wi, int64_t(3 * H), x), gh = matvec(wh, int64_t(3 * H), h);
  Vec out(H);
  for (size_t k = 0; k < H; ++k) {
    const double r = sig(gx[k] + gh[k] + b[k]), z = sig(gx[H + k] + gh[H + k] + b[H + k]);
    const double n = std::tanh(gx[2 * H + k] + b[2 * H + k] + r * (gh[2 * H + k] + (bh.empty() ? 0 : bh[k])));
    out[k] = (1 - z) * n + z * h[k];
  }
  return out;
}

// Expect a (H, B) tensor to hold the reference's columns.
void expect_columns(const Tensor& t, const std::vector<Vec>& cols, const std::string& what) {
  Vec all;
  for (const Vec& c : cols) all.insert(all.end(), c.begin(), c.end());
  expect_values(t, all, 1e-12, what);
}

// One GRUv3 step for one column, by Flux's docstring.
Vec gruv3_ref(const Vec& wi, const Vec& wh, const Vec& b, const Vec& whh, const Vec& x, const Vec& h) {
  const size_t H = h.size();
  const Vec gx = matvec(wi, int64_t(3 * H), x), gh = matvec(wh, int64_t(3 * H), h);
  Vec rh(H), z(H);
  for (size_t k = 0; k < H; ++k) {
    rh[k] = sig(gx[k] + gh[k] + b[k]) * h[k];
    z[k] = sig(gx[H + k] + gh[H + k] + b[H + k]);
  }
  const Vec c = matvec(whh, int64_t(H), rh);
  Vec out(H);
  for (size_t k = 0; k < H; ++k) out[k] = (1 - z[k]) * std::tanh(gx[2 * H + k] + c[k] + b[2 * H + k]) + z[k] * h[k];
  return out;
}

// A cell of one's own for Recurrence: h' = tanh(W x) + decay ⊙ h, returning
// (output, state) as a std::pair, its output twice the state.
struct LeakyCell {
  Tensor W, decay;
  std::pair<Tensor, Tensor> operator()(const Tensor& x, const Tensor& h) const {
    Tensor h2 = flx::tanh(matmul(W, x)) + decay * h;
    return {h2 * 2.0, h2};
  }
};
FLX_FUNCTOR(LeakyCell, W, decay)
Tensor initialstates(const LeakyCell& c) { return zeros(c.W.dtype(), Shape{c.W.shape()[0]}); }
void show_compact(std::ostream& os, const LeakyCell& c) { os << "LeakyCell(" << c.W.shape()[1] << " => " << c.W.shape()[0] << ")"; }
Shape outputsize(const LeakyCell& c, const Shape& x) { return Shape{c.W.shape()[0], x[1]}; }

}  // namespace

// ---- one step of each cell -------------------------------------------------------

TEST(RecurrentCells, RNNCellStepIsTanhOfWiXPlusWhHPlusBias) {
  set_seed(1);
  RNNCell cell(rand64({3, 2}), rand64({3, 3}), rand64({3}));
  const Tensor x = rand64({2, 4}), h = rand64({3, 4});
  const auto [y, state] = cell(x, h);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.id(), state.id());  // Flux: the output is the new state
  std::vector<Vec> want;
  for (int64_t j = 0; j < 4; ++j)
    want.push_back(rnn_ref(values(cell.Wi), values(cell.Wh), values(cell.bias), column(values(x), 2, j),
                           column(values(h), 3, j)));
  expect_columns(y, want, "RNNCell");
  // From the zero state, and unbatched: (in) -> (out).
  const Tensor x1 = rand64({2});
  expect_values(cell(x1).output,
                rnn_ref(values(cell.Wi), values(cell.Wh), values(cell.bias), values(x1), Vec(3, 0.0)), 1e-12);
  EXPECT_EQ(cell(x1).output.shape(), (Shape{3}));
}

TEST(RecurrentCells, LSTMCellStepFollowsFluxsGateOrder) {
  set_seed(2);
  LSTMCell cell(rand64({8, 3}), rand64({8, 2}), rand64({8}));
  const Tensor x = rand64({3, 5});
  const LSTMState s{rand64({2, 5}), rand64({2, 5})};
  const auto [h, state] = cell(x, s);
  EXPECT_EQ(h.id(), state.h.id());
  std::vector<Vec> want_h, want_c;
  for (int64_t j = 0; j < 5; ++j) {
    auto [h2, c2] = lstm_ref(values(cell.Wi), values(cell.Wh), values(cell.bias), column(values(x), 3, j),
                             column(values(s.h), 2, j), column(values(s.c), 2, j));
    want_h.push_back(h2);
    want_c.push_back(c2);
  }
  expect_columns(state.h, want_h, "LSTMCell h");
  expect_columns(state.c, want_c, "LSTMCell c");
  // A state of (out) vectors broadcasts over the batch, as in Flux.
  const Tensor h0 = rand64({2}), c0 = rand64({2});
  const auto from_vectors = cell(x, {h0, c0});
  const auto from_columns = cell(x, {h0 + zeros(Float64, Shape{2, 5}), c0 + zeros(Float64, Shape{2, 5})});
  expect_close(from_vectors.state.c, from_columns.state.c, 1e-14);
}

TEST(RecurrentCells, GRUCellStepWithAndWithoutTheCandidatesRecurrentBias) {
  set_seed(3);
  const Tensor wi = rand64({6, 3}), wh = rand64({6, 2}), b = rand64({6}), bh = rand64({2});
  const Tensor x = rand64({3, 4}), h = rand64({2, 4});
  for (bool with_bh : {false, true}) {
    GRUCell cell(wi, wh, b, with_bh ? bh : Tensor{});
    const auto [y, state] = cell(x, h);
    std::vector<Vec> want;
    for (int64_t j = 0; j < 4; ++j)
      want.push_back(gru_ref(values(wi), values(wh), values(b), with_bh ? values(bh) : Vec{}, column(values(x), 3, j),
                             column(values(h), 2, j)));
    expect_columns(y, want, with_bh ? "GRUCell with bh" : "GRUCell");
    EXPECT_EQ(y.id(), state.id());
  }
}

TEST(RecurrentCells, WithoutBias) {
  set_seed(4);
  LSTMCell cell(3, 2, {.bias = false});
  EXPECT_FALSE(cell.bias.defined());
  const Tensor x = rand({3, 2});
  auto [h, s] = cell(x);
  const LSTMCell with_zero_bias(cell.Wi, cell.Wh, zeros(8));
  expect_close(h, with_zero_bias(x).output, 1e-7);
  EXPECT_EQ(shown(cell), "LSTMCell(3 => 2; bias=false)  # 40 parameters");
}

// ---- layers: the cell over time ----------------------------------------------------

namespace {
// A layer's output against its cell run step by step (Flux's scan), forward
// and with the gradients of every parameter, the input and the state.
template <class Layer, class State>
void expect_layer_is_its_cell_over_time(const Layer& layer, const Tensor& x, const State& s0, const std::string& what) {
  auto by_cell = [&](const Layer& l, const Tensor& xs, State s) {
    std::vector<Tensor> outs;
    const int64_t T = xs.shape()[1];
    for (int64_t t = 0; t < T; ++t) {
      // x[:, t, :] as the product with a one-hot time vector: plain ops only.
      std::vector<double> e(size_t(T), 0.0);
      e[size_t(t)] = 1;
      Tensor xt = sum(xs * tensor(e, {1, T, 1}), {1});
      auto r = l.cell(reshape(xt, {xs.shape()[0], xs.shape()[2]}), s);
      outs.push_back(r.output);
      s = r.state;
    }
    return std::make_pair(outs, s);
  };
  auto loss_layer = [&](const Layer& l, const Tensor& xs, const State& s) {
    auto r = l.with_state(xs, s);
    Tensor total = sum(square(r.output));
    if constexpr (std::is_same_v<State, LSTMState>) total = total + sum(r.state.c * 3.0);
    else total = total + sum(r.state * 3.0);
    return total;
  };
  auto loss_cells = [&](const Layer& l, const Tensor& xs, const State& s) {
    auto [outs, last] = by_cell(l, xs, s);
    Tensor total = sum(square(outs[0]));
    for (size_t i = 1; i < outs.size(); ++i) total = total + sum(square(outs[i]));
    if constexpr (std::is_same_v<State, LSTMState>) total = total + sum(last.c * 3.0);
    else total = total + sum(last * 3.0);
    return total;
  };
  // Forward: every step's output in (out, time, batch).
  const Tensor y = layer(x, s0);
  auto [outs, last] = by_cell(layer, x, s0);
  ASSERT_EQ(y.shape(), (Shape{outs[0].shape()[0], x.shape()[1], x.shape()[2]})) << what;
  for (int64_t t = 0; t < x.shape()[1]; ++t)
    expect_close(reshape(permutedims(y, {0, 2, 1}).slice_last(t, t + 1), outs[size_t(t)].shape()), outs[size_t(t)],
                 1e-12, what + " step " + std::to_string(t));
  auto g1 = gradient(loss_layer, layer, x, s0);
  auto g2 = gradient(loss_cells, layer, x, s0);
  const auto l1 = leaves(g1), l2 = leaves(g2);
  ASSERT_EQ(l1.size(), l2.size()) << what;
  for (size_t i = 0; i < l1.size(); ++i) expect_close(l1[i], l2[i], 1e-11, what + " gradient " + std::to_string(i));
}
}  // namespace

TEST(RecurrentLayers, EachIsItsCellOverTime) {
  set_seed(5);
  auto f64 = [](const auto& m) { return fmap([](const Tensor& t) { return t.to(Float64); }, m); };
  const Tensor x = rand64({3, 5, 4});
  expect_layer_is_its_cell_over_time(f64(RNN(3, 2)), x, rand64({2, 4}), "RNN");
  expect_layer_is_its_cell_over_time(f64(RNN(3, 2, relu)), x, rand64({2, 4}), "RNN relu");
  expect_layer_is_its_cell_over_time(f64(RNN(3, 2, sigmoid)), x, rand64({2}), "RNN σ from a vector state");
  expect_layer_is_its_cell_over_time(f64(RNN(3, 2, identity)), x, rand64({2, 4}), "RNN identity");
  expect_layer_is_its_cell_over_time(f64(RNN(3, 2, gelu)), x, rand64({2, 4}), "RNN gelu (the cells' ops)");
  expect_layer_is_its_cell_over_time(f64(LSTM(3, 2)), x, LSTMState{rand64({2, 4}), rand64({2, 4})}, "LSTM");
  expect_layer_is_its_cell_over_time(f64(LSTM(3, 2, {.bias = false})), x, LSTMState{rand64({2}), rand64({2})},
                                     "LSTM without bias, vector state");
  expect_layer_is_its_cell_over_time(f64(GRU(3, 2)), x, rand64({2, 4}), "GRU");
  GRU with_bh = f64(GRU(3, 2, {.recurrent_bias = true}));
  with_bh.cell.bh = rand64({2});
  expect_layer_is_its_cell_over_time(with_bh, x, rand64({2, 4}), "GRU with bh");
}

// In Float32 the CPU runs an LSTM through oneDNN's (the dnn table's rnn_*),
// in pieces of the batch: the same as its cell step by step, for batches
// of one piece, of equal pieces and of unequal ones. oneDNN pads the rows
// of the weights (and of their gradients) to a multiple of 16 floats, and
// by 16 more at multiples of 256: at 6 and 256 features (4H = 24, 1024) they
// go through reorders, at 20 (4H = 80) they keep flx's layout.
TEST(RecurrentLayers, Float32LSTMIsItsCellOverTime) {
  set_seed(15);
  struct Size {
    int64_t in, hidden;
    std::vector<int64_t> batches;
  };
  for (const Size& size : {Size{5, 6, {1, 8, 17, 32}}, Size{3, 20, {1, 33}}, Size{128, 256, {1, 33}}})
  for (int64_t batch : size.batches) {
    for (bool bias : {true, false}) {
     for (bool last_state : {true, false}) {  // with_state (the last c in the loss), or the outputs alone
      const int64_t in = size.in, hidden = size.hidden;
      const LSTM lstm(in, hidden, {.bias = bias});
      const Tensor x = rand({in, 7, batch}) * 2.0 - 1.0;
      const LSTMState s{rand({hidden, batch}) - 0.5, rand({hidden, batch}) - 0.5};
      auto loss = [&](const LSTM& m, const Tensor& xs, const LSTMState& st, bool by_cell) {
        Tensor y, c;
        if (by_cell) {
          LSTMState cur = st;
          std::vector<Tensor> outs;
          const Tensor xt = permutedims(xs, {0, 2, 1});
          for (int64_t t = 0; t < 7; ++t) {
            auto r = m.cell(reshape(xt.slice_last(t, t + 1), {in, batch}), cur);
            outs.push_back(r.output);
            cur = r.state;
          }
          Tensor total = sum(outs[0] * outs[0]);
          for (size_t t = 1; t < outs.size(); ++t) total = total + sum(outs[t] * outs[t] * double(t + 1));
          return last_state ? total + sum(cur.c * 0.5) : total;
        }
        auto r = last_state ? m.with_state(xs, st) : RecurrentOutput<LSTMState>{m(xs, st), {}};
        Tensor total = zeros(Shape{});
        for (int64_t t = 0; t < 7; ++t) {
          const Tensor yt = reshape(permutedims(r.output, {0, 2, 1}).slice_last(t, t + 1), {hidden, batch});
          total = total + sum(yt * yt * double(t + 1));
        }
        return last_state ? total + sum(r.state.c * 0.5) : total;
      };
      const std::string what = std::to_string(in) + " => " + std::to_string(hidden) + ", batch " +
                               std::to_string(batch) + (bias ? "" : " without bias") + (last_state ? ", with_state" : "");
      auto by_layer = withgradient([&](const LSTM& m, const Tensor& xs, const LSTMState& st) { return loss(m, xs, st, false); },
                                   lstm, x, s);
      auto by_cell = withgradient([&](const LSTM& m, const Tensor& xs, const LSTMState& st) { return loss(m, xs, st, true); },
                                  lstm, x, s);
      EXPECT_NEAR(by_layer.val.item<double>(), by_cell.val.item<double>(), 1e-5 * std::fabs(by_cell.val.item<double>()))
          << what;
      const auto l1 = leaves(by_layer.grad), l2 = leaves(by_cell.grad);
      ASSERT_EQ(l1.size(), l2.size()) << what;
      for (size_t i = 0; i < l1.size(); ++i) {
        const double scale = std::max(1.0, maximum(abs(l2[i])).item<double>());  // sums of many products
        expect_close(l1[i], l2[i], 2e-5 * scale, what + " gradient " + std::to_string(i));
      }
     }
    }
  }
}

TEST(RecurrentLayers, ShapesZeroStateAndUnbatchedSequences) {
  set_seed(6);
  LSTM lstm(3, 5);
  const Tensor x = rand({3, 7, 2});
  EXPECT_EQ(lstm(x).shape(), (Shape{5, 7, 2}));
  EXPECT_EQ(lstm(x).dtype(), Float32);
  // No state given: zeros.
  expect_close(lstm(x), lstm(x, {zeros(5), zeros(5)}), 0);
  auto [y, last] = lstm.with_state(x);
  EXPECT_EQ(last.h.shape(), (Shape{5, 2}));
  expect_close(reshape(permutedims(y, {0, 2, 1}).slice_last(6, 7), {5, 2}), last.h, 0);
  // (in, time): one sequence, (out, time) out and an (out) state.
  const Tensor one = rand({3, 7});
  auto [y1, last1] = lstm.with_state(one);
  EXPECT_EQ(y1.shape(), (Shape{5, 7}));
  EXPECT_EQ(last1.c.shape(), (Shape{5}));
  expect_close(y1, reshape(lstm(reshape(one, {3, 7, 1})), {5, 7}), 1e-6);
  GRU gru(3, 4);
  EXPECT_EQ(gru(one).shape(), (Shape{4, 7}));
  EXPECT_EQ(RNN(3, 4).with_state(one).state.shape(), (Shape{4}));
}

// ---- finite differences in Float64, through several time steps ------------------------

TEST(RecurrentGradients, RNNMatchesFiniteDifferences) {
  set_seed(7);
  const Tensor w = rand64({2, 4, 3});
  for (Activation act : {Activation(flx::tanh), Activation(relu), Activation(gelu)}) {
    check_gradients(
        [&](const std::vector<Tensor>& v) {
          RNN rnn(RNNCell(v[0], v[1], v[2], act));
          auto r = rnn.with_state(v[3], v[4]);
          return sum(r.output * w) + sum(r.state * r.state);
        },
        {rand64({2, 3}), rand64({2, 2}), rand64({2}), rand64({3, 4, 3}), rand64({2, 3})}, 1e-7, 1e-6,
        "RNN " + act.name());
  }
}

TEST(RecurrentGradients, LSTMMatchesFiniteDifferences) {
  set_seed(8);
  const Tensor w = rand64({2, 4, 3}), wc = rand64({2, 3});
  check_gradients(
      [&](const std::vector<Tensor>& v) {
        LSTM lstm(LSTMCell(v[0], v[1], v[2]));
        auto r = lstm.with_state(v[3], {v[4], v[5]});
        return sum(r.output * w) + sum(r.state.c * wc) + sum(r.state.h);
      },
      {rand64({8, 3}), rand64({8, 2}), rand64({8}), rand64({3, 4, 3}), rand64({2, 3}), rand64({2, 3})}, 1e-7, 1e-6,
      "LSTM");
}

TEST(RecurrentGradients, GRUMatchesFiniteDifferences) {
  set_seed(9);
  const Tensor w = rand64({2, 4, 3});
  check_gradients(
      [&](const std::vector<Tensor>& v) {
        GRU gru(GRUCell(v[0], v[1], v[2], v[3]));
        auto r = gru.with_state(v[4], v[5]);
        return sum(r.output * w) + sum(r.state * r.state);
      },
      {rand64({6, 3}), rand64({6, 2}), rand64({6}), rand64({2}), rand64({3, 4, 3}), rand64({2, 3})}, 1e-7, 1e-6, "GRU");
}

// The layers' fused kernels (the backend's rnn_* and src/ops' scan)
// differentiate once; a nested gradient call steps the cells, whose ops
// differentiate to any order (ops::use_kernel; issue 40: before, a second
// derivative of a recurrent layer was refused).
TEST(RecurrentGradients, SecondDerivativesThroughANestedGradientMatchFiniteDifferences) {
  set_seed(11);
  const Tensor w = rand64({2, 4, 3});
  const RNN rnn = f64(RNN(3, 2));
  const LSTM lstm = f64(LSTM(3, 2));
  const GRU gru = f64(GRU(3, 2));
  for (const auto& [layer, name] : std::vector<std::pair<std::function<Tensor(const Tensor&)>, std::string>>{
           {rnn, "RNN"}, {lstm, "LSTM"}, {gru, "GRU"}}) {
    auto inner = [&](const Tensor& u) {  // d/du of sum(y^2 .* w)
      return std::get<0>(gradient([&](const Tensor& x) { return sum(layer(x) * layer(x) * w); }, u));
    };
    check_gradients([&](const V& v) { return sum(inner(v[0]) * inner(v[0])); }, {rand64({3, 4, 3})}, 1e-6, 1e-6,
                    name + "'s second derivative");
  }
}

TEST(RecurrentGradients, CellsOverSeveralStepsMatchFiniteDifferences) {
  set_seed(10);
  check_gradients(
      [](const std::vector<Tensor>& v) {
        LSTMCell cell(v[0], v[1], v[2]);
        LSTMState s{v[4], v[5]};
        Tensor total = zeros(Float64, Shape{});
        for (int t = 0; t < 3; ++t) {
          auto r = cell(v[3] * double(t + 1), s);
          s = r.state;
          total = total + sum(r.output * r.output);
        }
        return total + sum(s.c);
      },
      {rand64({8, 3}), rand64({8, 2}), rand64({8}), rand64({3, 2}), rand64({2, 2}), rand64({2})}, 1e-7, 1e-6,
      "LSTMCell over 3 steps");
  check_gradients(
      [](const std::vector<Tensor>& v) {
        GRUCell cell(v[0], v[1], v[2], v[3]);
        Tensor h = v[5];
        for (int t = 0; t < 3; ++t) h = cell(v[4] * double(t + 1), h).state;
        return sum(h * h);
      },
      {rand64({6, 3}), rand64({6, 2}), rand64({6}), rand64({2}), rand64({3}), rand64({2})}, 1e-7, 1e-6,
      "GRUCell over 3 steps, unbatched");
}

// ---- the learned initial state --------------------------------------------------------

TEST(RecurrentLayers, LearnedInitialStateIsATrainableParameter) {
  set_seed(11);
  LSTM lstm(3, 2, {.learned_state = true});
  ASSERT_TRUE(lstm.state0.h.defined());
  expect_values(lstm.state0.h, {0, 0});
  EXPECT_EQ(shown(lstm), "LSTM(3 => 2; learned_state=true)  # 52 parameters");  // 24 + 16 + 8, and 2 + 2
  const auto st = state(lstm);
  std::vector<std::string> keys;
  for (const auto& [k, t] : st) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"cell.Wi", "cell.Wh", "cell.bias", "state0.h", "state0.c"}));
  // The sequence starts from state0: a nonzero state0 changes the output.
  const Tensor x = rand({3, 4, 2});
  lstm.state0.h = full(0.5f, 2);
  expect_close(lstm(x), lstm(x, {full(0.5f, 2), zeros(2)}), 0);
  // Its gradient flows, and an optimiser moves it.
  auto loss = [&](const LSTM& m) { return sum(m(x)); };
  auto [g] = gradient(loss, lstm);
  ASSERT_TRUE(g.state0.h.defined() && g.state0.c.defined());
  EXPECT_GT(sum(abs(g.state0.c)).item<double>(), 0);
  auto opt = setup(Descent(0.1), lstm);
  const auto before = lstm.state0.c.to_vector<float>();
  update(opt, lstm, g);
  const auto after = lstm.state0.c.to_vector<float>(), grad = g.state0.c.to_vector<float>();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.1f * grad[i], 1e-6);
  // RNN and GRU likewise hold one state0.
  GRU gru(3, 2, {.learned_state = true});
  EXPECT_EQ(shown(gru), "GRU(3 => 2; learned_state=true)  # 38 parameters");
  auto [gg] = gradient([&](const GRU& m) { return sum(m(x)); }, gru);
  EXPECT_TRUE(gg.state0.defined());
  EXPECT_EQ(initialstates(gru).id(), gru.state0.id());
  EXPECT_EQ(shown(RNN(3, 2, relu, {.learned_state = true})), "RNN(3 => 2, relu; learned_state=true)  # 14 parameters");
}

// ---- initialisation, printing, functors ---------------------------------------------------

TEST(RecurrentLayers, FluxsInitialisation) {
  set_seed(12);
  LSTM lstm(30, 40);
  EXPECT_EQ(lstm.cell.Wi.shape(), (Shape{160, 30}));
  EXPECT_EQ(lstm.cell.Wh.shape(), (Shape{160, 40}));
  EXPECT_EQ(lstm.cell.bias.shape(), (Shape{160}));
  expect_values(lstm.cell.bias, Vec(160, 0.0));
  // glorot_uniform(4out, in): uniform on ±sqrt(6 / (in + 4out)), the same for Wh with fan-in out.
  const std::vector<std::pair<Tensor, double>> kernels = {{lstm.cell.Wi, std::sqrt(6.0 / 190)},
                                                           {lstm.cell.Wh, std::sqrt(6.0 / 200)}};
  for (const auto& [w, bound] : kernels) {
    double mx = 0, var = 0;
    const auto v = w.to_vector<float>();
    for (float e : v) {
      mx = std::max(mx, double(std::fabs(e)));
      var += double(e) * e;
    }
    var /= double(v.size());
    EXPECT_LE(mx, bound);
    EXPECT_GT(mx, 0.95 * bound);
    EXPECT_NEAR(var, bound * bound / 3, 0.08 * bound * bound / 3);
  }
  GRU gru(5, 7);
  EXPECT_EQ(gru.cell.Wi.shape(), (Shape{21, 5}));
  EXPECT_FALSE(gru.cell.bh.defined());
  EXPECT_FALSE(gru.state0.defined());
  EXPECT_EQ(RNN(5, 7).cell.Wh.shape(), (Shape{7, 7}));
}

TEST(RecurrentLayers, PrintLikeFlux) {
  EXPECT_EQ(shown(RNNCell(3, 5)), "RNNCell(3 => 5, tanh)  # 45 parameters");
  EXPECT_EQ(shown(LSTMCell(3, 5)), "LSTMCell(3 => 5)    # 180 parameters");
  EXPECT_EQ(shown(GRUCell(3, 5)), "GRUCell(3 => 5)     # 135 parameters");
  EXPECT_EQ(shown(RNN(4, 6)), "RNN(4 => 6, tanh)   # 66 parameters");
  EXPECT_EQ(shown(RNN(4, 6, relu)), "RNN(4 => 6, relu)   # 66 parameters");
  EXPECT_EQ(shown(LSTM(3, 5)), "LSTM(3 => 5)        # 180 parameters");
  EXPECT_EQ(shown(GRU(3, 5)), "GRU(3 => 5)         # 135 parameters");
  EXPECT_EQ(shown(GRU(3, 5, {.bias = false, .recurrent_bias = true})),
            "GRU(3 => 5; bias=false, recurrent_bias=true)  # 125 parameters");
  EXPECT_EQ(shown(Chain(LSTM(3, 5), Dense(5, 2))),
            "Chain(\n  LSTM(3 => 5),                         # 180 parameters\n"
            "  Dense(5 => 2),                        # 12 parameters\n"
            ")                   # Total: 5 arrays, 192 parameters, 768 bytes.");
}

TEST(RecurrentLayers, WorkWithFunctorsCheckpointsAndOptimisers) {
  set_seed(13);
  auto model = Chain(GRU(3, 4), Dense(4, 2));
  const Tensor x = rand({3, 6, 5});
  EXPECT_EQ(model(x).shape(), (Shape{2, 6, 5}));
  // fmap reaches every parameter.
  auto m64 = fmap([](const Tensor& t) { return t.to(Float64); }, model);
  EXPECT_EQ(std::get<0>(m64.layers).cell.Wh.dtype(), Float64);
  EXPECT_EQ(m64(x.to(Float64)).dtype(), Float64);
  // Saved and loaded into a fresh model, the same outputs.
  const TempDir dir;  // one per test and process: ctest runs tests in parallel
  const std::string path = dir / "flx_test_recurrent.safetensors";
  save(path, model);
  auto fresh = Chain(GRU(3, 4), Dense(4, 2));
  loadmodel(fresh, load(path));
  expect_close(fresh(x), model(x), 0);
  // A few Adam steps lower the loss.
  auto loss = [&](const auto& m) { return mse(m(x), zeros(2, 6, 5)); };
  auto opt = setup(Adam(0.05), model);
  const double first = loss(model).item<double>();
  for (int i = 0; i < 20; ++i) {
    auto [l, grads] = withgradient(loss, model);
    update(opt, model, std::get<0>(grads));
  }
  EXPECT_LT(loss(model).item<double>(), 0.5 * first);
}

TEST(RecurrentLayers, HalvesRunTheCellsStepByStep) {
  set_seed(14);
  const LSTM lstm(3, 4);
  const Tensor x = rand({3, 5, 2});
  for (DType t : {Float16, BFloat16}) {
    const LSTM low = fmap([t](const Tensor& w) { return w.to(t); }, lstm);
    const Tensor y = low(x.to(t));
    EXPECT_EQ(y.dtype(), t);
    expect_close(y.to(Float32), lstm(x), t == Float16 ? 5e-3 : 3e-2, std::string(dtype_name(t)));
    auto [g] = gradient([&](const Tensor& xs) { return sum(low(xs)); }, x.to(t));
    EXPECT_EQ(g.dtype(), t);
  }
}

// ---- errors -----------------------------------------------------------------------

TEST(RecurrentErrors, WrongFeatureCountRankOrStateShape) {
  LSTM lstm(3, 5);
  expect_error<DimensionMismatch>([&] { lstm(rand({4, 7, 2})); },
                                  {"LSTM(3 => 5)", "sequence of 3 features", "(3, time, batch)", "got shape 4×7×2"});
  expect_error<DimensionMismatch>([&] { lstm(rand({3, 7, 2, 1})); }, {"LSTM(3 => 5)", "got shape 3×7×2×1"});
  expect_error<DimensionMismatch>([&] { lstm(rand({3})); }, {"got shape 3.", "goes to the cell"});
  expect_error<DimensionMismatch>([&] { lstm(rand({3, 0, 2})); }, {"at least one time step"});
  expect_error<DimensionMismatch>([&] { lstm(rand({3, 7, 2}), {zeros(5, 3), zeros(5, 3)}); },
                                  {"LSTM(3 => 5)", "state h of shape (5) or (5, 2)", "got shape 5×3", "initialstates"});
  expect_error<DimensionMismatch>([&] { lstm(rand({3, 7, 2}), {zeros(5), zeros(4)}); }, {"state c", "got shape 4."});
  GRU gru(3, 5);
  expect_error<DimensionMismatch>([&] { gru(rand({3, 7, 2}), zeros(6, 2)); }, {"GRU(3 => 5)", "state h"});
  RNNCell cell(3, 5);
  expect_error<DimensionMismatch>([&] { cell(rand({2, 4})); },
                                  {"RNNCell(3 => 5, tanh)", "input of 3 features", "(3, batch)", "got shape 2×4"});
  expect_error<DimensionMismatch>([&] { cell(rand({3, 7, 4})); }, {"goes to the layer"});
  expect_error<DimensionMismatch>([&] { cell(rand({3, 4}), zeros(5, 3)); }, {"state h of shape (5) or (5, 4)"});
  expect_error<DimensionMismatch>([&] { LSTMCell(3, 2)(rand({3, 4}), {zeros(2, 4), Tensor{}}); },
                                  {"state c", "got shape undefined"});
}

TEST(RecurrentErrors, BadConstructionArguments) {
  expect_error<ArgumentError>([] { LSTMCell(3, 5, {.learned_state = true}); },
                              {"LSTMCell", "learned_state is an option of the layer (LSTM)"});
  expect_error<ArgumentError>([] { LSTM(3, 5, {.recurrent_bias = true}); },
                              {"LSTM", "recurrent_bias is an option of GRU and GRUCell only"});
  expect_error<ArgumentError>([] { RNNCell(3, 5, flx::tanh, {.recurrent_bias = true}); }, {"RNNCell"});
  expect_error<ArgumentError>([] { GRU(0, 5); }, {"GRU: sizes must be positive; got 0 => 5"});  // the layer, not its cell
  expect_error<DimensionMismatch>([] { LSTMCell(zeros(7, 3), zeros(7, 2), zeros(7)); },
                                  {"LSTMCell", "Wi must be a matrix (4·out, in)", "got shape 7×3"});
  expect_error<DimensionMismatch>([] { GRUCell(zeros(6, 3), zeros(6, 3), zeros(6)); },
                                  {"GRUCell", "Wh must have shape (6×2) to match Wi (6×3); got 6×3"});
  expect_error<DimensionMismatch>([] { RNNCell(zeros(2, 3), zeros(2, 2), zeros(3)); }, {"bias must have shape (2)"});
  expect_error<DimensionMismatch>([] { GRUCell(zeros(6, 3), zeros(6, 2), zeros(6), zeros(3)); },
                                  {"bh", "must have shape (2)"});
  expect_error<DimensionMismatch>([] { GRU(GRUCell(3, 2), zeros(3)); },
                                  {"GRU(3 => 2; learned_state=true)", "state0 must have shape (2)"});
  expect_error<ArgumentError>([] { LSTM(LSTMCell(3, 2), {zeros(2), Tensor{}}); }, {"needs both h and c"});
}

// ---- GRUv3 -------------------------------------------------------------------------

TEST(GRUv3, CellStepFollowsFluxsEquations) {
  set_seed(3);
  const GRUv3Cell cell(rand64({6, 3}), rand64({6, 2}), rand64({6}), rand64({2, 2}));
  const Tensor x = rand64({3, 4}), h = rand64({2, 4});
  auto [y, s] = cell(x, h);
  ASSERT_EQ(y.shape(), (Shape{2, 4}));
  expect_close(s, y, 0);
  const Vec xv = x.to_vector<double>(), hv = h.to_vector<double>();
  Vec expected;
  for (int64_t j = 0; j < 4; ++j) {
    const Vec col = gruv3_ref(cell.Wi.to_vector<double>(), cell.Wh.to_vector<double>(), cell.b.to_vector<double>(),
                              cell.Wh_h.to_vector<double>(), Vec(xv.begin() + 3 * j, xv.begin() + 3 * j + 3),
                              Vec(hv.begin() + 2 * j, hv.begin() + 2 * j + 2));
    expected.insert(expected.end(), col.begin(), col.end());
  }
  expect_values(y, expected, 1e-12, "GRUv3Cell");
  // From the zero state, and a vector state for a batch.
  expect_close(cell(x).output, cell(x, zeros(Float64, Shape{2})).output, 0);
  expect_close(cell(x, zeros(Float64, Shape{2})).output, cell(x, zeros(Float64, Shape{2, 4})).output, 0);
  // Without a bias: the same as a zero one.
  const GRUv3Cell nob(cell.Wi, cell.Wh, Tensor{}, cell.Wh_h), zb(cell.Wi, cell.Wh, zeros(Float64, Shape{6}), cell.Wh_h);
  expect_close(nob(x, h).output, zb(x, h).output, 0);
}

TEST(GRUv3, LayerIsItsCellOverTimeAndRecurrenceIsTheLayer) {
  set_seed(4);
  const GRUv3 l = f64(GRUv3(3, 2));
  const Tensor x = rand64({3, 5, 4}), h0 = rand64({2, 4});
  auto [y, hT] = l.with_state(x, h0);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4}));
  Tensor h = h0;
  for (int64_t t = 0; t < 5; ++t) {
    h = l.cell(selectdim(x, 1, t), h).output;
    expect_close(selectdim(y, 1, t), h, 1e-14, "step " + std::to_string(t));
  }
  expect_close(hT, h, 1e-14, "last state");
  expect_close(l(x, h0), y, 0);
  expect_close(l(x), l(x, zeros(Float64, Shape{2})), 0);
  // Recurrence of the cell: the layer.
  const Recurrence r(l.cell);
  expect_close(r(x, h0), y, 0);
  auto [ry, rh] = r.with_state(x, h0);
  expect_close(ry, y, 0);
  expect_close(rh, hT, 0);
  // Without a batch dim: (out, time) and (out).
  const Tensor x1 = rand64({3, 5});
  auto [y1, h1] = l.with_state(x1);
  EXPECT_EQ(y1.shape(), (Shape{2, 5}));
  EXPECT_EQ(h1.shape(), (Shape{2}));
  expect_close(y1, reshape(l(reshape(x1, {3, 5, 1})), {2, 5}), 0);
}

TEST(GRUv3, GradientsMatchFiniteDifferences) {
  set_seed(6);
  check_gradients(
      [](const V& v) {
        auto [y, h] = GRUv3(GRUv3Cell(v[0], v[1], v[2], v[3])).with_state(v[4], v[5]);
        return weighted(y, 1) + weighted(h, 2);
      },
      {rand64({6, 3}), rand64({6, 2}), rand64({6}), rand64({2, 2}), rand64({3, 4, 3}), rand64({2, 3})}, 1e-6, 1e-6,
      "GRUv3");
  // The learned initial state, and the unused third block of Wh: no gradient.
  GRUv3 l = f64(GRUv3(2, 2, {.learned_state = true}));
  l.state0 = rand64({2});
  const Tensor x = rand64({2, 3, 2});
  auto [g] = gradient([&](const GRUv3& m) { return weighted(m(x), 3); }, l);
  EXPECT_TRUE(g.state0.defined());
  EXPECT_GT(sum(abs(g.state0)).item<double>(), 0);
  expect_values(slice(g.cell.Wh, 0, 4, 6), Vec(4, 0.0), 0, "Wh's third block");
}

TEST(GRUv3, PrintsInitialisesSavesAndShapes) {
  EXPECT_EQ(shown(GRUv3Cell(3, 5)), "GRUv3Cell(3 => 5)   # 160 parameters");
  EXPECT_EQ(shown(GRUv3(3, 5)), "GRUv3(3 => 5)       # 160 parameters");
  EXPECT_EQ(shown(GRUv3(3, 5, {.bias = false, .learned_state = true})),
            "GRUv3(3 => 5; bias=false, learned_state=true)  # 150 parameters");
  const GRUv3 l(3, 5);
  EXPECT_EQ(l.cell.Wi.shape(), (Shape{15, 3}));
  EXPECT_EQ(l.cell.Wh.shape(), (Shape{15, 5}));
  EXPECT_EQ(l.cell.Wh_h.shape(), (Shape{5, 5}));
  EXPECT_EQ(sum(abs(l.cell.b)).item<double>(), 0);
  // Flux's names, Wh_h̃ included.
  EXPECT_EQ(names_of(l), (std::vector<std::string>{"cell.Wi", "cell.Wh", "cell.b", "cell.Wh_h\u0303"}));
  expect_round_trip(Chain(GRUv3(3, 5), Dense(5, 2)));
  EXPECT_EQ(outputsize(l, Shape{3, 7, 2}), (Shape{5, 7, 2}));
  EXPECT_EQ(outputsize(l, Shape{3, 7}), (Shape{5, 7}));
  EXPECT_EQ(outputsize(l.cell, Shape{3, 2}), (Shape{5, 2}));
  EXPECT_EQ(outputsize(Chain(GRUv3(3, 5), Dense(5, 2)), Shape{3, 7, 2}), (Shape{2, 7, 2}));
}

TEST(GRUv3, ErrorsNameTheLayerAndTheShapes) {
  const GRUv3 l(3, 5);
  const std::string m = message_of<DimensionMismatch>([&] { l(rand(4, 7, 2)); });
  EXPECT_TRUE(has(m, "GRUv3(3 => 5): expected a sequence of 3 features, (3, time, batch) or (3, time); got shape "
                     "4×7×2")) << m;
  expect_message<DimensionMismatch>([&] { outputsize(l, Shape{4, 7, 2}); }, "GRUv3(3 => 5)");
  const std::string s = message_of<DimensionMismatch>([&] { l(rand(3, 7, 2), zeros(5, 3)); });
  EXPECT_TRUE(has(s, "GRUv3(3 => 5): expected the state h of shape (5) or (5, 2); got shape 5×3")) << s;
  const std::string c = message_of<DimensionMismatch>([&] { l.cell(rand(2, 4)); });
  EXPECT_TRUE(has(c, "GRUv3Cell(3 => 5): expected an input of 3 features")) << c;
  expect_message<DimensionMismatch>([&] { GRUv3Cell(rand(6, 3), rand(6, 2), rand(6), rand(3, 3)); },
                  "GRUv3Cell: Wh_h (Flux's Wh_h\u0303, the candidate's recurrent kernel) must have shape 2×2");
  expect_message<ArgumentError>([] { GRUv3(0, 5); }, "GRUv3: sizes must be positive");
  expect_message<ArgumentError>([] { GRUv3(3, 5, {.recurrent_bias = true}); },
                  "recurrent_bias is an option of GRU and GRUCell only");
}

// ---- Recurrence ----------------------------------------------------------------------

// Recurrence of a built-in cell runs through the same runner, and the same
// fused op, as the cell's layer: the same numbers, bit for bit.
TEST(Recurrence, OfABuiltInCellIsItsLayer) {
  set_seed(8);
  const Tensor x = rand({3, 6, 4});
  const RNN rnn(3, 5);
  const LSTM lstm(3, 5);
  const GRU gru(3, 5);
  expect_close(Recurrence(rnn.cell)(x), rnn(x), 0, "RNN");
  expect_close(Recurrence(lstm.cell)(x), lstm(x), 0, "LSTM");
  expect_close(Recurrence(gru.cell)(x), gru(x), 0, "GRU");
  auto [y, s] = Recurrence(lstm.cell).with_state(x);
  auto [ly, ls] = lstm.with_state(x);
  expect_close(y, ly, 0);
  expect_close(s.h, ls.h, 0);
  expect_close(s.c, ls.c, 0);
  // And their gradients.
  auto g1 = std::get<0>(gradient([&](const Recurrence<LSTMCell>& r) { return weighted(r(x), 2); }, Recurrence(lstm.cell)));
  auto g2 = std::get<0>(gradient([&](const LSTM& l) { return weighted(l(x), 2); }, lstm));
  expect_close(g1.cell.Wi, g2.cell.Wi, 0);
  expect_close(g1.cell.Wh, g2.cell.Wh, 0);
  expect_close(g1.cell.bias, g2.cell.bias, 0);
}

TEST(Recurrence, RunsACellOfOnesOwn) {
  set_seed(9);
  const Recurrence r(LeakyCell{rand64({2, 3}), rand64({2})});
  const Tensor x = rand64({3, 4, 2});
  auto [y, h] = r.with_state(x);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 2}));
  Tensor s = zeros(Float64, Shape{2});
  for (int64_t t = 0; t < 4; ++t) {
    auto [out, next] = r.cell(selectdim(x, 1, t), s);
    expect_close(selectdim(y, 1, t), out, 1e-14);
    s = next;
  }
  expect_close(h, s, 1e-14);
  EXPECT_EQ(shown(r), "Recurrence(LeakyCell(3 => 2))  # 8 parameters");
  EXPECT_EQ(outputsize(r, Shape{3, 4, 2}), (Shape{2, 4, 2}));
  EXPECT_EQ(names_of(r), (std::vector<std::string>{"cell.W", "cell.decay"}));
  check_gradients(
      [](const V& v) {
        auto [y, h] = Recurrence(LeakyCell{v[0], v[1]}).with_state(v[2], v[3]);
        return weighted(y, 4) + weighted(h, 5);
      },
      {rand64({2, 3}), rand64({2}), rand64({3, 4, 2}), rand64({2, 2})}, 1e-6, 1e-6, "Recurrence(LeakyCell)");
  // A wrong rank names the Recurrence.
  const std::string m = message_of<DimensionMismatch>([&] { r(rand64({3})); });
  EXPECT_TRUE(has(m, "Recurrence(LeakyCell(3 => 2)): expected a sequence (features, time, batch) or (features, "
                     "time); got shape 3.")) << m;
}

TEST(Recurrence, PrintsAsFluxAndChecksItsBuiltInCellsState) {
  EXPECT_EQ(shown(Recurrence(RNNCell(2, 3))), "Recurrence(RNNCell(2 => 3, tanh))  # 18 parameters");
  EXPECT_EQ(shown(Recurrence(GRUv3Cell(2, 3))), "Recurrence(GRUv3Cell(2 => 3))  # 63 parameters");
  const Recurrence r(LSTMCell(3, 4));
  EXPECT_EQ(outputsize(r, Shape{3, 5, 2}), (Shape{4, 5, 2}));
  EXPECT_EQ(outputsize(r, Shape{3, 5}), (Shape{4, 5}));
  const std::string m = message_of<DimensionMismatch>([&] { r(rand(3, 5, 2), LSTMState{zeros(4, 3), zeros(4, 3)}); });
  EXPECT_TRUE(has(m, "Recurrence(LSTMCell(3 => 4)): expected the state h of shape (4) or (4, 2); got shape 4×3")) << m;
  const std::string f = message_of<DimensionMismatch>([&] { r(rand(2, 5, 2)); });
  EXPECT_TRUE(has(f, "Recurrence(LSTMCell(3 => 4)): expected a sequence of 3 features")) << f;
  expect_round_trip(Chain(Recurrence(GRUCell(3, 4)), Dense(4, 1)));
}

// ---- with EmbeddingBag and WeightNorm on every device -------------------------------

TEST(SequenceLayers, MoveToEveryDeviceComputeThereAndComeBack) {
  const auto devices = flx::testing::accelerator_devices();
  if (devices.empty()) GTEST_SKIP() << "no device besides the CPU is functional";
  set_seed(16);
  const auto model = Chain(GRUv3(3, 4), Recurrence(LSTMCell(4, 4)), WeightNorm(Dense(4, 2, flx::tanh)));
  const auto bag = EmbeddingBag(9, 3, BagReduction::Max);
  const Tensor x = rand({3, 5, 2}), idx = ints({0, 8, 3, 3, 1, 2}, {6}), at = ints({0, 2}, {2});
  auto [g_cpu] = gradient([&](const auto& m) { return weighted(m(x), 17); }, model);
  auto [gb_cpu] = gradient([&](const EmbeddingBag& b) { return weighted(b(idx, at), 18); }, bag);
  for (const Device& dev : devices) {
    SCOPED_TRACE(dev.str());
    const auto on = model | dev;
    EXPECT_EQ(get_device(on), dev);
    EXPECT_EQ(shown(on), shown(model));
    const Tensor y = on(x | dev);
    EXPECT_EQ(y.device(), dev);
    expect_close(y, model(x), 1e-5, "output");
    auto [g_dev] = gradient([&](const auto& m) { return weighted(m(x | dev), 17); }, on);
    const auto gd = leaves(g_dev), gc = leaves(g_cpu);
    ASSERT_EQ(gd.size(), gc.size());
    for (size_t k = 0; k < gd.size(); ++k) expect_close(gd[k], gc[k], 1e-4, "gradient " + std::to_string(k));
    const auto bag_on = bag | dev;
    expect_close(bag_on(idx | dev, at), bag(idx, at), 1e-6, "EmbeddingBag");
    auto [gb_dev] = gradient([&](const EmbeddingBag& b) { return weighted(b(idx | dev, at | dev), 18); }, bag_on);
    expect_close(gb_dev.weight, gb_cpu.weight, 1e-6, "EmbeddingBag gradient");
    expect_message<DeviceMismatch>([&] { bag_on(idx, at); }, "EmbeddingBag(9 => 3, maximum)");
    const auto back = on | cpu;
    expect_close(back(x), model(x), 0, "back on the CPU");
  }
}

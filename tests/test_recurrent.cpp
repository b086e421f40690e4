// Recurrent layers: a step of each cell against its formula computed here in
// plain doubles, the layers against their cells run step by step, Float64
// finite differences through several time steps (input, initial state, every
// parameter), the learned initial state, initialisation, printing, the
// functor machinery and the errors.
#include <cmath>
#include <sstream>

#include "test_util.hpp"

using namespace flx;
using flx::testing::shown;
using flx::testing::check_gradients;
using flx::testing::expect_close;
using flx::testing::expect_values;
using flx::testing::rand64;
using flx::testing::weighted;

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
// of one piece, of equal pieces and of unequal ones.
TEST(RecurrentLayers, Float32LSTMIsItsCellOverTime) {
  set_seed(15);
  for (int64_t batch : {1, 8, 17, 32}) {
    for (bool bias : {true, false}) {
     for (bool last_state : {true, false}) {  // with_state (the last c in the loss), or the outputs alone
      const LSTM lstm(5, 6, {.bias = bias});
      const Tensor x = rand({5, 7, batch}) * 2.0 - 1.0;
      const LSTMState s{rand({6, batch}) - 0.5, rand({6, batch}) - 0.5};
      auto loss = [&](const LSTM& m, const Tensor& xs, const LSTMState& st, bool by_cell) {
        Tensor y, c;
        if (by_cell) {
          LSTMState cur = st;
          std::vector<Tensor> outs;
          const Tensor xt = permutedims(xs, {0, 2, 1});
          for (int64_t t = 0; t < 7; ++t) {
            auto r = m.cell(reshape(xt.slice_last(t, t + 1), {5, batch}), cur);
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
          const Tensor yt = reshape(permutedims(r.output, {0, 2, 1}).slice_last(t, t + 1), {6, batch});
          total = total + sum(yt * yt * double(t + 1));
        }
        return last_state ? total + sum(r.state.c * 0.5) : total;
      };
      const std::string what = "batch " + std::to_string(batch) + (bias ? "" : " without bias") +
                               (last_state ? ", with_state" : "");
      auto by_layer = withgradient([&](const LSTM& m, const Tensor& xs, const LSTMState& st) { return loss(m, xs, st, false); },
                                   lstm, x, s);
      auto by_cell = withgradient([&](const LSTM& m, const Tensor& xs, const LSTMState& st) { return loss(m, xs, st, true); },
                                  lstm, x, s);
      EXPECT_NEAR(by_layer.val.item<double>(), by_cell.val.item<double>(), 1e-5 * std::fabs(by_cell.val.item<double>()))
          << what;
      const auto l1 = leaves(by_layer.grad), l2 = leaves(by_cell.grad);
      ASSERT_EQ(l1.size(), l2.size()) << what;
      for (size_t i = 0; i < l1.size(); ++i) expect_close(l1[i], l2[i], 2e-5, what + " gradient " + std::to_string(i));
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
  const auto path = std::filesystem::temp_directory_path() / "flx_test_recurrent.safetensors";
  save(path.string(), model);
  auto fresh = Chain(GRU(3, 4), Dense(4, 2));
  loadmodel(fresh, load(path.string()));
  std::filesystem::remove(path);
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

// ---- errors -----------------------------------------------------------------------

namespace {
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}
}  // namespace

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
  const auto path = std::filesystem::temp_directory_path() / "flx_test_recurrent_nobias.safetensors";
  save(path.string(), model);
  auto fresh = Chain(LSTM(3, 4, none), GRU(4, 4, none), RNN(4, 4, flx::tanh, none), GRUv3(4, 4, none), Dense(4, 2));
  loadmodel(fresh, load(path.string()));
  std::filesystem::remove(path);
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

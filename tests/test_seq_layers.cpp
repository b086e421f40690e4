// GRUv3Cell and GRUv3, Recurrence (Flux's scan over any cell), EmbeddingBag,
// WeightNorm and MultiHeadAttention's additive bias: each against a closed
// form computed here, Float64 finite differences, printing as Flux prints
// it, outputsize, checkpoints, moves between devices and the errors of
// misuse. The device conformance cases are in conformance_seq_cases.cpp;
// PyTorch parity in test_torch_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::expect_close;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {

using Vec = std::vector<double>;
double sig(double v) { return 1 / (1 + std::exp(-v)); }
Vec matvec(const Vec& w, int64_t rows, const Vec& x) {
  Vec y(size_t(rows), 0.0);
  for (size_t j = 0; j < x.size(); ++j)
    for (int64_t i = 0; i < rows; ++i) y[size_t(i)] += w[size_t(i) + j * size_t(rows)] * x[j];
  return y;
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

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "(no error)";
}

template <class E, class F>
void expect_message(F&& f, const std::string& part) {
  const std::string m = message_of<E>(std::forward<F>(f));
  EXPECT_TRUE(has(m, part)) << "expected \"" << part << "\" in: " << m;
}

template <class M>
std::vector<std::string> names_of(const M& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state(m)) out.push_back(name);
  return out;
}

// Saved, loaded into a copy whose tensors were zeroed: the same tensors.
template <class M>
void expect_round_trip(const M& m) {
  const auto path = std::filesystem::temp_directory_path() / "flx_test_seq_layers.safetensors";
  save(path.string(), m);
  M blank = fmap([](const Tensor& t) { return zeros(t.dtype(), t.shape()); }, m);
  loadmodel(blank, load(path.string()));
  std::filesystem::remove(path);
  const auto a = leaves(blank), b = leaves(m);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) expect_close(a[k], b[k], 0, "leaf " + std::to_string(k));
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

// ---- EmbeddingBag ---------------------------------------------------------------------

namespace {
// Flux's docstring's table: 26 => 3, column k of 100 ⋅ I for k < 3, else zeros.
EmbeddingBag docstring_bag(BagReduction r = BagReduction::Mean) {
  std::vector<double> w(3 * 26, 0.0);
  for (int k = 0; k < 3; ++k) w[size_t(k * 3 + k)] = 100;
  return EmbeddingBag(tensor(w, {3, 26}), r);
}
Tensor ints(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
}  // namespace

TEST(EmbeddingBag, FollowsFluxsDocstring) {
  const EmbeddingBag eb = docstring_bag();
  EXPECT_EQ(shown(eb), "EmbeddingBag(26 => 3)  # 78 parameters");
  expect_values(eb(ints({1}, {1})), {0, 100, 0});  // Flux's eb([2])
  expect_values(eb(ints({2, 2, 0}, {3})), {33.333333, 0, 66.666666}, 1e-6);  // eb([3,3,1]): [3,3,1] 1-based
  // eb([1 1 1 1; 1 2 3 4]): 4 bags of 2, each a column.
  expect_values(eb(ints({0, 0, 0, 1, 0, 2, 0, 3}, {2, 4})), {100, 0, 0, 50, 50, 0, 50, 0, 50, 50, 0, 0});
  // eb(data, [1, 4]): bags of 3 and 4.
  expect_values(eb(ints({10, 0, 11, 1, 12, 2, 13}, {7}), ints({0, 3}, {2})), {33.333333, 0, 0, 0, 25, 25}, 1e-6);
  // One-hot bags: onehotbatch of [1, 1, 0] and of [2, 2], as (26, L, bags).
  expect_values(eb(onehotbatch({1, 1, 0}, 26)), {33.333333, 66.666666, 0}, 1e-6);
  EXPECT_EQ(eb(zeros(Int64, Shape{10, 5, 5})).shape(), (Shape{3, 5, 5}));
  EXPECT_EQ(outputsize(eb, Shape{10, 5, 5}), (Shape{3, 5, 5}));
  EXPECT_EQ(outputsize(eb, Shape{7}, Shape{2}), (Shape{3, 2}));
}

TEST(EmbeddingBag, SumAndMaximumReduceEachBag) {
  const Tensor w = tensor(std::vector<double>{1, -2, 3, 4, -5, 6, 0.5, 7, -1}, {3, 3});  // columns 0, 1, 2
  const EmbeddingBag sum_bag(w, BagReduction::Sum), max_bag(w, BagReduction::Max), mean_bag(w);
  const Tensor bags = ints({0, 1, 2, 2, 1, 1}, {3, 2});  // bags [0, 1, 2] and [2, 1, 1]
  expect_values(sum_bag(bags), {5.5, 0, 8, 8.5, -3, 11});
  expect_values(max_bag(bags), {4, 7, 6, 4, 7, 6});
  expect_values(mean_bag(bags), {5.5 / 3, 0, 8 / 3.0, 8.5 / 3, -1, 11 / 3.0});
  EXPECT_EQ(shown(sum_bag), "EmbeddingBag(3 => 3, sum)  # 9 parameters");
  EXPECT_EQ(shown(max_bag), "EmbeddingBag(3 => 3, maximum)  # 9 parameters");
  // Offsets, ragged (bags [2], [0, 1, 1], [2, 0]) and even: the same as the columns.
  const Tensor data = ints({2, 0, 1, 1, 2, 0}, {6}), at = ints({0, 1, 4}, {3});
  for (const EmbeddingBag* eb : {&sum_bag, &max_bag, &mean_bag}) {
    const Tensor y = (*eb)(data, at);
    expect_close(selectdim(y, 1, 0), (*eb)(ints({2}, {1})), 1e-15);
    expect_close(selectdim(y, 1, 1), (*eb)(ints({0, 1, 1}, {3})), 1e-15);
    expect_close(selectdim(y, 1, 2), (*eb)(ints({2, 0}, {2})), 1e-15);
    expect_close((*eb)(reshape(bags, {6}), ints({0, 3}, {2})), (*eb)(bags), 0);
  }
}

TEST(EmbeddingBag, GradientsMatchFiniteDifferences) {
  set_seed(10);
  for (BagReduction r : {BagReduction::Mean, BagReduction::Sum, BagReduction::Max}) {
    const std::string what = r == BagReduction::Mean ? "mean" : r == BagReduction::Sum ? "sum" : "maximum";
    check_gradients([r](const V& v) { return weighted(EmbeddingBag(v[0], r)(ints({4, 0, 4, 2, 1, 3}, {3, 2})), 6); },
                    {rand64({3, 5})}, 1e-6, 1e-6, "EmbeddingBag columns, " + what);
    check_gradients(
        [r](const V& v) {
          return weighted(EmbeddingBag(v[0], r)(ints({4, 0, 4, 2, 1, 3, 3}, {7}), ints({0, 1, 5}, {3})), 7);
        },
        {rand64({3, 5})}, 1e-6, 1e-6, "EmbeddingBag offsets, " + what);
  }
  check_gradients([](const V& v) { return weighted(EmbeddingBag(v[0])(onehotbatch({3, 0, 3, 1}, 4)), 8); },
                  {rand64({2, 4})}, 1e-6, 1e-6, "EmbeddingBag one-hot");
}

TEST(EmbeddingBag, TrainsSavesAndLoads) {
  set_seed(11);
  auto model = Chain(EmbeddingBag(10, 4, BagReduction::Sum), Dense(4, 2));
  EXPECT_EQ(names_of(model), (std::vector<std::string>{"layers.0.weight", "layers.1.weight", "layers.1.bias"}));
  expect_round_trip(model);
  const Tensor x = ints({1, 2, 3, 9, 9, 0}, {3, 2});
  auto opt = setup(Descent(0.1), model);
  const Tensor before = std::get<0>(model.layers).weight.to(Float64);
  auto [g] = gradient([&](const auto& m) { return sum(m(x)); }, model);
  update(opt, model, g);
  const Tensor moved = abs(std::get<0>(model.layers).weight.to(Float64) - before);
  // Columns 1, 2, 3, 9, 0 moved; 4 to 8 did not.
  const Vec colsum = sum(moved, {0}).to_vector<double>();
  for (int k = 0; k < 10; ++k) EXPECT_EQ(colsum[size_t(k)] > 0, k <= 3 || k == 9) << "column " << k;
}

TEST(EmbeddingBag, BadInputIsATypedErrorNamingTheLayer) {
  const EmbeddingBag eb(5, 3);
  expect_message<ArgumentError>([&] { eb(ints({0, 5}, {2})); },
                  "EmbeddingBag(5 => 3): index 5 is out of range; indices must lie in 0:4");
  expect_message<DimensionMismatch>([&] { eb(ints({2}, {})); },
                  "EmbeddingBag(5 => 3): expected an array of indices, (L) for one bag or (L, bags...) with each "
                  "column a bag, not just one index; got shape ()");
  expect_message<DimensionMismatch>([&] { eb(zeros(Int64, Shape{0, 3})); },
                  "each bag needs at least one index; got shape 0×3");
  expect_message<TypeError>([&] { eb(rand(2, 3)); }, "EmbeddingBag(5 => 3): expected indices as integers");
  expect_message<DimensionMismatch>([&] { eb(onehotbatch({1, 2}, 4)); },
                  "a Bool (one-hot) input needs the shape (5, L, bags...)");
  const Tensor data = ints({0, 1, 2, 3}, {4});
  expect_message<ArgumentError>([&] { eb(data, ints({1, 2}, {2})); },
                  "EmbeddingBag(5 => 3): the first offset must be 0 (the first bag starts at data[0]); got 1");
  expect_message<ArgumentError>([&] { eb(data, ints({0, 2, 2}, {3})); },
                  "the offsets must increase strictly (no bag may be empty); got offsets[1] = 2 and offsets[2] = 2");
  expect_message<ArgumentError>([&] { eb(data, ints({0, 4}, {2})); },
                  "the last offset must lie inside the data of length 4 (no bag may be empty); got 4");
  expect_message<DimensionMismatch>([&] { eb(ints({0, 1, 2, 3}, {2, 2}), ints({0}, {1})); },
                  "expected the data and the offsets as vectors, (N) indices and (bags) starts with 1 <= bags <= N; "
                  "got shapes 2×2 and 1");
  expect_message<TypeError>([&] { eb(data, rand(2)); }, "the offsets");
  EXPECT_THROW(EmbeddingBag(0, 3), ArgumentError);
  EXPECT_THROW(EmbeddingBag(rand(3)), DimensionMismatch);
}

// ---- WeightNorm -----------------------------------------------------------------------

TEST(WeightNorm, IsTheLayerWithItsWeightReparametrised) {
  set_seed(12);
  const Dense d = f64(Dense(3, 4, flx::tanh));
  const WeightNorm wd(d);
  EXPECT_EQ(wd.which, "weight");
  EXPECT_EQ(wd.dims, (std::vector<int>{1}));
  ASSERT_EQ(wd.g.shape(), (Shape{4, 1}));
  // g: each row's norm (PyTorch's weight_norm of a Linear), so at first the same layer.
  const Tensor x = rand64({3, 5});
  expect_close(wd.g, sqrt(sum(square(d.weight), {1})), 1e-12);
  expect_close(wd(x), d(x), 1e-12);
  // Then w = g v / |v| for any g.
  WeightNorm w2 = wd;
  w2.g = rand64({4, 1});
  const Tensor w = w2.g * d.weight / sqrt(sum(square(d.weight), {1}) + std::numeric_limits<double>::epsilon());
  expect_close(w2(x), Dense(w, d.bias, flx::tanh)(x), 1e-12);
  expect_close(reparametrize(w2).weight, w, 1e-12);
  // Other dims: every dim (Flux's :), the first.
  EXPECT_EQ(WeightNorm(d, "weight", {.dims = {}}).g.shape(), (Shape{1, 1}));
  EXPECT_EQ(WeightNorm(d, "weight", {.dims = {0}}).g.shape(), (Shape{1, 3}));
  // Another field, and a layer of two inputs.
  EXPECT_EQ(WeightNorm(Dense(d.weight, rand64({4})), "bias").g.shape(), (Shape{1}));
  const Bilinear bl = f64(Bilinear(2, 3, 4));
  const WeightNorm wb(bl);
  EXPECT_EQ(wb.g.shape(), (Shape{4, 2, 1}));
  const Tensor a = rand64({2, 5}), b = rand64({3, 5});
  expect_close(wb(a, b), bl(a, b), 1e-12);
  EXPECT_EQ(outputsize(wb, Shape{2, 5}, Shape{3, 5}), (Shape{4, 5}));
  EXPECT_EQ(outputsize(wd, Shape{3, 7}), (Shape{4, 7}));
}

TEST(WeightNorm, GradientsMatchFiniteDifferences) {
  set_seed(13);
  check_gradients(
      [](const V& v) {
        WeightNorm wd(Dense(v[0], v[1], sigmoid));
        wd.g = v[2];
        return weighted(wd(v[3]), 9);
      },
      {rand64({4, 3}), rand64({4}), rand64({4, 1}, 0.5, 2), rand64({3, 5})}, 1e-6, 1e-6, "WeightNorm(Dense)");
  check_gradients(
      [](const V& v) {
        WeightNorm wd(Dense(v[0], Tensor{}), "weight", {.dims = {}});
        wd.g = v[1];
        return weighted(wd(v[2]), 10);
      },
      {rand64({2, 3}), rand64({1, 1}), rand64({3, 2})}, 1e-6, 1e-6, "WeightNorm(Dense), dims=:");
}

TEST(WeightNorm, PrintsTrainsSavesAndIsRemoved) {
  set_seed(14);
  EXPECT_EQ(shown(WeightNorm(Dense(2, 3))), "WeightNorm(Dense(2 => 3), :weight; dims=1)  # 12 parameters");
  EXPECT_EQ(shown(WeightNorm(Dense(2, 3), "weight", {.dims = {}})),
            "WeightNorm(Dense(2 => 3), :weight; dims=:)  # 10 parameters");
  auto model = Chain(WeightNorm(Dense(2, 3, relu)), Dense(3, 1));
  EXPECT_EQ(names_of(model), (std::vector<std::string>{"layers.0.layer.weight", "layers.0.layer.bias",
                                                       "layers.0.g", "layers.1.weight", "layers.1.bias"}));
  expect_round_trip(model);
  const Tensor x = rand({2, 6});
  auto opt = setup(Descent(0.1), model);
  auto [g] = gradient([&](const auto& m) { return weighted(m(x), 15); }, model);
  EXPECT_TRUE(std::get<0>(g.layers).g.defined());
  EXPECT_TRUE(std::get<0>(g.layers).layer.weight.defined());
  update(opt, model, g);
  // remove_weight_norms: a Chain of plain layers, computing the same.
  const auto plain = remove_weight_norms(model);
  static_assert(std::is_same_v<std::decay_t<decltype(plain)>, Chain<Dense, Dense>>);
  expect_close(plain(x), model(x), 1e-6);
  EXPECT_EQ(shown(plain), shown(Chain(Dense(2, 3, relu), Dense(3, 1))));
  std::vector<WeightNorm<Dense>> list{WeightNorm(Dense(2, 2)), WeightNorm(Dense(2, 2))};
  const auto run = Chain(std::move(list));
  static_assert(std::is_same_v<std::decay_t<decltype(remove_weight_norms(run))>, Chain<std::vector<Dense>>>);
  expect_close(remove_weight_norms(run)(x), run(x), 1e-6);
}

TEST(WeightNorm, BadArgumentsAreTypedErrorsNamingTheLayer) {
  const Dense d(2, 3);
  expect_message<ArgumentError>([&] { WeightNorm(d, "kernel"); },
                  "WeightNorm: Dense(2 => 3) has no array field `kernel`; its arrays are weight, bias");
  expect_message<ArgumentError>([&] { WeightNorm(Dense(zeros(3, 2), zeros(3))); },
                  "WeightNorm: the field `weight` of Dense(2 => 3) is all zero, which would give NaN");
  expect_message<ArgumentError>([&] { WeightNorm(Dense(rand(3, 2), Tensor{}), "bias"); },
                  "WeightNorm: the field `bias` of Dense(2 => 3; bias=false) is undefined");
  expect_message<ArgumentError>([&] { WeightNorm(d, "weight", {.dims = {2}}); },
                  "WeightNorm: dims 2 is outside the 2 dims of `weight` of Dense(2 => 3), of shape 3×2");
  WeightNorm wd(d);
  wd.g = rand(3);
  expect_message<DimensionMismatch>([&] { wd(rand(2, 4)); },
                  "WeightNorm(Dense(2 => 3), :weight; dims=1): g must have shape 3×1");
}

// ---- MultiHeadAttention's additive bias ---------------------------------------------------

TEST(MultiHeadAttentionBias, IsAddedToTheLogitsAsFluxsFourthArgument) {
  set_seed(15);
  const MultiHeadAttention m = f64(MultiHeadAttention(AttentionDims{4, 4, 4, 4, 6, 3}, {.nheads = 2}));
  const Tensor q = rand64({4, 5, 2}), k = rand64({4, 7, 2}), bias = rand64({7, 5, 2, 1}, -2, 2);
  auto [y, a] = m(q, k, k, bias);
  auto [y2, a2] = m(q, k, k, {.bias = bias});
  expect_close(y, y2, 0);
  expect_close(a, a2, 0);
  // The same as dot_product_attention of the projections with that bias, not as without.
  auto [x, alpha] = dot_product_attention(m.q_proj(q), m.k_proj(k), m.v_proj(k), 2, {.bias = bias});
  expect_close(y, m.out_proj(x), 1e-12);
  expect_close(a, alpha, 1e-12);
  EXPECT_GT(sum(abs(m(q, k, k).first - y)).item<double>(), 1e-3);
  // Without the scores (memory linear in the length), the same output.
  expect_close(m(q, k, k, bias, {.scores = false}).first, y, 1e-10);
  // Differentiable in the bias and the weights.
  check_gradients(
      [&](const V& v) {
        MultiHeadAttention mm = m;
        mm.q_proj.weight = v[0];
        return weighted(mm(q, k, k, v[1], {.causal = false}).first, 16);
      },
      {m.q_proj.weight, rand64({7, 5, 2, 1})}, 1e-6, 1e-6, "MultiHeadAttention bias");
}

TEST(MultiHeadAttentionBias, ABadOrDoubledBiasIsATypedError) {
  const MultiHeadAttention m(4, {.nheads = 2});
  const Tensor x = rand({4, 5, 2});
  expect_message<ArgumentError>([&] { m(x, x, x, rand(5, 5), {.bias = rand(5, 5)}); },
                  "MultiHeadAttention(4 => 4 => 4, nheads=2): the bias is given twice");
  const std::string s = message_of<DimensionMismatch>([&] { m(x, x, x, rand(5, 4)); });
  EXPECT_TRUE(has(s, "MultiHeadAttention(4 => 4 => 4, nheads=2): the bias must have the shape (kv_len, q_len, "
                     "nheads, batch) = (5, 5, 2, 2) or broadcast to it")) << s;
  expect_message<TypeError>([&] { m(x, x, x, ones(Int32, Shape{5, 5})); }, "the bias must be a floating");
}

// ---- every device ---------------------------------------------------------------------

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

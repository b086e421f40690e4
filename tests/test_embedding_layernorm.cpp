// Embedding and LayerNorm on the CPU: closed forms, Float64 finite
// differences, the gradient of repeated indices, errors, printing and moves
// between devices (Flux's behaviour). The other devices' numbers are
// compared with the CPU by the conformance suite.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::has;
using flx::testing::shown;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::expect_close;
using flx::testing::expect_values;
using flx::testing::rand64;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {
Tensor indices(std::vector<int64_t> v, Shape s) { return tensor(v, s); }
}  // namespace

// ---- Embedding ------------------------------------------------------------------

TEST(Embedding, LooksUpColumnsForIndicesOfAnyShape) {
  // weight (3, 4): column k holds 10k, 10k + 1, 10k + 2.
  std::vector<float> w;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 3; ++i) w.push_back(float(10 * k + i));
  const Embedding emb(tensor(w, {3, 4}));
  auto column = [](int64_t k) { return std::vector<double>{10.0 * k, 10.0 * k + 1, 10.0 * k + 2}; };
  // A (2, 3) Int32 matrix of indices gives (3, 2, 3): column j of the output is weight[:, x[j]].
  const std::vector<int32_t> x = {3, 0, 1, 1, 2, 0};
  const Tensor y = emb(tensor(x, {2, 3}));
  EXPECT_EQ(y.shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(y.dtype(), Float32);
  std::vector<double> expected;
  for (int32_t k : x) for (double v : column(k)) expected.push_back(v);
  expect_values(y, expected, 0);
  // A scalar index gives a d-vector (Flux's emb(2)), as a 0-dim index tensor does.
  EXPECT_EQ(emb(2).shape(), (Shape{3}));
  expect_values(emb(2), column(2), 0);
  expect_values(emb(indices({1}, Shape{})), column(1), 0);
  // One-hot columns (onehotbatch) give what their indices give.
  const Tensor onehot = onehotbatch({3, 0, 1}, 4);
  EXPECT_EQ(emb(onehot).shape(), (Shape{3, 3}));
  expect_close(emb(onehot), emb(indices({3, 0, 1}, {3})), 0);
  expect_close(emb(reshape(onehotbatch({3, 0, 1, 1}, 4), {4, 2, 2})), emb(indices({3, 0, 1, 1}, {2, 2})), 0);
  // No index, no column.
  EXPECT_EQ(emb(indices({}, {0})).shape(), (Shape{3, 0}));
}

TEST(Embedding, InitialisesAsFluxAndSavesItsWeight) {
  set_seed(3);
  const Embedding emb(1000, 20);
  EXPECT_EQ(emb.weight.shape(), (Shape{20, 1000}));  // (d, n): one column per index
  EXPECT_EQ(emb.weight.dtype(), Float32);
  // Standard normal (Flux's randn32).
  double mean = 0, sq = 0;
  const auto w = emb.weight.to_vector<double>();
  for (double v : w) mean += v, sq += v * v;
  mean /= double(w.size());
  EXPECT_NEAR(mean, 0, 0.02);
  EXPECT_NEAR(sq / double(w.size()) - mean * mean, 1, 0.03);
  EXPECT_EQ(leaves(emb, true).size(), 1u);
  const State s = state(emb);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.at("weight").shape(), (Shape{20, 1000}));
}

TEST(Embedding, GradientAddsUpTheColumnsOfRepeatedIndices) {
  // d = 2, n = 5; index 2 three times, 0 once, 4 twice, 1 and 3 never.
  const std::vector<int64_t> x = {2, 0, 2, 4, 2, 4};
  const Embedding emb(rand(Float32, {2, 5}));
  const Tensor g = tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  auto [grad] = gradient([&](const Embedding& m) { return sum(m(tensor(x, {6})) * g); }, emb);
  EXPECT_EQ(grad.weight.shape(), (Shape{2, 5}));
  // column 0: g[:, 1]; column 2: g[:, 0] + g[:, 2] + g[:, 4]; column 4: g[:, 3] + g[:, 5].
  expect_values(grad.weight, {3, 4, 0, 0, 1 + 5 + 9, 2 + 6 + 10, 0, 0, 7 + 11, 8 + 12}, 0);
  // Many repeats of few indices, and a few of many (the backends' parallel
  // scatter_add: rows of a sort by index), against a plain loop.
  for (auto [n, d, count] : {std::tuple<int64_t, int64_t, int64_t>{7, 3, 5000}, {300, 5, 2000}, {50, 40, 3000}}) {
    SCOPED_TRACE("n " + std::to_string(n) + ", d " + std::to_string(d) + ", " + std::to_string(count) + " indices");
    set_seed(uint64_t(n));
    std::vector<int64_t> idx(static_cast<size_t>(count));
    const auto u = rand(Float64, {count}).to_vector<double>();
    for (size_t j = 0; j < idx.size(); ++j) idx[j] = std::min<int64_t>(n - 1, int64_t(u[j] * u[j] * double(n)));
    const Tensor cot = rand(Float64, {d, count});
    auto [gw] = gradient([&](const Embedding& m) { return sum(m(tensor(idx, {count})) * cot); },
                         Embedding(zeros(Float64, {d, n})));
    std::vector<double> want(size_t(d * n), 0.0);
    const auto c = cot.to_vector<double>();
    for (size_t j = 0; j < idx.size(); ++j)
      for (int64_t i = 0; i < d; ++i) want[size_t(idx[j] * d + i)] += c[j * size_t(d) + size_t(i)];
    // In index order, as the loop: the same sums to the last bit.
    expect_values(gw.weight, want, 0);
  }
}

TEST(Embedding, GradientsMatchFiniteDifferences) {
  const Tensor x = indices({1, 3, 1, 0, 3, 3}, {3, 2});
  check_gradients([&](const V& v) { return weighted(flx::tanh(Embedding(v[0])(x)), 7); }, {rand64({4, 5})}, 1e-6,
                  1e-6, "Embedding, integer indices");
  const Tensor onehot = onehotbatch({4, 0, 4}, 5);
  check_gradients([&](const V& v) { return weighted(square(Embedding(v[0])(onehot)), 8); }, {rand64({2, 5})}, 1e-6,
                  1e-6, "Embedding, one-hot input");
}

TEST(Embedding, OneStepOfDescentMovesOnlyTheColumnsOfItsIndices) {
  auto emb = Embedding(4, 3);
  const std::vector<double> before = emb.weight.to_vector<double>();
  auto opt = setup(Descent(0.5), emb);
  auto [g] = gradient([&](const Embedding& m) { return sum(m(indices({2, 2, 0}, {3}))); }, emb);
  update(opt, emb, g);
  const std::vector<double> after = emb.weight.to_vector<double>();
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < 3; ++i) {
      const double step = k == 2 ? -1.0 : k == 0 ? -0.5 : 0.0;  // 0.5 × (count of k)
      EXPECT_NEAR(after[k * 3 + i], before[k * 3 + i] + step, 1e-6) << "column " << k;
    }
}

TEST(Embedding, WrongInputsNameTheLayerAndWhatItNeeds) {
  const Embedding emb(5, 3);
  std::string m = error_message<ArgumentError>([&] { emb(indices({0, 7, 2}, {3})); });
  EXPECT_TRUE(has(m, "Embedding(5 => 3): index 7 is out of range; indices must lie in 0:4 (0-based: the vocabulary "
                     "has 5 entries)")) << m;
  m = error_message<ArgumentError>([&] { emb(indices({-1, 4}, {2})); });
  EXPECT_TRUE(has(m, "index -1 is out of range")) << m;
  m = error_message<ArgumentError>([&] { emb(5); });
  EXPECT_TRUE(has(m, "index 5 is out of range")) << m;
  m = error_message<TypeError>([&] { emb(tensor({1.0f, 2.0f})); });
  EXPECT_TRUE(has(m, "Embedding(5 => 3): expected integer indices (0-based, in 0:4) or a one-hot Bool array; got "
                     "Float32")) << m;
  EXPECT_TRUE(has(m, ".to(Int64)")) << m;
  m = error_message<DimensionMismatch>([&] { emb(onehotbatch({0, 1}, 4)); });
  EXPECT_TRUE(has(m, "Embedding(5 => 3): a Bool (one-hot) input needs 5 rows, one per index; got shape (4×2)")) << m;
  m = error_message<ArgumentError>([&] { emb(Tensor()); });
  EXPECT_TRUE(has(m, "Embedding(5 => 3): the input is an undefined tensor")) << m;
  m = error_message<ArgumentError>([] { Embedding(0, 3); });
  EXPECT_TRUE(has(m, "Embedding: the vocabulary size n and the embedding size d must be positive; got 0 => 3")) << m;
  m = error_message<DimensionMismatch>([] { Embedding(rand(Float32, {6})); });
  EXPECT_TRUE(has(m, "Embedding: the weight must be a matrix (d, n)")) << m;
  m = error_message<TypeError>([] { Embedding(ones(Int64, {2, 3})); });
  EXPECT_TRUE(has(m, "Embedding: the weight must be floating; got Int64")) << m;
}

// ---- LayerNorm ------------------------------------------------------------------

TEST(LayerNorm, NormalisesEachColumnOfAKnownInput) {
  // Column 0: 1 2 3 4 (mean 2.5, biased variance 1.25); column 1: 2 2 2 6 (mean 3, variance 3).
  const Tensor x = tensor(std::vector<double>{1, 2, 3, 4, 2, 2, 2, 6}, {4, 2});
  const double s0 = 1 / std::sqrt(1.25 + 1e-5), s1 = 1 / std::sqrt(3 + 1e-5);
  const std::vector<double> normalised = {-1.5 * s0, -0.5 * s0, 0.5 * s0, 1.5 * s0, -s1, -s1, -s1, 3 * s1};
  LayerNorm ln(4);
  EXPECT_EQ(ln.scale.shape(), (Shape{4}));
  expect_values(ln.scale, {1, 1, 1, 1}, 0);
  expect_values(ln.bias, {0, 0, 0, 0}, 0);
  ln.scale = ln.scale.to(Float64);
  ln.bias = ln.bias.to(Float64);
  expect_values(ln(x), normalised, 1e-12);
  // scale and bias per feature, then the activation.
  ln.scale = tensor(std::vector<double>{1, 2, 3, 4});
  ln.bias = tensor(std::vector<double>{0.5, 0, 0, -1});
  ln.act = relu;
  std::vector<double> expected(8);
  for (size_t j = 0; j < 8; ++j)
    expected[j] = std::max(0.0, normalised[j] * (double(j % 4) + 1) + std::vector<double>{0.5, 0, 0, -1}[j % 4]);
  expect_values(ln(x), expected, 1e-12);
  // affine=false: no parameters, the bare normalisation; ε as given.
  const LayerNorm bare(4, {.affine = false, .epsilon = 0.25});
  EXPECT_FALSE(bare.scale.defined());
  EXPECT_TRUE(leaves(bare).empty());
  expect_values(bare(x), {-1.5 / std::sqrt(1.5), -0.5 / std::sqrt(1.5), 0.5 / std::sqrt(1.5), 1.5 / std::sqrt(1.5),
                          -1 / std::sqrt(3.25), -1 / std::sqrt(3.25), -1 / std::sqrt(3.25), 3 / std::sqrt(3.25)},
                1e-12);
  // Float32 in, Float32 out; a single sample (no batch dim) is fine.
  EXPECT_EQ(LayerNorm(4)(x.to(Float32)).dtype(), Float32);
  expect_values(LayerNorm(4)(x.slice_last(0, 1).to(Float32)), {-1.5 * s0, -0.5 * s0, 0.5 * s0, 1.5 * s0}, 1e-6);
}

TEST(LayerNorm, NormalisesOverSeveralLeadingDims) {
  // LayerNorm({2, 3}) on (2, 3, 2): each sample's 6 values together, as Flux's LayerNorm((2, 3)).
  const Tensor x = tensor(std::vector<double>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 12}, {2, 3, 2});
  LayerNorm ln({2, 3}, {.affine = false});
  const Tensor y = ln(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  const double s0 = 1 / std::sqrt(17.5 / 6 + 1e-5), s1 = 1 / std::sqrt(20 + 1e-5);  // variances 35/12 and 20
  expect_values(y, {-2.5 * s0, -1.5 * s0, -0.5 * s0, 0.5 * s0, 1.5 * s0, 2.5 * s0, -2 * s1, -2 * s1, -2 * s1, -2 * s1,
                    -2 * s1, 10 * s1},
                1e-12);
  LayerNorm affine({2, 3});
  EXPECT_EQ(affine.scale.shape(), (Shape{2, 3}));
  EXPECT_EQ(affine.bias.shape(), (Shape{2, 3}));
  // Each sample's output has mean 0 and (biased) variance 1 - ε/(σ² + ε).
  set_seed(8);
  const auto v = affine(rand(Float32, {2, 3, 4}) * 10.0).to_vector<double>();
  for (size_t n = 0; n < 4; ++n) {
    double m = 0, sq = 0;
    for (size_t i = 0; i < 6; ++i) m += v[n * 6 + i], sq += v[n * 6 + i] * v[n * 6 + i];
    EXPECT_NEAR(m / 6, 0, 1e-6);
    EXPECT_NEAR(sq / 6, 1, 1e-4);
  }
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  auto layer = [](const V& v, Shape size, Activation act) {
    LayerNorm ln(size, std::move(act));
    ln.scale = v[1];
    ln.bias = v[2];
    return ln(v[0]);
  };
  check_gradients([&](const V& v) { return weighted(layer(v, {5}, {}), 9); },
                  {rand64({5, 3}), rand64({5}), rand64({5})}, 1e-6, 1e-6, "LayerNorm(5)");
  check_gradients([&](const V& v) { return weighted(layer(v, {3, 2}, flx::tanh), 10); },
                  {rand64({3, 2, 2, 2}), rand64({3, 2}), rand64({3, 2})}, 1e-6, 1e-6, "LayerNorm(3, 2, tanh)");
  check_gradients([&](const V& v) { return weighted(LayerNorm(4, {.affine = false})(v[0]), 11); }, {rand64({4, 3})},
                  1e-6, 1e-6, "LayerNorm(4, affine=false)");
}

TEST(LayerNorm, WrongInputsNameTheLayerAndWhatItNeeds) {
  std::string m = error_message<DimensionMismatch>([] { LayerNorm(5)(rand(Float32, {4, 3})); });
  EXPECT_TRUE(has(m, "LayerNorm(5): expected an input whose first dim is 5 (the normalised size), then any others; "
                     "got shape (4×3)")) << m;
  m = error_message<DimensionMismatch>([] { LayerNorm({3, 2}, relu)(rand(Float32, {3, 4, 5})); });
  EXPECT_TRUE(has(m, "LayerNorm(3, 2, relu): expected an input whose first dims are (3×2)")) << m;
  EXPECT_TRUE(has(m, "got shape (3×4×5)")) << m;
  m = error_message<DimensionMismatch>([] { LayerNorm({3, 2})(rand(Float32, {3})); });
  EXPECT_TRUE(has(m, "got shape (3)")) << m;
  m = error_message<TypeError>([] { LayerNorm(3)(ones(Int32, {3, 2})); });
  EXPECT_TRUE(has(m, "LayerNorm(3): expected a floating input; got Int32")) << m;
  m = error_message<ArgumentError>([] { LayerNorm(3)(Tensor()); });
  EXPECT_TRUE(has(m, "LayerNorm(3): the input is an undefined tensor")) << m;
  m = error_message<ArgumentError>([] { LayerNorm(0); });
  EXPECT_TRUE(has(m, "LayerNorm: the normalised size must be one or more positive dims; got (0)")) << m;
  m = error_message<ArgumentError>([] { LayerNorm(3, {.epsilon = -1}); });
  EXPECT_TRUE(has(m, "LayerNorm: expected epsilon >= 0; got -1")) << m;
}

// ---- both -----------------------------------------------------------------------

TEST(EmbeddingAndLayerNorm, PrintLikeFlux) {
  EXPECT_EQ(shown(Embedding(26, 4)), "Embedding(26 => 4)  # 104 parameters");
  EXPECT_EQ(shown(LayerNorm(5)), "LayerNorm(5)        # 10 parameters");
  EXPECT_EQ(shown(LayerNorm(5, relu)), "LayerNorm(5, relu)  # 10 parameters");
  EXPECT_EQ(shown(LayerNorm({5, 4}, flx::tanh)), "LayerNorm(5, 4, tanh)  # 40 parameters");
  EXPECT_EQ(shown(LayerNorm(5, {.affine = false})), "LayerNorm(5, affine=false)");
  EXPECT_EQ(shown(Chain(Embedding(1000, 16), LayerNorm(16), Dense(16, 2))),
            "Chain(\n"
            "  Embedding(1000 => 16),                # 16_000 parameters\n"
            "  LayerNorm(16),                        # 32 parameters\n"
            "  Dense(16 => 2),                       # 34 parameters\n"
            ")                   # Total: 5 arrays, 16_066 parameters, 62.758 KiB.");
  EXPECT_EQ(shown(Chain(Embedding(10, 2), LayerNorm(2, {.affine = false}))),
            "Chain(Embedding(10 => 2), LayerNorm(2, affine=false))  # 20 parameters");
}

TEST(EmbeddingAndLayerNorm, MoveToEveryDeviceAndComputeThereWhatTheCpuComputes) {
  const auto devices = flx::testing::accelerator_devices();
  if (devices.empty()) GTEST_SKIP() << "no device besides the CPU is functional: nothing to move the layers to";
  set_seed(6);
  const auto model = Chain(Embedding(12, 6), LayerNorm(6, flx::tanh));
  const Tensor x = indices({3, 11, 0, 3, 3, 7, 0, 5}, {4, 2});
  auto loss = [](const auto& m, const Tensor& in) { return sum(square(m(in))); };
  auto [g_cpu] = gradient([&](const auto& m) { return loss(m, x); }, model);
  for (const Device& dev : devices) {
    SCOPED_TRACE(dev.str());
    const auto on = model | dev;
    EXPECT_EQ(get_device(on), dev);
    EXPECT_EQ(shown(on), shown(model));
    const Tensor y = on(x | dev);
    EXPECT_EQ(y.device(), dev);
    expect_close(y, model(x), 1e-5, "output");
    auto [g_dev] = gradient([&](const auto& m) { return loss(m, x | dev); }, on);
    EXPECT_EQ(get_device(g_dev), dev);
    expect_close(std::get<0>(g_dev.layers).weight, std::get<0>(g_cpu.layers).weight, 1e-5, "Embedding's gradient");
    expect_close(std::get<1>(g_dev.layers).scale, std::get<1>(g_cpu.layers).scale, 1e-5, "LayerNorm's scale gradient");
    // Indices left on the host are refused, naming both devices.
    const std::string m = error_message<DeviceMismatch>([&] { (void)on(x); });
    EXPECT_TRUE(has(m, "Embedding(12 => 6): the indices are on CPU but the weight is on " + dev.str())) << m;
    EXPECT_TRUE(has(m, "`x | device`")) << m;
    // An index out of range is found on the device too.
    const std::string r = error_message<ArgumentError>([&] { (void)on(indices({2, 12, 1}, {3}) | dev); });
    EXPECT_TRUE(has(r, "Embedding(12 => 6): index 12 is out of range; indices must lie in 0:11")) << r;
    const std::string n = error_message<ArgumentError>([&] { (void)on(indices({-3, 1}, {2}) | dev); });
    EXPECT_TRUE(has(n, "index -3 is out of range")) << n;
    const std::string l = error_message<DeviceMismatch>([&] { (void)std::get<1>(on.layers)(rand(Float32, {6, 2})); });
    EXPECT_TRUE(has(l, "LayerNorm(6, tanh): the scale (γ) is on " + dev.str() + " but the input is on CPU")) << l;
  }
}

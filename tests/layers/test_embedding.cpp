// The lookup layers of src/layers/embedding.cpp
// (include/flx/layers/embedding.hpp): Embedding and EmbeddingBag on the
// CPU: closed forms and Flux's docstrings, Float64 finite differences, the
// gradient of repeated indices, a step of training, errors, printing, and
// moves between devices (Flux's behaviour). The other devices' numbers are
// compared with the CPU by the conformance suite; EmbeddingBag's with
// PyTorch's in test_torch_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::expect_close;
using flx::testing::expect_message;
using flx::testing::expect_round_trip;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::ints;
using flx::testing::names_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {
using Vec = std::vector<double>;
Tensor indices(std::vector<int64_t> v, Shape s) { return tensor(v, s); }

// Flux's docstring's table: 26 => 3, column k of 100 ⋅ I for k < 3, else zeros.
EmbeddingBag docstring_bag(BagReduction r = BagReduction::Mean) {
  std::vector<double> w(3 * 26, 0.0);
  for (int k = 0; k < 3; ++k) w[size_t(k * 3 + k)] = 100;
  return EmbeddingBag(tensor(w, {3, 26}), r);
}
}  // namespace

// ---- Embedding ----------------------------------------------------------------------

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

// ---- Embedding with LayerNorm -------------------------------------------------------

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

// ---- EmbeddingBag -------------------------------------------------------------------

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

// WeightNorm, of src/layers/weightnorm.cpp (include/flx/layers/weightnorm.hpp):
// the layer with its weight reparametrised as g v / |v|, against the plain
// layer, Float64 finite differences, printing as Flux prints it, a step of
// training, checkpoints, remove_weight_norms, and the errors of misuse. On
// every device in a model: SequenceLayers in test_recurrent.cpp; PyTorch's
// weight_norm: test_torch_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::expect_close;
using flx::testing::expect_message;
using flx::testing::expect_round_trip;
using flx::testing::names_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;
using V = std::vector<Tensor>;

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

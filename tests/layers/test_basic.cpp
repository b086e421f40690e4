// The basic layers of src/layers/basic.cpp (include/flx/layers/basic.hpp,
// Flux's basic.jl): Dense, Chain (of compile-time and of run-time length),
// Bilinear, Scale and activations(chain, x). Each against a closed form,
// Float64 finite differences, a step of training, checkpoint names and a
// load, printing as Flux prints it, and the errors of misuse. Dense through
// the fused kernels of every device: tests/test_dense_fused.cpp; the other
// devices: tests/layers/test_containers.cpp's moves and the conformance suite.
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
using flx::testing::expect_checkpoint_round_trip;
using flx::testing::expect_close;
using flx::testing::expect_one_step_moves_every_leaf;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::t64;
using flx::testing::weighted;
using V = std::vector<Tensor>;

// ---- Dense and Chain ----------------------------------------------------------------

TEST(Layers, DenseComputesActOfWxPlusB) {
  Dense d(tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}), tensor({0.5f, -100.0f}), relu);
  expect_values(d(tensor({1.0f, 1.0f, 1.0f})), {9.5, 0});
  Tensor x = tensor(std::vector<float>{1, 0, 0, 0, 1, 0}, {3, 2});  // a batch of 2
  expect_values(d(x), {1.5, 0, 3.5, 0});
  EXPECT_THROW(d(ones(4)), DimensionMismatch);
  EXPECT_THROW(Dense(ones(2, 3), ones(3)), DimensionMismatch);
}

TEST(Layers, DenseGlorotInit) {
  set_seed(1);
  Dense d(300, 100);
  EXPECT_EQ(d.weight.shape(), (Shape{100, 300}));
  EXPECT_EQ(d.bias.shape(), (Shape{100}));
  EXPECT_EQ(d.weight.dtype(), Float32);
  double a = std::sqrt(6.0 / 400.0), mx = 0, var = 0;
  for (float v : d.weight.to_vector<float>()) {
    mx = std::max(mx, double(std::fabs(v)));
    var += double(v) * v;
  }
  var /= 30000.0;
  EXPECT_LE(mx, a);
  EXPECT_GT(mx, 0.95 * a);
  EXPECT_NEAR(var, a * a / 3, 0.05 * a * a / 3);  // uniform(-a, a) variance
  expect_values(d.bias, std::vector<double>(100, 0.0));
}

TEST(Layers, ChainAppliesInOrderAndPrintsLikeFlux) {
  auto m = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  Tensor x = rand(10, 3);
  Tensor h = std::get<1>(m.layers)(std::get<0>(m.layers)(x));
  flx::testing::expect_close(m(x), softmax(h));
  expect_values(sum(m(x), {0}), {1, 1, 1}, 1e-6);
  // Two layers with arrays: one a line, as Flux displays a model.
  EXPECT_EQ(shown(m), "Chain(\n  Dense(10 => 5, σ),                    # 55 parameters\n"
                     "  Dense(5 => 2),                        # 12 parameters\n  softmax,\n"
                     ")                   # Total: 4 arrays, 67 parameters, 268 bytes.");
  EXPECT_EQ(shown(Dense(10, 5)), "Dense(10 => 5)      # 55 parameters");
  EXPECT_EQ(shown(Dense(2, 3, relu)), "Dense(2 => 3, relu)  # 9 parameters");
  EXPECT_EQ(shown(Chain(Chain(Dense(2, 2, flx::tanh)), Dense(2, 1, gelu))),
            "Chain(\n  Chain(\n    Dense(2 => 2, tanh),                # 6 parameters\n  ),\n"
            "  Dense(2 => 1, gelu_tanh),             # 3 parameters\n"
            ")                   # Total: 4 arrays, 9 parameters, 36 bytes.");
  // gelu is NNlib's gelu_tanh, and prints so (as Julia prints NNlib.gelu).
  EXPECT_EQ(shown(Chain(Chain(Dense(2, 2, flx::tanh)), gelu)),
            "Chain(Chain(Dense(2 => 2, tanh)), gelu_tanh)  # 6 parameters");
  auto lam = Chain(Dense(2, 2), [](const Tensor& t) { return t * 2.0; });
  expect_values(lam(zeros(2)), {0, 0});
}

// ---- Bilinear -----------------------------------------------------------------------

TEST(Bilinear, ComputesXTransposeWYPerOutput) {
  set_seed(6);
  const Tensor w = rand64({2, 3, 4}), b = rand64({2}), x = rand64({3, 5}), y = rand64({4, 5});
  auto bl = Bilinear(w, b, flx::tanh);
  const auto W = w.to_vector<double>(), B = b.to_vector<double>(), X = x.to_vector<double>(), Y = y.to_vector<double>();
  std::vector<double> want;
  for (int s = 0; s < 5; ++s)
    for (int o = 0; o < 2; ++o) {
      double z = B[size_t(o)];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) z += X[size_t(s * 3 + i)] * W[size_t(o + 2 * (i + 3 * j))] * Y[size_t(s * 4 + j)];
      want.push_back(std::tanh(z));
    }
  expect_values(bl(x, y), want, 1e-12);
  expect_values(bl(std::make_tuple(x, y)), want, 1e-12);
  // Vectors give a vector; b(x) is b(x, x).
  const Tensor xv = rand64({3}), yv = rand64({4});
  expect_close(bl(xv, yv), reshape(bl(reshape(xv, {3, 1}), reshape(yv, {4, 1})), {2}), 1e-12);
  auto square_form = Bilinear(rand64({2, 3, 3}), Tensor());
  expect_close(square_form(x), square_form(x, x), 0);
  // Batch dims past the first: the same per observation.
  const Tensor x3 = reshape(x, {3, 5, 1}), y3 = reshape(y, {4, 5, 1});
  EXPECT_EQ(bl(x3, y3).shape(), (Shape{2, 5, 1}));
  expect_values(bl(x3, y3), want, 1e-12);
}

TEST(Bilinear, GradientsMatchFiniteDifferences) {
  check_gradients([](const V& v) { return weighted(Bilinear(v[0], v[1], sigmoid)(v[2], v[3]), 9); },
                  {rand64({2, 3, 4}), rand64({2}), rand64({3, 2}), rand64({4, 2})}, 1e-6, 1e-6, "Bilinear");
}

TEST(Bilinear, InitialisesAsFluxTrainsAndPrints) {
  set_seed(7);
  auto bl = Bilinear(5, 5, 7);
  EXPECT_EQ(bl.weight.shape(), (Shape{7, 5, 5}));
  EXPECT_EQ(bl.weight.dtype(), Float32);
  expect_values(bl.bias, std::vector<double>(7, 0.0));
  const double a = std::sqrt(6.0 / (7.0 * 10.0));  // Glorot over fans 7·5 and 7·5
  for (float v : bl.weight.to_vector<float>()) EXPECT_LE(std::fabs(v), a);
  EXPECT_EQ(shown(bl), "Bilinear(5 => 7)    # 182 parameters");  // Flux's docstring
  EXPECT_EQ(shown(Bilinear(rand(4, 8, 16), Tensor(), flx::tanh)), "Bilinear((8, 16) => 4, tanh; bias=false)  # 512 parameters");
  EXPECT_EQ(shown(Bilinear(3, 2, relu)), "Bilinear(3 => 2, relu)  # 20 parameters");
  expect_one_step_moves_every_leaf(bl, rand(5, 3));
  expect_checkpoint_round_trip(bl, {"weight", "bias"});
}

TEST(Bilinear, ShapesThatDoNotFitNameTheLayerAndBoth) {
  auto bl = Bilinear(5, 4, 3);
  const std::string f = error_message<DimensionMismatch>([&] { bl(rand(6, 2), rand(4, 2)); });
  EXPECT_TRUE(has(f, "Bilinear((5, 4) => 3): expected x with 5 features in dim 0 and y with 4; got x of shape 6×2 and "
                     "y of shape 4×2"))
      << f;
  const std::string n = error_message<DimensionMismatch>([&] { bl(rand(5, 3), rand(4, 2)); });
  EXPECT_TRUE(has(n, "Bilinear((5, 4) => 3): x and y must have the same batch dims (all but the first); got x of shape "
                     "5×3 and y of shape 4×2"))
      << n;
  EXPECT_THROW(Bilinear(rand(2, 3), Tensor()), DimensionMismatch);
  EXPECT_THROW(Bilinear(rand(2, 3, 4), rand(3)), DimensionMismatch);
  EXPECT_THROW(Bilinear(0, 3, 2), ArgumentError);
}

// ---- Scale --------------------------------------------------------------------------

TEST(Scale, ScalesAndShiftsElementwiseWithBroadcasting) {
  auto a = Scale(2);
  EXPECT_EQ(a.scale.shape(), (Shape{2}));
  expect_values(a.scale, {1, 1});
  expect_values(a.bias, {0, 0});
  // Flux's docstring: a([1 2 3]) is 2×3.
  expect_values(a(tensor({1.0f, 2.0f, 3.0f}, {1, 3})), {1, 1, 2, 2, 3, 3});
  // Scale(Float32[1 2 3 4], false, abs2)([1, 10]): 2×4.
  auto b = Scale(tensor({1.0f, 2.0f, 3.0f, 4.0f}, {1, 4}), Tensor(), [](const Tensor& t) { return square(t); });
  expect_values(b(tensor({1.0f, 10.0f})), {1, 100, 4, 400, 9, 900, 16, 1600});
  auto c = Scale(t64({2, -1}, {2}), t64({1, 1}, {2}), relu);
  expect_values(c(t64({1, 3, -1, -4}, {2, 2})), {3, 0, 0, 5});
  EXPECT_EQ(Scale(4, 3, relu).scale.shape(), (Shape{4, 3}));
  EXPECT_EQ(Scale({4, 3}, relu).scale.shape(), (Shape{4, 3}));
}

TEST(Scale, GradientsMatchFiniteDifferences) {
  check_gradients([](const V& v) { return weighted(Scale(v[0], v[1], flx::tanh)(v[2]), 10); },
                  {rand64({3, 2}), rand64({3, 2}), rand64({3, 2, 4})}, 1e-6, 1e-6, "Scale");
}

TEST(Scale, TrainsSavesPrintsAndChecks) {
  auto s = Scale(3, relu);
  expect_one_step_moves_every_leaf(s, rand(3, 4));
  expect_checkpoint_round_trip(s, {"scale", "bias"});
  EXPECT_EQ(shown(Scale(2)), "Scale(2)            # 4 parameters");  // Flux's docstring
  EXPECT_EQ(shown(Scale(tensor({1.0f, 2.0f, 3.0f, 4.0f}, {1, 4}), Tensor(), relu)),
            "Scale(1, 4, relu; bias=false)  # 4 parameters");
  const std::string e = error_message<DimensionMismatch>([] { Scale(3)(rand(2, 5)); });
  EXPECT_TRUE(has(e, "Scale(3): shapes (3) and (2×5) cannot be broadcast together")) << e;
  EXPECT_THROW(Scale(0), ArgumentError);
  EXPECT_THROW(Scale(rand(2), rand(3)), DimensionMismatch);
}

// ---- Chain of run-time length, activations ------------------------------------------

TEST(RuntimeChain, AppliesItsLayersInOrderAndIndexes) {
  set_seed(8);
  std::vector<Dense> blocks;
  for (int i = 0; i < 4; ++i) blocks.emplace_back(3, 3, flx::tanh);
  auto trunk = Chain(std::move(blocks));
  static_assert(std::is_same_v<decltype(trunk.layers), std::vector<Dense>>);
  ASSERT_EQ(trunk.size(), 4u);
  const Tensor x = rand(3, 2);
  expect_close(trunk(x), trunk[3](trunk[2](trunk[1](trunk[0](x)))), 0);
  const auto acts = activations(trunk, x);
  ASSERT_EQ(acts.size(), 4u);
  expect_close(acts[0], trunk[0](x), 0);
  expect_close(acts[3], trunk(x), 0);
  const std::string e = error_message<ArgumentError>([&] { (void)trunk[4]; });
  EXPECT_TRUE(has(e, "Chain: index 4 is past the end of a Chain of 4 layers (indices are 0-based: 0 to 3)")) << e;
  trunk[0].weight = zeros(3, 3);  // a layer is a reference into the Chain
  expect_values(trunk[0](x), std::vector<double>(6, 0.0));
}

TEST(RuntimeChain, GradientsTrainingCheckpointsAndPrinting) {
  check_gradients(
      [](const V& v) { return weighted(Chain(std::vector<Dense>{Dense(v[0], v[1], flx::tanh), Dense(v[2], v[3])})(v[4]), 12); },
      {rand64({3, 2}), rand64({3}), rand64({2, 3}), rand64({2}), rand64({2, 4})}, 1e-6, 1e-6, "Chain([Dense, Dense])");
  set_seed(9);
  auto c = Chain(std::vector<Dense>{Dense(2, 3), Dense(3, 4)});
  expect_one_step_moves_every_leaf(c, rand(2, 5));
  expect_checkpoint_round_trip(c, {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"});
  EXPECT_EQ(shown(c),
            "Chain(\n"
            "  [\n"
            "    Dense(2 => 3),                      # 9 parameters\n"
            "    Dense(3 => 4),                      # 16 parameters\n"
            "  ],\n"
            ")                   # Total: 4 arrays, 25 parameters, 100 bytes.");
  EXPECT_EQ(shown(Chain(std::vector<Dense>{Dense(2, 3)})), "Chain([Dense(2 => 3)])  # 9 parameters");
}

TEST(Activations, GivesEveryLayersOutput) {
  set_seed(10);
  auto m = Chain(Dense(3, 4, relu), Scale(4), softmax);
  const Tensor x = rand(3, 2);
  const auto acts = activations(m, x);
  ASSERT_EQ(acts.size(), 3u);
  expect_close(acts[0], std::get<0>(m.layers)(x), 0);
  expect_close(acts[1], std::get<1>(m.layers)(acts[0]), 0);
  expect_close(acts[2], m(x), 0);
  EXPECT_EQ(m.size(), 3u);
}

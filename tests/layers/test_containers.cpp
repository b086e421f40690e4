// The containers of src/layers/containers.cpp (include/flx/layers/containers.hpp):
// SkipConnection, Parallel, PairwiseFusion and Maxout, each against a closed
// form, Float64 finite differences, a step of training, checkpoint names and
// a load, printing as Flux prints it, and the errors of misuse; then every
// container on every device. Their shape rules are in test_outputsize.cpp;
// Chain, Bilinear and Scale (basic.hpp) in test_basic.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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
using flx::testing::names_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::t64;
using flx::testing::values_of;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {

// Dense layers of known Float64 weights.
Dense dense64(std::vector<double> w, int64_t out, int64_t in, std::vector<double> b, Activation act = {}) {
  return Dense(t64(std::move(w), {out, in}), t64(std::move(b), {out}), std::move(act));
}

}  // namespace

// ---- SkipConnection -----------------------------------------------------------------

TEST(SkipConnection, AddsTheLayersOutputToItsInput) {
  // W = [1 2; 3 4], b = [0.5, -1]: W x + b + x.
  auto m = SkipConnection(dense64({1, 3, 2, 4}, 2, 2, {0.5, -1}), std::plus<>{});
  expect_values(m(t64({1, 2, -1, 0}, {2, 2})), {5.5 + 1, 10 + 2, -0.5 - 1, -4 + 0});
  // Any binary callable: a captureless lambda, a function object.
  auto prod = SkipConnection(dense64({2}, 1, 1, {0}), [](const Tensor& a, const Tensor& b) { return a * b; });
  expect_values(prod(t64({3}, {1})), {18});
}

TEST(SkipConnection, GradientsMatchFiniteDifferences) {
  check_gradients(
      [](const V& v) {
        auto m = SkipConnection(Dense(v[0], v[1], flx::tanh), std::plus<>{});
        return weighted(m(v[2]), 3);
      },
      {rand64({3, 3}), rand64({3}), rand64({3, 4})}, 1e-6, 1e-6, "SkipConnection(Dense, +)");
}

TEST(SkipConnection, ABilinearConnectionTrainsAndSavesAsConnection) {
  // Flux's docstring: Bilinear as the recombinator, the skip as its second input.
  set_seed(1);
  auto sc = SkipConnection(Chain(Dense(5, 20, flx::tanh), Dense(20, 9, flx::tanh)),
                           Bilinear(rand(3, 9, 5), Tensor()));
  EXPECT_EQ(sc(rand(5, 32)).shape(), (Shape{3, 32}));
  expect_checkpoint_round_trip(sc, {"layers.layers.0.weight", "layers.layers.0.bias", "layers.layers.1.weight",
                                    "layers.layers.1.bias", "connection.weight"});
  expect_one_step_moves_every_leaf(sc, rand(5, 4));
}

TEST(SkipConnection, TrainsSavesAndLoads) {
  set_seed(2);
  auto m = SkipConnection(Dense(3, 3, relu), std::plus<>{});
  expect_one_step_moves_every_leaf(m, rand(3, 5));
  expect_checkpoint_round_trip(m, {"layers.weight", "layers.bias"});
}

TEST(SkipConnection, PrintsAsFlux) {
  EXPECT_EQ(shown(SkipConnection(Dense(2, 2), std::plus<>{})), "SkipConnection(Dense(2 => 2), +)  # 6 parameters");
  EXPECT_EQ(shown(SkipConnection(Chain(Dense(2, 3), Dense(3, 2)), std::plus<>{})),
            "SkipConnection(\n"
            "  Chain(\n"
            "    Dense(2 => 3),                      # 9 parameters\n"
            "    Dense(3 => 2),                      # 8 parameters\n"
            "  ),\n"
            "  +,\n"
            ")                   # Total: 4 arrays, 17 parameters, 68 bytes.");
  EXPECT_EQ(shown(SkipConnection(Dense(2, 2), [](const Tensor& a, const Tensor& b) { return a - b; })),
            "SkipConnection(Dense(2 => 2), #callable)  # 6 parameters");
}

TEST(SkipConnection, ALayerThatChangesTheShapeIsNamedWithTheShapes) {
  auto m = SkipConnection(Dense(2, 3), std::plus<>{});
  const std::string e = error_message<DimensionMismatch>([&] { (void)m(rand(2, 5)); });
  EXPECT_TRUE(has(e, "SkipConnection(Dense(2 => 3), +): its connection + cannot combine values of shapes 3×5, 2×5"))
      << e;
  EXPECT_TRUE(has(e, "cannot be broadcast together")) << e;  // the operator's own words follow
}

// ---- Parallel -----------------------------------------------------------------------

TEST(Parallel, GivesOneInputToEveryLayerOrOneInputEach) {
  auto a = dense64({2}, 1, 1, {1});   // 2x + 1
  auto b = dense64({-1}, 1, 1, {0});  // -x
  auto p = Parallel(std::plus<>{}, a, b);
  expect_values(p(t64({3, 4}, {1, 2})), {3 + 1, 4 + 1});              // (2x + 1) - x
  expect_values(p(t64({3}, {1}), t64({10}, {1})), {7 - 10});          // a(x) + b(y)
  expect_values(p(std::make_tuple(t64({3}, {1}), t64({10}, {1}))), {-3});  // a tuple is splatted
  // One layer, several inputs: that layer on each.
  expect_values(Parallel(std::plus<>{}, a)(t64({1}, {1}), t64({2}, {1}), t64({3}, {1})), {3 + 5 + 7});
  // A binary connection folds from the left; one that takes them all gets them all.
  auto c = dense64({10}, 1, 1, {0});
  expect_values(Parallel(std::minus<>{}, a, b, c)(t64({1}, {1})), {3 + 1 - 10});
  auto all = Parallel([](const Tensor& x, const Tensor& y, const Tensor& z) { return x * y + z; }, a, b, c);
  expect_values(all(t64({2}, {1})), {5 * -2 + 20});
  // Multiple inputs through a Chain arrive as one tuple (Flux's Chain(x, ys...)).
  expect_values(Chain(Parallel(std::plus<>{}, a, b))(t64({3}, {1}), t64({10}, {1})), {-3});
  EXPECT_EQ(p.size(), 2u);
}

TEST(Parallel, GradientsMatchFiniteDifferences) {
  check_gradients(
      [](const V& v) {
        auto p = Parallel(std::multiplies<>{}, Dense(v[0], v[1], flx::tanh), Dense(v[2], Tensor()));
        return weighted(p(v[3]), 4) + weighted(p(v[3], v[4]), 5);
      },
      {rand64({2, 3}), rand64({2}), rand64({2, 3}), rand64({3, 4}), rand64({3, 4})}, 1e-6, 1e-6,
      "Parallel(*, Dense, Dense)");
}

TEST(Parallel, TrainsSavesAndLoads) {
  set_seed(3);
  auto p = Parallel(std::plus<>{}, Dense(3, 2), Chain(Dense(3, 4, relu), Dense(4, 2)));
  expect_one_step_moves_every_leaf(p, rand(3, 6));
  expect_checkpoint_round_trip(p, {"layers.0.weight", "layers.0.bias", "layers.1.layers.0.weight",
                                   "layers.1.layers.0.bias", "layers.1.layers.1.weight", "layers.1.layers.1.bias"});
}

TEST(Parallel, PrintsAsFlux) {
  EXPECT_EQ(shown(Parallel(std::plus<>{}, Dense(2, 2), flx::relu)), "Parallel(+, Dense(2 => 2), relu)  # 6 parameters");
  // Flux's docstring (its model2, with positional layers).
  EXPECT_EQ(shown(Parallel(std::plus<>{}, Dense(10, 2, flx::tanh), Dense(5, 2))),
            "Parallel(\n"
            "  +,\n"
            "  Dense(10 => 2, tanh),                 # 22 parameters\n"
            "  Dense(5 => 2),                        # 12 parameters\n"
            ")                   # Total: 4 arrays, 34 parameters, 136 bytes.");
  // Nested: a Chain holding a Parallel holding a Chain.
  auto model = Chain(Dense(3, 5), Parallel(std::plus<>{}, Dense(5, 4), Chain(Dense(5, 7), Dense(7, 4))), Dense(4, 17));
  EXPECT_EQ(shown(model),
            "Chain(\n"
            "  Dense(3 => 5),                        # 20 parameters\n"
            "  Parallel(\n"
            "    +,\n"
            "    Dense(5 => 4),                      # 24 parameters\n"
            "    Chain(\n"
            "      Dense(5 => 7),                    # 42 parameters\n"
            "      Dense(7 => 4),                    # 32 parameters\n"
            "    ),\n"
            "  ),\n"
            "  Dense(4 => 17),                       # 85 parameters\n"
            ")                   # Total: 10 arrays, 203 parameters, 812 bytes.");
  EXPECT_EQ(model(rand(3, 2)).shape(), (Shape{17, 2}));
}

TEST(Parallel, TheWrongNumberOfInputsIsAnArgumentErrorNamingItAndTheShapes) {
  auto p = Parallel(std::plus<>{}, Dense(2, 3), Dense(2, 3));
  const std::string e = error_message<ArgumentError>([&] { p(rand(2, 4), rand(2, 4), rand(2, 4)); });
  EXPECT_TRUE(has(e, "Parallel(+, Dense(2 => 3), Dense(2 => 3)) with 2 sub-layers can take one input or 2 inputs "
                     "(one a layer), but got 3 inputs of shapes 2×4, 2×4, 2×4"))
      << e;
  const std::string t = error_message<ArgumentError>([&] { p(std::make_tuple(rand(2, 4), rand(2, 4), rand(2))); });
  EXPECT_TRUE(has(t, "but got 3 inputs of shapes 2×4, 2×4, 2")) << t;
  // Outputs the connection cannot combine: the Parallel and the shapes.
  auto q = Parallel(std::plus<>{}, Dense(2, 3), Dense(2, 4));
  const std::string c = error_message<DimensionMismatch>([&] { q(rand(2, 5)); });
  EXPECT_TRUE(has(c, "Parallel(+, Dense(2 => 3), Dense(2 => 4)): its connection + cannot combine values of shapes "
                     "3×5, 4×5"))
      << c;
}

// ---- PairwiseFusion -----------------------------------------------------------------

TEST(PairwiseFusion, FeedsEachLayerTheLastOutputFusedWithItsInput) {
  auto a = dense64({2}, 1, 1, {0});   // 2x
  auto b = dense64({1}, 1, 1, {1});   // x + 1
  auto c = dense64({-1}, 1, 1, {0});  // -x
  auto pf = PairwiseFusion(std::plus<>{}, a, b, c);
  // Inputs 1, 10, 100: y1 = 2, y2 = (2 + 10) + 1 = 13, y3 = -(13 + 100).
  auto [y1, y2, y3] = pf(t64({1}, {1}), t64({10}, {1}), t64({100}, {1}));
  expect_values(y1, {2});
  expect_values(y2, {13});
  expect_values(y3, {-113});
  // One input x = 3 for every step: y1 = 6, y2 = (6 + 3) + 1 = 10, y3 = -(10 + 3).
  auto [z1, z2, z3] = pf(t64({3}, {1}));
  expect_values(z1, {6});
  expect_values(z2, {10});
  expect_values(z3, {-13});
  auto [w1, w2, w3] = pf(std::make_tuple(t64({1}, {1}), t64({10}, {1}), t64({100}, {1})));
  expect_values(w3, {-113});
  // Its tuple goes on to the next layer of a Chain.
  expect_values(Chain(pf, Parallel(std::plus<>{}, identity, identity, identity))(t64({3}, {1})), {6 + 10 - 13});
}

TEST(PairwiseFusion, GradientsMatchFiniteDifferences) {
  check_gradients(
      [](const V& v) {
        auto pf = PairwiseFusion(std::multiplies<>{}, Dense(v[0], v[1], flx::tanh), Dense(v[2], Tensor(), sigmoid));
        auto [y1, y2] = pf(v[3], v[4]);
        return weighted(y1, 6) + weighted(y2, 7);
      },
      {rand64({2, 2}), rand64({2}), rand64({2, 2}), rand64({2, 3}), rand64({2, 3})}, 1e-6, 1e-6,
      "PairwiseFusion(*, Dense, Dense)");
}

TEST(PairwiseFusion, TrainsSavesLoadsAndPrints) {
  set_seed(4);
  auto pf = PairwiseFusion(std::plus<>{}, Dense(2, 2), Dense(2, 2, relu));
  auto summed = Chain(pf, Parallel(std::plus<>{}, identity, identity));
  expect_one_step_moves_every_leaf(summed, rand(2, 3));
  expect_checkpoint_round_trip(pf, {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"});
  EXPECT_EQ(shown(PairwiseFusion(std::plus<>{}, Dense(2, 2))), "PairwiseFusion(+, Dense(2 => 2))  # 6 parameters");
  EXPECT_EQ(shown(pf),
            "PairwiseFusion(\n"
            "  +,\n"
            "  Dense(2 => 2),                        # 6 parameters\n"
            "  Dense(2 => 2, relu),                  # 6 parameters\n"
            ")                   # Total: 4 arrays, 12 parameters, 48 bytes.");
}

TEST(PairwiseFusion, TheWrongNumberOfInputsIsAnArgumentError) {
  auto pf = PairwiseFusion(std::plus<>{}, Dense(2, 2), Dense(2, 2), Dense(2, 2));
  const std::string e = error_message<ArgumentError>([&] { pf(rand(2, 1), rand(2, 1)); });
  EXPECT_TRUE(has(e, "PairwiseFusion(+, Dense(2 => 2), Dense(2 => 2), Dense(2 => 2)) with 3 sub-layers can take one "
                     "input or 3 inputs (one a layer), but got 2 inputs of shapes 2×1, 2×1"))
      << e;
}

// ---- Maxout -------------------------------------------------------------------------

TEST(Maxout, TakesTheElementwiseMaximumOfItsLayers) {
  auto m = Maxout(dense64({1}, 1, 1, {0}), dense64({3}, 1, 1, {0}), dense64({-2}, 1, 1, {1}));
  // Flux's docstring x .^ 2 and x .* 3 become x, 3x and 1 - 2x here.
  expect_values(m(t64({-2, -1, 0, 1, 2}, {1, 5})), {5, 3, 1, 3, 6});
  // NaN wins, as Julia's max.
  EXPECT_TRUE(std::isnan(m(t64({NAN}, {1})).item<double>()));
}

TEST(Maxout, GradientsMatchFiniteDifferences) {
  check_gradients(
      [](const V& v) { return weighted(Maxout(Dense(v[0], v[1]), Dense(v[2], v[3]))(v[4]), 8); },
      {rand64({3, 2}), rand64({3}), rand64({3, 2}), rand64({3}), rand64({2, 5})}, 1e-6, 1e-6, "Maxout(Dense, Dense)");
}

TEST(Maxout, MadeOfAFunctionAndACountAsFlux) {
  set_seed(5);
  auto m3 = Maxout([] { return Dense(5, 7, flx::tanh); }, 3);
  static_assert(std::is_same_v<decltype(m3.layers), std::vector<Dense>>);
  ASSERT_EQ(m3.layers.size(), 3u);
  const Tensor x = rand(5, 11);
  EXPECT_EQ(m3(x).shape(), (Shape{7, 11}));
  expect_close(m3(x), maximum(maximum(m3.layers[0](x), m3.layers[1](x)), m3.layers[2](x)), 0);
  // Flux's docstring, with the tensors' own bytes (Flux counts Julia's summarysize).
  EXPECT_EQ(shown(m3),
            "Maxout(\n"
            "  Dense(5 => 7, tanh),                  # 42 parameters\n"
            "  Dense(5 => 7, tanh),                  # 42 parameters\n"
            "  Dense(5 => 7, tanh),                  # 42 parameters\n"
            ")                   # Total: 6 arrays, 126 parameters, 504 bytes.");
  EXPECT_EQ(shown(Maxout(Dense(2, 3), relu)), "Maxout(Dense(2 => 3), relu)  # 9 parameters");
  expect_one_step_moves_every_leaf(m3, rand(5, 2));
  expect_checkpoint_round_trip(m3, {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                    "layers.2.weight", "layers.2.bias"});
  const std::string e =
      error_message<ArgumentError>([] { Maxout<std::vector<Dense>>(std::vector<Dense>{}); });
  EXPECT_TRUE(has(e, "Maxout: needs at least one layer; got none")) << e;
  const std::string s = error_message<DimensionMismatch>([] { Maxout(Dense(2, 3), Dense(2, 4))(rand(2, 1)); });
  EXPECT_TRUE(has(s, "Maxout(Dense(2 => 3), Dense(2 => 4)): its connection max cannot combine values of shapes 3×1, 4×1"))
      << s;
}

// ---- every container on every device ------------------------------------------------

TEST(Containers, MoveToEveryDeviceComputeTrainThereAndComeBack) {
  const auto devices = flx::testing::accelerator_devices();
  if (devices.empty()) GTEST_SKIP() << "no device besides the CPU is functional: nothing to move the containers to";
  set_seed(13);
  const auto model = Chain(SkipConnection(Dense(4, 4, flx::tanh), std::plus<>{}),
                           Parallel(std::plus<>{}, Dense(4, 3), Chain(Dense(4, 3), Scale(3, relu))),
                           Maxout(Dense(3, 5), Dense(3, 5)), SkipConnection(Dense(5, 5), Bilinear(5, 5, 2)),
                           Chain(std::vector<Dense>{Dense(2, 2, sigmoid), Dense(2, 2)}),
                           PairwiseFusion(std::plus<>{}, Dense(2, 2), Dense(2, 2)),
                           Parallel(std::plus<>{}, identity, identity));
  const Tensor x = rand(4, 6);
  auto loss = [](const auto& m, const Tensor& in) { return weighted(m(in), 14); };
  auto [g_cpu] = gradient([&](const auto& m) { return loss(m, x); }, model);
  for (const Device& dev : devices) {
    SCOPED_TRACE(dev.str());
    const auto on = model | dev;
    EXPECT_EQ(get_device(on), dev);
    EXPECT_EQ(shown(on), shown(model));
    EXPECT_EQ(outputsize(on, x.shape()), model(x).shape());
    const Tensor y = on(x | dev);
    EXPECT_EQ(y.device(), dev);
    expect_close(y, model(x), 1e-5, "output");
    auto [g_dev] = gradient([&](const auto& m) { return loss(m, x | dev); }, on);
    EXPECT_EQ(get_device(g_dev), dev);
    const auto gd = leaves(g_dev), gc = leaves(g_cpu);
    ASSERT_EQ(gd.size(), gc.size());
    for (size_t k = 0; k < gd.size(); ++k) expect_close(gd[k], gc[k], 1e-4, "gradient " + std::to_string(k));
    // A step of training there moves every leaf, there.
    auto trained = model | dev;
    auto opt = setup(Descent(0.1), trained);
    update(opt, trained, g_dev);
    EXPECT_EQ(get_device(trained), dev);
    const auto before = leaves(on), after = leaves(trained);
    for (size_t k = 0; k < after.size(); ++k)
      EXPECT_NE(after[k].to(Device::cpu()).to_vector<float>(), before[k].to(Device::cpu()).to_vector<float>())
          << "leaf " << k;
    // Back on the CPU, the same values, and the same names.
    const auto back = on | cpu;
    EXPECT_EQ(get_device(back), Device::cpu());
    EXPECT_EQ(values_of(back), values_of(model));
    EXPECT_EQ(names_of(state(on)), names_of(state(model)));
  }
}

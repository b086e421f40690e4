// The normalisation and regularisation layers of src/layers/normalise.cpp
// (include/flx/layers/normalise.hpp, Flux's normalise.jl): BatchNorm,
// LayerNorm, GroupNorm, InstanceNorm, Dropout and AlphaDropout, and the
// train/test modes they follow. Each against a closed form (loops here),
// Float64 finite differences, its running statistics, Flux's printing and
// shape rule, a checkpoint round trip, and typed errors that name the layer
// and the shapes; a model of them on every device. The functions under them
// (batchnorm, dropout): tests/test_dnn.cpp; the other devices case by case:
// the conformance suite (conformance_layer_cases.cpp); PyTorch's values:
// test_layer_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::expect_checkpoint_round_trip;
using flx::testing::expect_close;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::names_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::vec;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {

// Normalises x (spatial S, channels C, batch N; column-major) over groups of
// `per` channels of each sample, with per-channel scale and bias: the loops.
std::vector<double> group_normalised(const std::vector<double>& x, int64_t S, int64_t C, int64_t N, int64_t per,
                                     const std::vector<double>& scale, const std::vector<double>& bias, double eps) {
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < C / per; ++g) {
      double mu = 0, var = 0;
      const double count = double(S * per);
      for (int64_t c = g * per; c < (g + 1) * per; ++c)
        for (int64_t s = 0; s < S; ++s) mu += x[size_t(s + S * (c + C * n))];
      mu /= count;
      for (int64_t c = g * per; c < (g + 1) * per; ++c)
        for (int64_t s = 0; s < S; ++s) var += std::pow(x[size_t(s + S * (c + C * n))] - mu, 2);
      var /= count;
      for (int64_t c = g * per; c < (g + 1) * per; ++c)
        for (int64_t s = 0; s < S; ++s) {
          const size_t i = size_t(s + S * (c + C * n));
          y[i] = (x[i] - mu) / std::sqrt(var + eps) * scale[size_t(c)] + bias[size_t(c)];
        }
    }
  return y;
}

}  // namespace

// ---- BatchNorm ----------------------------------------------------------------------

TEST(ConvLayers, BatchNormTracksStatisticsAsFlux) {
  BatchNorm bn(2);
  EXPECT_EQ(bn.running_mean.to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(bn.running_var.to_vector<double>(), (std::vector<double>{1, 1}));
  // (spatial 2, channels 2, batch 2): channel 0 holds 1 3 5 7, channel 1 holds 2 2 2 6.
  const Tensor x = vec({1, 3, 2, 2, 5, 7, 2, 6}, {2, 2, 2}).to(Float32);
  const Tensor y = trainmode(bn)(x);
  // channel 0: mean 4, biased var 5; channel 1: mean 3, biased var 3 (unbiased 4).
  flx::testing::expect_values(bn.running_mean, {0.4, 0.3}, 1e-6);
  flx::testing::expect_values(bn.running_var, {0.9 + 0.1 * 20.0 / 3, 0.9 + 0.1 * 4}, 1e-6);
  const double s0 = 1 / std::sqrt(5 + 1e-5), s1 = 1 / std::sqrt(3 + 1e-5);
  flx::testing::expect_values(y, {-3 * s0, -s0, -s1, -s1, s0, 3 * s0, -s1, 3 * s1}, 1e-6);
  // Inference uses the running statistics, and gives the same output on every call.
  const Tensor a = bn(x), b = bn(x);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_NEAR(a.to_vector<double>()[0], (1 - 0.4) / std::sqrt(0.9 + 2.0 / 3 + 1e-5), 1e-5);
  EXPECT_EQ(leaves(bn, true).size(), 2u);  // scale and bias train; the statistics do not
  EXPECT_EQ(leaves(bn).size(), 4u);
}

// ---- LayerNorm ----------------------------------------------------------------------

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

// A gradient call runs LayerNorm on the fused group normalisation, whose
// rule is first-order only; nested calls (a second derivative, as a gradient
// penalty takes) run the composed form, so they still work: the gradient of
// a weighted sum of LayerNorm's gradient against central differences of it.
TEST(LayerNorm, SecondDerivativesThroughANestedGradientMatchFiniteDifferences) {
  set_seed(12);
  const Tensor w = rand64({4, 3});
  LayerNorm ln(4, flx::tanh);
  ln.scale = rand64({4}) + 1.5;
  ln.bias = rand64({4});
  auto inner = [&](const Tensor& u) {  // d/du of sum(LN(u)^3 .* w)
    return std::get<0>(gradient([&](const Tensor& y) { return sum(ln(y) * ln(y) * ln(y) * w); }, u));
  };
  check_gradients([&](const V& v) { return sum(inner(v[0]) * w); }, {rand64({4, 3})}, 1e-6, 1e-6,
                  "LayerNorm's second derivative");
}

// GroupNorm and InstanceNorm choose their kernel in ops::group_norm, as
// LayerNorm does: the fused one differentiates once, so a nested gradient
// call takes the composition (issue 40; before, GroupNorm refused the
// second derivative on the CPU, whose fused kernel it always took).
TEST(GroupNorm, SecondDerivativesThroughANestedGradientMatchFiniteDifferences) {
  set_seed(13);
  const Tensor w = rand64({3, 4, 2});
  GroupNorm gn(4, 2, flx::tanh);
  gn.scale = rand64({4}) + 1.5;
  gn.bias = rand64({4});
  InstanceNorm in(4, {.affine = true});
  in.scale = rand64({4}) + 1.5;
  in.bias = rand64({4});
  for (const auto& [layer, name] : std::vector<std::pair<std::function<Tensor(const Tensor&)>, std::string>>{
           {gn, "GroupNorm"}, {in, "InstanceNorm"}}) {
    auto inner = [&](const Tensor& u) {  // d/du of sum(N(u)^3 .* w)
      return std::get<0>(gradient([&](const Tensor& y) { return sum(layer(y) * layer(y) * layer(y) * w); }, u));
    };
    check_gradients([&](const V& v) { return sum(inner(v[0]) * w); }, {rand64({3, 4, 2})}, 1e-6, 1e-6,
                    name + "'s second derivative");
  }
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

// ---- GroupNorm ----------------------------------------------------------------------

TEST(GroupNorm, NormalisesEachGroupOfEachSampleAsFlux) {
  set_seed(1);
  GroupNorm l(6, 3);
  EXPECT_EQ(l.scale.to_vector<float>(), std::vector<float>(6, 1.0f));  // affine by default
  EXPECT_EQ(l.bias.to_vector<float>(), std::vector<float>(6, 0.0f));
  l.scale = rand64({6}, 0.5, 1.5);
  l.bias = rand64({6});
  const Tensor x = rand64({4, 3, 6, 2}, -2, 3);
  const auto want = group_normalised(x.to_vector<double>(), 12, 6, 2, 2, l.scale.to_vector<double>(),
                                     l.bias.to_vector<double>(), 1e-5);
  expect_values(l(x), want, 1e-12);
  // (channels, batch) too, with an activation; the same in either mode.
  GroupNorm f(4, 2, relu, {.affine = false});
  EXPECT_FALSE(f.scale.defined());
  const Tensor x2 = rand64({4, 5});
  std::vector<double> want2 = group_normalised(x2.to_vector<double>(), 1, 4, 5, 2, std::vector<double>(4, 1),
                                               std::vector<double>(4, 0), 1e-5);
  for (double& v : want2) v = std::max(v, 0.0);
  expect_values(f(x2), want2, 1e-12);
  expect_close(trainmode(f)(x2), f(x2), 0);
  // Float32 and halves (normalised in Float32, rounded once).
  expect_close(l(x.to(Float32)).to(Float64), l(x), 1e-5);
  expect_close(l(x.to(Float16)).to(Float64), l(x), 2e-2);
}

TEST(GroupNorm, GradientsMatchFiniteDifferences) {
  set_seed(2);
  check_gradients(
      [](const V& v) {
        GroupNorm l(4, 2, flx::tanh);
        l.scale = v[1];
        l.bias = v[2];
        return sum(l(v[0]) * v[3]);
      },
      {rand64({3, 2, 4, 2}), rand64({4}, 0.5, 1.5), rand64({4}), rand64({3, 2, 4, 2})}, 1e-6, 1e-6, "GroupNorm");
}

TEST(GroupNorm, PrintsSavesAndChecksAsFlux) {
  EXPECT_EQ(shown(GroupNorm(32, 4)), "GroupNorm(32, 4)    # 64 parameters");
  EXPECT_EQ(shown(GroupNorm(8, 2, relu, {.affine = false})), "GroupNorm(8, 2, relu, affine=false)");
  EXPECT_EQ(shown(testmode(GroupNorm(4, 2))), "GroupNorm(4, 2, active=false)  # 8 parameters");
  set_seed(3);
  GroupNorm l(4, 2);
  l.scale = rand({4});
  expect_checkpoint_round_trip(l, {"bias", "scale"});
  EXPECT_EQ(outputsize(l, Shape{5, 5, 4, 3}), (Shape{5, 5, 4, 3}));
  EXPECT_EQ(outputsize(Chain(Conv({3, 3}, 3, 4), GroupNorm(4, 2), Upsample({.scale = {2}})), Shape{8, 8, 3, 1}),
            (Shape{12, 12, 4, 1}));
  const std::string wrong = error_message<DimensionMismatch>([&] { l(rand(5, 5, 3, 2)); });
  EXPECT_EQ(wrong.substr(0, wrong.find(" [")),
            "GroupNorm(4, 2): expected 4 channels in the second last dim of the input ((spatial..., channels, batch) "
            "or (channels, batch)); got shape 5×5×3×2");
  EXPECT_EQ(error_message<DimensionMismatch>([&] { outputsize(l, Shape{5, 5, 3, 2}); }), wrong);
  EXPECT_TRUE(has(error_message<ArgumentError>([] { GroupNorm(6, 4); }),
                  "GroupNorm: the number of groups (4) must divide the number of channels (6)"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { GroupNorm(6, 0); }), "GroupNorm: the channel and group counts"));
  EXPECT_TRUE(has(error_message<TypeError>([&] { l(ones(Int64, 2, 4, 1)); }), "GroupNorm(4, 2): expected a floating input"));
}

// ---- InstanceNorm -------------------------------------------------------------------

TEST(InstanceNorm, NormalisesEachChannelOfEachSampleAsFlux) {
  set_seed(4);
  const InstanceNorm l(3);  // Flux's defaults: no affine, no running statistics
  EXPECT_FALSE(l.scale.defined());
  EXPECT_FALSE(l.running_mean.defined());
  EXPECT_TRUE(leaves(l).empty());
  const Tensor x = rand64({4, 5, 3, 2}, -1, 4);
  const auto want = group_normalised(x.to_vector<double>(), 20, 3, 2, 1, std::vector<double>(3, 1),
                                     std::vector<double>(3, 0), 1e-5);
  expect_values(l(x), want, 1e-12);
  expect_close(testmode(l)(x), l(x), 0);  // without running statistics, the same in inference
  // affine: per-channel scale and bias; 1-D images.
  InstanceNorm a(2, relu, {.affine = true});
  a.scale = rand64({2}, 0.5, 1.5);
  a.bias = rand64({2});
  const Tensor x1 = rand64({7, 2, 3});
  auto want1 = group_normalised(x1.to_vector<double>(), 7, 2, 3, 1, a.scale.to_vector<double>(),
                                a.bias.to_vector<double>(), 1e-5);
  for (double& v : want1) v = std::max(v, 0.0);
  expect_values(a(x1), want1, 1e-12);
}

TEST(InstanceNorm, TracksStatisticsByFluxsRule) {
  set_seed(5);
  InstanceNorm l(2, {.track_stats = true, .momentum = 0.25});
  const Tensor x = rand64({3, 2, 2, 4}, 0, 3);
  // Training (trainmode): the slices' own statistics; the running ones move
  // towards the batch's mean of the slices' means and unbiased variances.
  const auto xv = x.to_vector<double>();
  std::vector<double> mean_of(2, 0), var_of(2, 0);
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t n = 0; n < 4; ++n) {
      double mu = 0, var = 0;
      for (int64_t s = 0; s < 6; ++s) mu += xv[size_t(s + 6 * (c + 2 * n))] / 6;
      for (int64_t s = 0; s < 6; ++s) var += std::pow(xv[size_t(s + 6 * (c + 2 * n))] - mu, 2) / 6;
      mean_of[size_t(c)] += mu / 4;
      var_of[size_t(c)] += var / 4 * 6 / 5;
    }
  const Tensor y = trainmode(l)(x);
  expect_values(y, group_normalised(xv, 6, 2, 4, 1, {1, 1}, {0, 0}, 1e-5), 1e-12);
  expect_values(l.running_mean, {0.25 * mean_of[0], 0.25 * mean_of[1]}, 1e-6);
  expect_values(l.running_var, {0.75 + 0.25 * var_of[0], 0.75 + 0.25 * var_of[1]}, 1e-6);
  // Inference: the running statistics.
  const auto rm = l.running_mean.to_vector<double>(), rv = l.running_var.to_vector<double>();
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 6) % 2;
    want[i] = (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5);
  }
  expect_values(testmode(l)(x), want, 1e-6);
  // Inside gradient (training by default) they move too, and no gradient flows into them.
  const auto before = l.running_mean.to_vector<double>();
  auto [g] = gradient([&](const Tensor& xx) { return sum(l(xx)); }, x);
  EXPECT_NE(l.running_mean.to_vector<double>(), before);
  EXPECT_EQ(g.shape(), x.shape());
  EXPECT_EQ(names_of(state(l)), (std::vector<std::string>{"running_mean", "running_var"}));
  EXPECT_TRUE(leaves(l, true).empty());
}

TEST(InstanceNorm, GradientsMatchFiniteDifferences) {
  set_seed(6);
  check_gradients(
      [](const V& v) {
        InstanceNorm l(3, flx::tanh, {.affine = true});
        l.scale = v[1];
        l.bias = v[2];
        return sum(l(v[0]) * v[3]);
      },
      {rand64({4, 3, 3, 2}), rand64({3}, 0.5, 1.5), rand64({3}), rand64({4, 3, 3, 2})}, 1e-6, 1e-6, "InstanceNorm");
}

TEST(InstanceNorm, PrintsSavesAndChecksAsFlux) {
  EXPECT_EQ(shown(InstanceNorm(3)), "InstanceNorm(3, affine=false)");
  EXPECT_EQ(shown(InstanceNorm(8, relu, {.affine = true})), "InstanceNorm(8, relu)  # 16 parameters");
  EXPECT_EQ(shown(InstanceNorm(4, {.affine = true, .track_stats = true})),
            "InstanceNorm(4)     # 8 parameters, plus 8 non-trainable");
  set_seed(7);
  InstanceNorm l(4, {.affine = true, .track_stats = true});
  l.bias = rand({4});
  l.running_var = rand({4}) + 1.0;
  expect_checkpoint_round_trip(l, {"bias", "scale", "running_mean", "running_var"});
  EXPECT_EQ(outputsize(l, Shape{5, 4, 3}), (Shape{5, 4, 3}));
  const std::string wrong = error_message<DimensionMismatch>([&] { l(rand(4, 2)); });
  EXPECT_EQ(wrong.substr(0, wrong.find(" [")),
            "InstanceNorm(4): expected an input (spatial..., channels, batch) with at least one spatial dim and 4 "
            "channels in the second last dim; got shape 4×2");
  EXPECT_TRUE(has(error_message<DimensionMismatch>([&] { l(rand(5, 5, 3, 1)); }), "got shape 5×5×3×1"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { InstanceNorm(0); }), "InstanceNorm: the channel count must be positive"));
}

// ---- Dropout, AlphaDropout and the modes --------------------------------------------

TEST(ConvLayers, ModesFollowFlux) {
  set_seed(2);
  auto m = Chain(Conv({3, 3}, 2, 4, relu, {.pad = 1}), BatchNorm(4), Dropout(0.5), MaxPool({2, 2}), Flatten(),
                 Dense(4 * 2 * 2, 3));
  const Tensor x = rand(Float32, {4, 4, 2, 8});
  // Outside gradient: inference (dropout off, running statistics), the same every call.
  EXPECT_EQ(m(x).to_vector<float>(), m(x).to_vector<float>());
  const auto& bn = std::get<1>(m.layers);
  const std::vector<double> before = bn.running_mean.to_vector<double>();
  EXPECT_EQ(before, (std::vector<double>(4, 0.0)));
  // Inside gradient: training: the statistics move, dropout draws masks.
  auto [l, g] = withgradient([&](const auto& model) { return sum(model(x)); }, m);
  (void)l;
  EXPECT_NE(bn.running_mean.to_vector<double>(), before);
  EXPECT_TRUE(std::get<0>(std::get<0>(g).layers).weight.defined());
  // testmode fixes inference even inside gradient; trainmode the opposite outside it.
  auto tm = testmode(m);
  EXPECT_EQ(std::get<2>(tm.layers).active, std::optional<bool>(false));
  const std::vector<double> stats = bn.running_mean.to_vector<double>();
  (void)withgradient([&](const auto& model) { return sum(model(x)); }, tm);
  EXPECT_EQ(bn.running_mean.to_vector<double>(), stats);
  auto tr = trainmode(m);
  EXPECT_NE(tr(x).to_vector<float>(), tr(x).to_vector<float>());  // new dropout masks
  EXPECT_EQ(std::get<1>(automode(tr).layers).active, std::nullopt);
  // Dropout in training: about p of the elements zeroed, the rest scaled by 1/(1-p).
  const Tensor ones_ = ones(Float32, {100, 100});
  const std::vector<float> d = trainmode(Dropout(0.3))(ones_).to_vector<float>();
  size_t zeros_ = 0;
  for (float v : d) {
    if (v == 0) ++zeros_;
    else EXPECT_NEAR(v, 1 / 0.7, 1e-6);
  }
  EXPECT_NEAR(double(zeros_) / d.size(), 0.3, 0.03);
  // dims: one mask value per slice along dim 1 (Flux's dims=2).
  const std::vector<float> per_col = trainmode(Dropout(0.5, {1}))(ones_).to_vector<float>();
  for (size_t c = 0; c < 100; ++c)
    for (size_t r = 1; r < 100; ++r) ASSERT_EQ(per_col[c * 100 + r], per_col[c * 100]);
}

TEST(ConvLayers, AlphaDropoutKeepsMeanAndVarianceAsFlux) {
  set_seed(5);
  const double p = 0.2, alpha = -1.7580993408473766;  // selu(-Inf), Flux's α'
  const double a = 1 / std::sqrt((1 - p) * (1 + p * alpha * alpha)), b = -a * alpha * p;
  const Tensor x = randn(Float64, {200000});
  // Inside gradient (training): each element is A x + B (kept) or A α' + B
  // (dropped), and the gradient is A where kept, 0 where dropped.
  Tensor y;
  const auto [l, g] = withgradient([&](const Tensor& in) { return sum((y = AlphaDropout(p)(in))); }, x);
  (void)l;
  const std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>(),
                            gs = std::get<0>(g).to_vector<double>();
  size_t dropped = 0;
  double mean = 0, sq = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (gs[i] == 0) {
      ++dropped;
      ASSERT_NEAR(ys[i], a * alpha + b, 1e-12) << i;
    } else {
      ASSERT_NEAR(gs[i], a, 1e-12) << i;
      ASSERT_NEAR(ys[i], a * xs[i] + b, 1e-12) << i;
    }
    mean += ys[i];
    sq += ys[i] * ys[i];
  }
  const double n = double(xs.size());
  EXPECT_NEAR(dropped / n, p, 0.005);
  // Standard normal in, mean 0 and variance 1 out (the point of A and B).
  mean /= n;
  EXPECT_NEAR(mean, 0, 0.01);
  EXPECT_NEAR(sq / n - mean * mean, 1, 0.02);
  // Outside gradient, or in test mode: the identity; p = 1 gives zeros.
  EXPECT_EQ(AlphaDropout(p)(x).to_vector<double>(), xs);
  EXPECT_EQ(testmode(AlphaDropout(p))(x).to_vector<double>(), xs);
  for (double v : alphadropout(x, 1.0).to_vector<double>()) ASSERT_EQ(v, 0);
  EXPECT_EQ(alphadropout(x, 0.0).to_vector<double>(), xs);
  EXPECT_NE(error_message<ArgumentError>([] { AlphaDropout(-0.1); }).find("AlphaDropout: the probability"),
            std::string::npos);
  EXPECT_NE(error_message<TypeError>([] { alphadropout(ones(Int32, {3}), 0.5); }).find("expected a floating input"),
            std::string::npos);
}

// A dropped element is exactly 0, whatever it held.

TEST(HostileLayers, DroppedInfAndNaNAreZero) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor(std::vector<double>{inf, -inf, nan, 1.0}, Shape{4}).to(Float32);
  // p = 1: every element dropped (NNlib's ifelse: 0, never 0 × Inf = NaN).
  for (float v : trainmode(Dropout(1.0))(x).to_vector<float>()) EXPECT_EQ(v, 0.0f);
  for (float v : dropout(x, 1.0).to_vector<float>()) EXPECT_EQ(v, 0.0f);
  // p < 1: each element kept (scaled) or exactly 0, Inf included.
  set_seed(21);
  const Tensor infs = full(Float32, inf, Shape{2000});
  size_t dropped = 0;
  for (float v : dropout(infs, 0.5).to_vector<float>()) {
    ASSERT_FALSE(std::isnan(v));
    if (v == 0) ++dropped;
    else ASSERT_EQ(v, float(inf));
  }
  EXPECT_GT(dropped, 800u);
  EXPECT_LT(dropped, 1200u);
  // With Flux's dims (one mask value per column) too.
  const std::vector<float> cols = dropout(full(Float32, nan, Shape{3, 400}), 0.5, {1}).to_vector<float>();
  size_t zero_cols = 0;
  for (size_t c = 0; c < 400; ++c) {
    const bool zero = cols[c * 3] == 0;
    zero_cols += zero;
    for (size_t r = 0; r < 3; ++r) ASSERT_EQ(cols[c * 3 + r] == 0, zero) << c;
  }
  EXPECT_GT(zero_cols, 100u);
  // The gradient: exactly 0 where dropped, even when the gradient arriving there is Inf.
  set_seed(22);
  const Tensor w = full(Float64, inf, Shape{1000});
  const Tensor xs = rand(Float64, {1000});
  Tensor y;
  auto [l, g] = withgradient([&](const Tensor& in) { return sum((y = dropout(in, 0.5)) * w); }, xs);
  (void)l;
  const std::vector<double> ys = y.to_vector<double>(), gs = std::get<0>(g).to_vector<double>();
  for (size_t i = 0; i < gs.size(); ++i) {
    if (ys[i] == 0) ASSERT_EQ(gs[i], 0.0) << i;
    else ASSERT_EQ(gs[i], inf) << i;
  }
  auto [l1, g1] = withgradient([&](const Tensor& in) { return sum(dropout(in, 1.0) * w); }, xs);
  (void)l1;
  for (double v : std::get<0>(g1).to_vector<double>()) ASSERT_EQ(v, 0.0);
}

// ---- with the upsampling and convolution layers on every device ---------------------

TEST(NormUpsampleLayers, MoveToEveryDeviceComputeTrainThereAndComeBack) {
  const auto devices = flx::testing::accelerator_devices();
  if (devices.empty()) GTEST_SKIP() << "no device besides the CPU is functional: nothing to move the layers to";
  set_seed(12);
  const auto model = Chain(Conv({3, 3}, 2, 8, {.pad = 1}), GroupNorm(8, 4, relu), Upsample({.scale = {2}}),
                           DepthwiseConv({3, 3}, 8, 8, {.pad = 1}), InstanceNorm(8, {.affine = true, .track_stats = true}),
                           PixelShuffle(2), ConvTranspose({3, 3}, 2, 3, {.stride = 2, .pad = 1, .outpad = 1}),
                           Upsample({.mode = "bilinear", .size = {20, 12}}));
  const Tensor x = rand(3, 2, 2, 2);
  auto loss = [](const auto& m, const Tensor& in) {
    set_seed(21);
    return sum(m(in) * rand(Float32, Shape{20, 12, 3, 2}).to(in.device()));
  };
  const auto reference = model | cpu;  // its running statistics move apart from model's
  auto [g_cpu] = gradient([&](const auto& m) { return loss(m, x); }, reference);
  for (const Device& dev : devices) {
    SCOPED_TRACE(dev.str());
    const auto on = model | dev;
    EXPECT_EQ(get_device(on), dev);
    EXPECT_EQ(shown(on), shown(model));
    EXPECT_EQ(outputsize(on, x.shape()), (Shape{20, 12, 3, 2}));
    const Tensor y = testmode(on)(x | dev);
    EXPECT_EQ(y.device(), dev);
    expect_close(y, testmode(model)(x), 1e-4, "output");
    auto [g_dev] = gradient([&](const auto& m) { return loss(m, x | dev); }, on);
    EXPECT_EQ(get_device(g_dev), dev);
    const auto gd = leaves(g_dev), gc = leaves(g_cpu);
    ASSERT_EQ(gd.size(), gc.size());
    for (size_t k = 0; k < gd.size(); ++k)
      if (gc[k].defined()) expect_close(gd[k], gc[k], 1e-3, "gradient " + std::to_string(k));
    EXPECT_EQ(names_of(state(on)), names_of(state(model)));
    const auto back = on | cpu;
    EXPECT_EQ(get_device(back), Device::cpu());
  }
}

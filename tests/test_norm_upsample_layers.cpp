// GroupNorm, InstanceNorm, Upsample, PixelShuffle, DepthwiseConv and
// ConvTranspose's outpad (issue 28): each against a closed form (loops
// here), Float64 finite differences, Flux's printing and shape rule, a
// checkpoint round trip, and typed errors that name the layer and the
// shapes; a model of all of them on every device. The devices are also
// compared case by case in the conformance suite
// (conformance_layer_cases.cpp), PyTorch's values in test_layer_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
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
using flx::testing::names_of;
using flx::testing::values_of;
using V = std::vector<Tensor>;

namespace {

// save, load into a copy whose tensors were zeroed, and compare.
template <class M>
void expect_checkpoint_round_trip(const M& m, const std::vector<std::string>& names) {
  EXPECT_EQ(names_of(state(m)), names);
  flx::testing::TempDir dir;
  save(dir / "m.safetensors", m);
  M blank = fmap([](const Tensor& t) { return zeros(t.dtype(), t.shape()); }, m);
  loadmodel(blank, load(dir / "m.safetensors"));
  EXPECT_EQ(values_of(blank), values_of(m));
}

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

// ---- GroupNorm -----------------------------------------------------------------------

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

// ---- InstanceNorm --------------------------------------------------------------------

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

// ---- Upsample and PixelShuffle ---------------------------------------------------------

TEST(Upsample, UpsamplesAsNNlibWithFluxsOptions) {
  set_seed(8);
  const Tensor x = rand64({3, 2, 2, 2});
  expect_close(Upsample({.scale = {2, 3}})(x), upsample_nearest(x, {.scale = {2, 3}}), 0);
  expect_close(Upsample({.scale = {2}})(x), upsample_nearest(x, {.scale = {2, 2}}), 0);  // one scale: every spatial dim
  expect_close(Upsample(2)(x), upsample_nearest(x, {.scale = {2, 2}}), 0);
  expect_close(Upsample({.size = {6, 8}})(x), upsample_nearest(x, {.scale = {2, 4}}), 0);
  expect_close(Upsample({.mode = "bilinear", .scale = {2.5, 1.5}})(x), upsample_bilinear(x, {.scale = {2.5, 1.5}}), 0);
  expect_close(Upsample(2, "bilinear")(x), upsample_bilinear(x, {.scale = {2, 2}}), 0);
  expect_close(Upsample({.mode = "bilinear", .size = {5, 4}, .align_corners = false})(x),
               upsample_bilinear(x, {.size = {5, 4}, .align_corners = false}), 0);
  // Flux's docstring: ones(2, 2, 1, 1) -> (4, 6, 1, 1) and (4, 5, 1, 1).
  EXPECT_EQ(Upsample({.scale = {2, 3}})(ones(2, 2, 1, 1)).shape(), (Shape{4, 6, 1, 1}));
  EXPECT_EQ(Upsample({.mode = "bilinear", .size = {4, 5}})(ones(2, 2, 1, 1)).shape(), (Shape{4, 5, 1, 1}));
  const Tensor x3 = rand64({2, 3, 2, 1, 1});
  EXPECT_EQ(Upsample({.mode = "trilinear", .scale = {2}})(x3).shape(), (Shape{4, 6, 4, 1, 1}));
  // Bilinear upsampling at the corners keeps them (align_corners, NNlib's default).
  const Tensor y = Upsample(2, "bilinear")(x);
  EXPECT_EQ(y.to_vector<double>()[0], x.to_vector<double>()[0]);
}

TEST(Upsample, GradientsMatchFiniteDifferences) {
  set_seed(9);
  check_gradients([](const V& v) { return sum(Upsample({.mode = "bilinear", .size = {5, 3}})(v[0]) * v[1]); },
                  {rand64({3, 2, 2, 1}), rand64({5, 3, 2, 1})}, 1e-6, 1e-6, "Upsample bilinear");
  check_gradients([](const V& v) { return sum(Upsample({.scale = {2, 3}})(v[0]) * v[1]); },
                  {rand64({2, 2, 1, 2}), rand64({4, 6, 1, 2})}, 1e-6, 1e-6, "Upsample nearest");
  check_gradients([](const V& v) { return sum(PixelShuffle(2)(v[0]) * v[1]); },
                  {rand64({2, 3, 8, 1}), rand64({4, 6, 2, 1})}, 1e-6, 1e-6, "PixelShuffle");
}

TEST(Upsample, PrintsAndChecksAsFlux) {
  EXPECT_EQ(shown(Upsample({.scale = {2, 3}})), "Upsample(:nearest, scale = (2, 3))");
  EXPECT_EQ(shown(Upsample(2)), "Upsample(:nearest, scale = 2)");
  EXPECT_EQ(shown(Upsample({.mode = "bilinear", .size = {4, 5}})), "Upsample(:bilinear, size = (4, 5))");
  EXPECT_EQ(shown(Upsample({.mode = "bilinear", .scale = {2.5}})), "Upsample(:bilinear, scale = 2.5)");
  EXPECT_EQ(shown(Chain(Conv({3, 3}, 4, 4), Upsample(2))), "Chain(Conv((3, 3), 4 => 4), Upsample(:nearest, scale = 2))  # 148 parameters");
  EXPECT_TRUE(leaves(Upsample(2)).empty());
  EXPECT_EQ(state(Chain(Upsample(2), PixelShuffle(2))).size(), 0u);
  EXPECT_EQ(outputsize(Upsample({.mode = "bilinear", .scale = {2.5}}), Shape{3, 4, 2, 1}), (Shape{7, 10, 2, 1}));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Upsample({.scale = {2}, .size = {4}}); }),
                  "Upsample: either .scale or .size should be given (but not both); got both"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Upsample(UpsampleOptions{}); }), "got neither"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Upsample(2, "cubic"); }), "Upsample: mode=:cubic is not supported"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Upsample(1.5); }), "nearest upsampling takes whole scales; got 1.5"));
  const std::string three = error_message<DimensionMismatch>([] { Upsample(2, "bilinear")(rand(4, 3, 2)); });
  EXPECT_EQ(three.substr(0, three.find(" [")),
            "Upsample(:bilinear, scale = 2): bilinear upsampling needs 2 spatial dims (an input of 4 dims); got shape 4×3×2");
  const std::string sizes = error_message<DimensionMismatch>([] { Upsample({.size = {4, 4, 4}})(rand(2, 2, 1, 1)); });
  EXPECT_EQ(sizes.substr(0, sizes.find(" [")),
            "Upsample(:nearest, size = (4, 4, 4)): expected one size per spatial dim (2) of an input of shape 2×2×1×1; "
            "got 3");
  EXPECT_TRUE(has(error_message<DimensionMismatch>([] { Upsample({.size = {5, 4}})(rand(2, 2, 1, 1)); }),
                  "size 5 of spatial dim 1 is not a whole multiple of the input's 2 (input shape 2×2×1×1)"));
  EXPECT_EQ(error_message<DimensionMismatch>([] { outputsize(Upsample(2, "bilinear"), Shape{4, 3, 2}); }), three);
}

TEST(PixelShuffle, ShufflesAsFluxsDocstring) {
  // Flux's docstring: xs[row, col, ch] = 2row + col + ch/10 (1-based), 2×2×4×1 -> 4×4×1×1.
  std::vector<double> v;
  for (int ch = 1; ch <= 4; ++ch)
    for (int col = 1; col <= 2; ++col)
      for (int row = 1; row <= 2; ++row) v.push_back(2 * row + col + ch / 10.0);
  const Tensor y = PixelShuffle(2)(tensor(v, {2, 2, 4, 1}));
  EXPECT_EQ(y.shape(), (Shape{4, 4, 1, 1}));
  // Rows of the result: 3.1 3.3 4.1 4.3 / 3.2 3.4 4.2 4.4 / 5.1 5.3 6.1 6.3 / 5.2 5.4 6.2 6.4 (column-major below).
  expect_values(y, {3.1, 3.2, 5.1, 5.2, 3.3, 3.4, 5.3, 5.4, 4.1, 4.2, 6.1, 6.2, 4.3, 4.4, 6.3, 6.4}, 1e-12);
  EXPECT_EQ(shown(PixelShuffle(2)), "PixelShuffle(2)");
  EXPECT_EQ(outputsize(PixelShuffle(3), Shape{4, 5, 18, 2}), (Shape{12, 15, 2, 2}));
  const std::string msg = error_message<DimensionMismatch>([] { PixelShuffle(2)(rand(3, 3, 6, 1)); });
  EXPECT_EQ(msg.substr(0, msg.find(" [")),
            "PixelShuffle(2): expected channels (dim 2) a multiple of r^2 = 4; got 6 in an input of shape 3×3×6×1");
  EXPECT_TRUE(has(error_message<ArgumentError>([] { PixelShuffle(0); }), "PixelShuffle: the upscale factor r must be >= 1"));
}

// ---- DepthwiseConv and ConvTranspose's outpad -------------------------------------------

TEST(DepthwiseConv, IsAConvWithAGroupPerInputChannel) {
  set_seed(10);
  const Conv d = DepthwiseConv({5, 5}, 3, 6, relu, {.bias = false});
  EXPECT_EQ(d.weight.shape(), (Shape{5, 5, 1, 6}));
  EXPECT_EQ(d.geometry.groups, 3);
  EXPECT_EQ(shown(d), "Conv((5, 5), 3 => 6, relu, groups=3, bias=false)  # 150 parameters");  // Flux's docstring
  const Tensor xs = rand(20, 20, 3, 2);
  EXPECT_EQ(d(xs).shape(), (Shape{16, 16, 6, 2}));
  EXPECT_EQ(DepthwiseConv({5, 5}, 3, 9, {.stride = 2, .pad = 2})(xs).shape(), (Shape{10, 10, 9, 2}));
  EXPECT_EQ(outputsize(DepthwiseConv({3}, 4, 4), Shape{9, 4, 2}), (Shape{7, 4, 2}));
  // Each output channel sees only its input channel: the same as a Conv of groups = in.
  const Tensor x = rand64({6, 5, 2, 2});
  const Conv dw = DepthwiseConv(rand64({3, 3, 2, 2}), rand64({4}), {}, {.pad = 1});  // (k, k, multiplier, in)
  EXPECT_EQ(dw.weight.shape(), (Shape{3, 3, 1, 4}));
  const Tensor channel0 = selectdim(x, 2, 0);  // channel 0 feeds outputs 0 and 1
  const Tensor ref = conv(reshape(channel0, {6, 5, 1, 2}), slice(dw.weight, 3, 0, 2), slice(dw.bias, 0, 0, 2), {.pad = 1});
  expect_close(slice(dw(x), 2, 0, 2), ref, 1e-12);
  check_gradients(
      [](const V& v) { return sum(Conv(v[1], v[2], flx::tanh, {.pad = 1, .groups = 2})(v[0]) * v[3]); },
      {rand64({5, 4, 2, 2}), rand64({3, 3, 1, 4}), rand64({4}), rand64({5, 4, 4, 2})}, 1e-6, 1e-6, "DepthwiseConv");
  EXPECT_TRUE(has(error_message<ArgumentError>([] { DepthwiseConv({3, 3}, 4, 6); }),
                  "DepthwiseConv: the output channels must be a multiple of the input channels"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { DepthwiseConv({3, 3}, 4, 8, {.groups = 2}); }),
                  "DepthwiseConv: groups is the input channel count (4); got groups=2"));
  const std::string wrong = error_message<DimensionMismatch>([&] { d(rand(9, 9, 4, 1)); });
  EXPECT_TRUE(has(wrong, "Conv((5, 5), 3 => 6, relu, groups=3, bias=false)")) << wrong;
}

TEST(ConvTranspose, OutpadGrowsTheOutputAsFlux) {
  set_seed(11);
  // Flux's docstring: ConvTranspose((5,5), 3 => 7, stride=2, outpad=1) on 100×100 gives 204×204.
  const ConvTranspose t({5, 5}, 3, 7, {.stride = 2, .outpad = 1});
  EXPECT_EQ(t(rand(100, 100, 3, 2)).shape(), (Shape{204, 204, 7, 2}));
  EXPECT_EQ(shown(t), "ConvTranspose((5, 5), 3 => 7, stride=2, outpad=(1, 1))  # 532 parameters");
  EXPECT_EQ(outputsize(t, Shape{10, 10, 3, 1}), (Shape{24, 24, 7, 1}));
  const ConvTranspose u({3, 3}, 2, 2, {.stride = {2, 3}, .pad = 1, .outpad = {1, 2}});
  EXPECT_EQ(u(rand(4, 4, 2, 1)).shape(), (Shape{8, 12, 2, 1}));  // (4-1)·s + 3 - 2 + outpad
  EXPECT_EQ(shown(u), "ConvTranspose((3, 3), 2 => 2, pad=1, stride=(2, 3), outpad=(1, 2))  # 38 parameters");
  // The extra rows are the conv_transpose op's out_pad: the same values.
  const Tensor x = rand64({4, 3, 2, 1}), w = rand64({3, 3, 2, 2}), b = rand64({2});
  expect_close(ConvTranspose(w, b, {}, {.stride = 2, .outpad = {1, 0}})(x),
               conv_transpose(x, w, b, {.stride = 2}, {1, 0}), 0);
  // The inverse of Conv's shape at stride 2: Conv maps 8 and 7 to 4; outpad picks 8 back.
  const Conv down({3, 3}, 2, 2, {.stride = 2, .pad = 1});
  EXPECT_EQ(down(rand(8, 7, 2, 1)).shape(), (Shape{4, 4, 2, 1}));
  EXPECT_EQ(ConvTranspose({3, 3}, 2, 2, {.stride = 2, .pad = 1, .outpad = {1, 0}})(rand(4, 4, 2, 1)).shape(),
            (Shape{8, 7, 2, 1}));
  check_gradients(
      [](const V& v) { return sum(ConvTranspose(v[1], v[2], flx::tanh, {.stride = 2, .pad = 1, .outpad = 1})(v[0]) * v[3]); },
      {rand64({3, 3, 2, 1}), rand64({3, 3, 2, 2}), rand64({2}), rand64({6, 6, 2, 1})}, 1e-6, 1e-6, "outpad");
  EXPECT_TRUE(has(error_message<ArgumentError>([] { ConvTranspose({3, 3}, 2, 2, {.stride = 2, .outpad = 2}); }),
                  "ConvTranspose: outpad must be below the stride or the dilation; got outpad=2 with stride 2"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Conv({3, 3}, 2, 2, {.stride = 2, .outpad = 1}); }),
                  "Conv: outpad applies to ConvTranspose only"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { ConvTranspose({3, 3}, 2, 2, {.outpad = {0, 0, 0}}); }),
                  "ConvTranspose: outpad takes one value or one per spatial dim (2); got 3"));
  expect_checkpoint_round_trip(u, {"weight", "bias"});
}

// ---- all of them on every device -----------------------------------------------------

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

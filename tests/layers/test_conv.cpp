// The convolution and pooling layers of src/layers/conv.cpp
// (include/flx/layers/conv.hpp, Flux's conv.jl): Conv, CrossCor,
// ConvTranspose (SamePad with a stride, outpad), DepthwiseConv, the pools
// and Flatten: printing, errors that name the layer and both shapes (and
// the option whose geometry overflows), gradients of empty batches, a small
// CNN that learns. The functions under them (conv, maxpool, ...):
// tests/test_dnn.cpp; the other devices: the conformance suite
// (conformance_layer_cases.cpp); PyTorch's values: test_layer_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
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
using flx::testing::has;
using flx::testing::rand64;
using flx::testing::shown;
using V = std::vector<Tensor>;

// ---- Conv, CrossCor, ConvTranspose and the pools ------------------------------------

TEST(ConvLayers, PrintLikeFlux) {
  EXPECT_EQ(shown(Conv({3, 3}, 1, 16, relu, {.pad = 1})), "Conv((3, 3), 1 => 16, relu, pad=1)  # 160 parameters");
  EXPECT_EQ(shown(Conv({5}, 2, 4, {.stride = 2, .pad = {1, 2}, .dilation = 3, .groups = 2})),
            "Conv((5,), 2 => 4, pad=(1, 2), stride=2, dilation=3, groups=2)  # 24 parameters");
  EXPECT_EQ(shown(CrossCor(rand(Float32, {2, 2, 3, 4}), Tensor())), "CrossCor((2, 2), 3 => 4, bias=false)  # 48 parameters");
  EXPECT_EQ(shown(ConvTranspose({3, 3}, 16, 1, sigmoid, {.stride = {2, 1}})),
            "ConvTranspose((3, 3), 16 => 1, σ, stride=(2, 1))  # 145 parameters");
  EXPECT_EQ(shown(MaxPool({2, 2})), "MaxPool((2, 2))");
  EXPECT_EQ(shown(MeanPool({3, 3}, {.stride = 2, .pad = 1})), "MeanPool((3, 3), pad=1, stride=2)");
  EXPECT_EQ(shown(GlobalMaxPool()), "GlobalMaxPool()");
  EXPECT_EQ(shown(AdaptiveMeanPool({5, 5})), "AdaptiveMeanPool((5, 5))");
  EXPECT_EQ(shown(BatchNorm(16, relu)), "BatchNorm(16, relu)  # 32 parameters, plus 32 non-trainable");
  EXPECT_EQ(shown(BatchNorm(4, {.affine = false})), "BatchNorm(4, affine=false)");
  EXPECT_EQ(shown(testmode(Dropout(0.5))), "Dropout(0.5, active=false)");
  EXPECT_EQ(shown(Dropout(0.25, {2})), "Dropout(0.25, dims=3)");
  EXPECT_EQ(shown(AlphaDropout(0.5)), "AlphaDropout(0.5)");
  EXPECT_EQ(shown(trainmode(AlphaDropout(0.1))), "AlphaDropout(0.1, active=true)");
  EXPECT_EQ(shown(Chain(Conv({3, 3}, 1, 2), MaxPool({2, 2}), Flatten())),
            "Chain(Conv((3, 3), 1 => 2), MaxPool((2, 2)), flatten)  # 20 parameters");
}

TEST(ConvLayers, WrongInputNamesTheLayerAndBothShapes) {
  const Conv c({3, 3}, 3, 8);
  std::string m = error_message<DimensionMismatch>([&] { c(rand(Float32, {8, 8, 2, 1})); });
  EXPECT_NE(m.find("Conv((3, 3), 3 => 8)"), std::string::npos) << m;
  EXPECT_NE(m.find("expected 3 input channels"), std::string::npos) << m;
  EXPECT_NE(m.find("3×3×3×8"), std::string::npos) << m;
  EXPECT_NE(m.find("8×8×2×1"), std::string::npos) << m;
  m = error_message<DimensionMismatch>([&] { c(rand(Float32, {2, 8, 3, 1})); });
  EXPECT_NE(m.find("Conv((3, 3), 3 => 8): the input of shape (2×8×3×1) is smaller than the kernel"),
            std::string::npos) << m;
  m = error_message<DimensionMismatch>([&] { c(rand(Float32, {8, 8, 3})); });
  EXPECT_NE(m.find("expected a 4-dim input"), std::string::npos) << m;
  EXPECT_NE(m.find("add the batch dim"), std::string::npos) << m;
  m = error_message<DimensionMismatch>([&] { MaxPool({3, 3})(rand(Float32, {2, 2, 1, 1})); });
  EXPECT_NE(m.find("MaxPool((3, 3))"), std::string::npos) << m;
  EXPECT_NE(m.find("smaller than the window"), std::string::npos) << m;
  m = error_message<DimensionMismatch>([&] { BatchNorm(4)(rand(Float32, {5, 3, 2})); });
  EXPECT_NE(m.find("BatchNorm(4): expected 4 channels"), std::string::npos) << m;
  EXPECT_NE(m.find("5×3×2"), std::string::npos) << m;
  m = error_message<DimensionMismatch>([&] { AdaptiveMaxPool({4, 4})(rand(Float32, {3, 8, 1, 1})); });
  EXPECT_NE(m.find("AdaptiveMaxPool((4, 4))"), std::string::npos) << m;
  EXPECT_THROW(Conv({3, 3}, 3, 8, {.groups = 2}), ArgumentError);
  EXPECT_THROW(Conv({3, 3}, 3, 8, {.pad = {1, 2, 3}}), ArgumentError);
  EXPECT_THROW(Conv({3, 3}, 3, 8, {.stride = 0}), ArgumentError);
  EXPECT_THROW(Dropout(1.5), ArgumentError);
  EXPECT_THROW(c(rand(Float32, {8, 8, 3, 1}).to(Float64)), TypeError);
}

TEST(ConvLayers, ASmallCnnLearns) {
  set_seed(4);
  auto model = Chain(Conv({3, 3}, 1, 4, relu, {.pad = 1}), BatchNorm(4), MaxPool({2, 2}), Flatten(), Dense(4 * 4 * 4, 2));
  // Two classes: a bright left half or a bright right half.
  Tensor x = rand(Float32, {8, 8, 1, 16}) * 0.2;
  std::vector<int64_t> labels;
  std::vector<float> bright(8 * 8 * 16, 0.f);
  for (int n = 0; n < 16; ++n) {
    labels.push_back(n % 2);
    for (int h = 0; h < 8; ++h)
      for (int w = 0; w < 4; ++w) bright[size_t(n * 64 + h * 8 + w + 4 * (n % 2))] = 1.f;
  }
  x = x + tensor(bright, {8, 8, 1, 16});
  const Tensor y = onehotbatch(labels, 2);
  auto opt = setup(Adam(0.01), model);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    auto [loss, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), y); }, model);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    update(opt, model, std::get<0>(grads));
  }
  EXPECT_LT(last, first * 0.2) << "loss " << first << " -> " << last;
  EXPECT_EQ(onecold(testmode(model)(x)).to_vector<int64_t>(), labels);
}

// ---- DepthwiseConv and ConvTranspose's outpad ---------------------------------------

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

// ---- ConvTranspose with SamePad(): output = input × stride (issue 27) ---------------

TEST(HostileLayers, ConvTransposeSamePadGivesInputTimesStride) {
  set_seed(11);
  // Flux's calc_padding(ConvTranspose, SamePad(), k, d, s): total padding
  // (k - s)·d, its larger half on the low side.
  EXPECT_EQ(ConvTranspose({3, 3}, 1, 2, {.stride = 2, .pad = SamePad()})(rand(Float32, {5, 5, 1, 2})).shape(),
            (Shape{10, 10, 2, 2}));
  EXPECT_EQ(ConvTranspose({3}, 1, 1, {.stride = 3, .pad = SamePad()})(rand(Float32, {5, 1, 1})).shape(),
            (Shape{15, 1, 1}));
  EXPECT_EQ(ConvTranspose({4}, 2, 1, {.stride = 2, .pad = SamePad()})(rand(Float32, {6, 2, 3})).shape(),
            (Shape{12, 1, 3}));
  // At stride 1 it keeps the size, as before.
  EXPECT_EQ(ConvTranspose({3, 3}, 1, 1, {.pad = SamePad()})(rand(Float32, {7, 6, 1, 1})).shape(),
            (Shape{7, 6, 1, 1}));
  // The resolved padding is Flux's: (1, 0) for kernel 3 at stride 2, (1, 1) for kernel 4.
  EXPECT_EQ(ConvTranspose({3, 3}, 1, 1, {.stride = 2, .pad = SamePad()}).geometry.pad,
            (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(ConvTranspose({4}, 1, 1, {.stride = 2, .pad = SamePad()}).geometry.pad, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(shown(ConvTranspose({3, 3}, 1, 1, {.stride = 2, .pad = SamePad()})),
            "ConvTranspose((3, 3), 1 => 1, pad=(1, 0, 1, 0), stride=2)  # 10 parameters");
  // The function takes SamePad too, with the same rule.
  const Tensor x = rand(Float32, {5, 5, 1, 1}), w = rand(Float32, {3, 3, 1, 1});
  const Tensor same = conv_transpose(x, w, Tensor(), {.stride = 2, .pad = SamePad()});
  const Tensor explicit_pad = conv_transpose(x, w, Tensor(), {.stride = 2, .pad = {1, 0, 1, 0}});
  EXPECT_EQ(same.shape(), (Shape{10, 10, 1, 1}));
  EXPECT_EQ(same.to_vector<float>(), explicit_pad.to_vector<float>());
  // A kernel smaller than the stride would need negative padding: a clear error.
  const std::string m = error_message<ArgumentError>([] { ConvTranspose({1}, 1, 1, {.stride = 2, .pad = SamePad()}); });
  EXPECT_TRUE(has(m, "ConvTranspose")) << m;
  EXPECT_TRUE(has(m, "kernel 1")) << m;
  EXPECT_TRUE(has(m, "stride 2")) << m;
}

TEST(HostileLayers, ConvTransposeSamePadGradientMatchesFiniteDifferences) {
  set_seed(12);
  auto weighted = [](const Tensor& y, uint64_t seed) {
    set_seed(seed);
    return sum(y * rand(Float64, y.shape()));
  };
  for (int64_t k : {3, 4}) {
    EXPECT_EQ(conv_transpose(rand64({4, 3, 2, 2}), rand64({k, k, 3, 2}), Tensor(), {.stride = 2, .pad = SamePad()})
                  .shape(),
              (Shape{8, 6, 3, 2}));
    check_gradients([&](const V& v) {
      return weighted(conv_transpose(v[0], v[1], v[2], {.stride = 2, .pad = SamePad()}), 13);
    }, {rand64({4, 3, 2, 2}), rand64({k, k, 3, 2}), rand64({3})}, 1e-6, 1e-6,
                    "conv_transpose SamePad stride 2, kernel " + std::to_string(k));
  }
}

// ---- pooling gradients on empty batches and zero channels (issue 27) ----------------

TEST(HostileLayers, PoolingGradientsOfEmptyInputsAreEmpty) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> pools = {
      {"MaxPool", [](const Tensor& x) { return MaxPool({2, 2})(x); }},
      {"MeanPool", [](const Tensor& x) { return MeanPool({2, 2})(x); }},
      {"MaxPool pad", [](const Tensor& x) { return MaxPool({3, 3}, {.stride = 1, .pad = 1})(x); }},
      {"AdaptiveMaxPool", [](const Tensor& x) { return AdaptiveMaxPool({2, 3})(x); }},
      {"AdaptiveMeanPool", [](const Tensor& x) { return AdaptiveMeanPool({2, 3})(x); }},
      {"GlobalMaxPool", [](const Tensor& x) { return GlobalMaxPool()(x); }},
      {"GlobalMeanPool", [](const Tensor& x) { return GlobalMeanPool()(x); }},
  };
  for (const auto& [name, f] : pools) {
    for (const Shape& s : {Shape{4, 6, 3, 0}, Shape{4, 6, 0, 2}}) {
      const Tensor x = zeros(Float32, s);
      Tensor y;
      try {
        auto [l, g] = withgradient([&](const Tensor& in) { return sum((y = f(in))); }, x);
        EXPECT_EQ(l.item<double>(), 0) << name << " " << s;
        ASSERT_TRUE(std::get<0>(g).defined()) << name << " " << s;
        EXPECT_EQ(std::get<0>(g).shape(), s) << name << " " << s;
        EXPECT_EQ(y.numel(), 0) << name << " " << s;
        EXPECT_EQ(y.shape()[2], s[2]) << name << " " << s;
        EXPECT_EQ(y.shape()[3], s[3]) << name << " " << s;
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " on " << s << ": " << e.what();
      }
    }
  }
  // And in a CNN: a batch of no images trains without an error, with zero gradients.
  auto model = Chain(Conv({3, 3}, 1, 2, relu, {.pad = 1}), BatchNorm(2), MaxPool({2, 2}), Flatten(), Dense(2 * 2 * 2, 3));
  const Tensor none = zeros(Float32, {4, 4, 1, 0});
  auto [l, g] = withgradient([&](const auto& m) { return sum(m(none)); }, model);
  EXPECT_EQ(l.item<double>(), 0);
  EXPECT_EQ(std::get<0>(std::get<0>(g).layers).weight.shape(), (Shape{3, 3, 1, 2}));
}

// ---- convolution geometry that overflows int64 (issue 27) ---------------------------

TEST(HostileLayers, ConvGeometryOverflowNamesTheLayerAndOption) {
  const int64_t big = int64_t(1) << 62, half = std::numeric_limits<int64_t>::max() / 2 + 1;
  std::string m = error_message<ArgumentError>([&] { Conv({3, 3}, 1, 1, {.dilation = big}); });
  EXPECT_TRUE(has(m, "Conv: ")) << m;
  EXPECT_TRUE(has(m, "dilation " + std::to_string(big))) << m;
  EXPECT_FALSE(has(m, "-9223372036854775")) << m;
  m = error_message<ArgumentError>([&] { Conv({3, 3}, 1, 1, {.pad = half}); });
  EXPECT_TRUE(has(m, "Conv: ")) << m;
  EXPECT_TRUE(has(m, "padding " + std::to_string(half))) << m;
  EXPECT_FALSE(has(m, "-9223372036854775808")) << m;
  // The functions, and sizes that overflow only with the input's.
  const Tensor x = rand(Float32, {4, 4, 1, 1}), w = rand(Float32, {3, 3, 1, 1});
  m = error_message<ArgumentError>([&] { crosscor(x, w, Tensor(), {.dilation = big}); });
  EXPECT_TRUE(has(m, "crosscor: ") && has(m, "dilation " + std::to_string(big))) << m;
  const int64_t near = std::numeric_limits<int64_t>::max() / 2 - 1;
  m = error_message<ArgumentError>([&] { crosscor(x, w, Tensor(), {.pad = near}); });
  EXPECT_TRUE(has(m, "crosscor: ") && has(m, "padding " + std::to_string(near))) << m;
  EXPECT_TRUE(has(m, "input of shape (4×4×1×1)")) << m;
  m = error_message<ArgumentError>([&] { ConvTranspose({3, 3}, 1, 1, {.stride = big})(x); });
  EXPECT_TRUE(has(m, "ConvTranspose") && has(m, "stride " + std::to_string(big))) << m;
  m = error_message<ArgumentError>([&] { MaxPool({big, 2}, {.pad = {big - 1, 0}})(x); });
  EXPECT_TRUE(has(m, "MaxPool") && has(m, "padding " + std::to_string(big - 1))) << m;
}

// ---- a convolution's dtype hint names the layer's dtype (issue 27) ------------------

TEST(HostileLayers, ConvDtypeHintNamesTheLayersDtype) {
  const Conv c({3, 3}, 1, 2);
  std::string m = error_message<TypeError>([&] { c(ones(Int32, {5, 5, 1, 1})); });
  EXPECT_TRUE(has(m, "Conv((3, 3), 1 => 2)")) << m;
  EXPECT_TRUE(has(m, "Int32")) << m;
  EXPECT_TRUE(has(m, "x.to(Float32)")) << m;
  EXPECT_FALSE(has(m, "x.to(Int32)")) << m;
  m = error_message<TypeError>([&] { c(ones(Float64, {5, 5, 1, 1})); });
  EXPECT_TRUE(has(m, "x.to(Float32)")) << m;
  EXPECT_TRUE(has(m, "f64(")) << m;  // or the model to the input's type
  m = error_message<TypeError>([&] { ConvTranspose({3, 3}, 1, 2)(ones(UInt8, {5, 5, 1, 1})); });
  EXPECT_TRUE(has(m, "ConvTranspose") && has(m, "x.to(Float32)")) << m;
}

// ---- LPNormPool: (Σ x^p)^(1/p) over each window ----------------------------------------

namespace {
// The definition in loops, for (W, H, C, N) in Float64: window (kw, kh),
// stride (sw, sh), padding (pw, ph) on both sides (zeros, adding nothing).
std::vector<double> lpnorm_loops(const Tensor& x, double p, int64_t kw, int64_t kh, int64_t sw, int64_t sh, int64_t pw,
                                 int64_t ph) {
  const Shape s = x.shape();
  const std::vector<double> v = x.to_vector<double>();
  const int64_t W = s[0], H = s[1], C = s[2], N = s[3];
  const int64_t ow = (W + 2 * pw - kw) / sw + 1, oh = (H + 2 * ph - kh) / sh + 1;
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < oh; ++j)
        for (int64_t i = 0; i < ow; ++i) {
          double sum = 0;
          for (int64_t b = 0; b < kh; ++b)
            for (int64_t a = 0; a < kw; ++a) {
              const int64_t w = i * sw + a - pw, h = j * sh + b - ph;
              if (w >= 0 && w < W && h >= 0 && h < H) sum += std::pow(v[size_t(w + W * (h + H * (c + C * n)))], p);
            }
          out.push_back(std::pow(sum, 1 / p));
        }
  return out;
}
}  // namespace

TEST(LPNormPool, IsThePNormOfEachWindowAsNNlib) {
  set_seed(40);
  const Tensor x = rand64({5, 4, 2, 3}, 0.1, 2.0);
  flx::testing::expect_values(LPNormPool(1.5, {2, 2})(x), lpnorm_loops(x, 1.5, 2, 2, 2, 2, 0, 0), 1e-12);
  const LPNormPool padded(3, {3, 2}, {.stride = 1, .pad = 1});
  flx::testing::expect_values(padded(x), lpnorm_loops(x, 3, 3, 2, 1, 1, 1, 1), 1e-12);
  // NNlib's docstring: lpnormpool(x, 1, k) ./ prod(k) ≈ meanpool(x, k), and
  // lpnormpool(x, 2, k).^2 ./ prod(k) ≈ meanpool(x.^2, k).
  expect_close(LPNormPool(1, {2, 2})(x) / 4.0, meanpool(x, {2, 2}), 1e-12);
  expect_close(square(LPNormPool(2, {2, 2})(x)) / 4.0, meanpool(square(x), {2, 2}), 1e-12);
  check_gradients([&](const V& v) { return sum(padded(v[0]) * v[1]); }, {x, rand64({5, 5, 2, 3})}, 1e-6, 1e-6,
                  "LPNormPool");
  EXPECT_EQ(outputsize(padded, x.shape()), padded(x).shape());
  EXPECT_EQ(shown(LPNormPool(2, {2, 2})), "LPNormPool(2, (2, 2))");
  EXPECT_EQ(shown(padded), "LPNormPool(3, (3, 2), pad=1, stride=1)");
  EXPECT_EQ(shown(Chain(Conv({3, 3}, 1, 2), LPNormPool(1.5, {2, 2}))),
            "Chain(Conv((3, 3), 1 => 2), LPNormPool(1.5, (2, 2)))  # 20 parameters");
  for (const Device& dev : flx::testing::accelerator_devices())
    expect_close(padded(x.to(dev)), padded(x), 1e-10, dev.str());
}

TEST(LPNormPool, RefusesAPOutsideZeroToInfinityAndBadWindows) {
  for (double p : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    const std::string m = error_message<ArgumentError>([&] { LPNormPool(p, {2, 2}); });
    EXPECT_TRUE(has(m, "LPNormPool: p must lie in (0, Inf)")) << m;
    EXPECT_THROW((void)lpnormpool(rand(4, 4, 1, 1), p, {2, 2}), ArgumentError);
  }
  EXPECT_TRUE(has(error_message<ArgumentError>([] { LPNormPool(2, {2, 0}); }), "LPNormPool: window sizes must be positive"));
  const std::string small = error_message<DimensionMismatch>([] { (void)LPNormPool(2, {5, 5})(rand(3, 3, 1, 1)); });
  EXPECT_TRUE(has(small, "LPNormPool(2, (5, 5))")) << small;
}

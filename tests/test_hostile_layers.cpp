// Layers as a hostile user meets them (issue 27): SamePad on a strided
// ConvTranspose, pooling gradients of empty batches, dropout of Inf and
// NaN, convolution geometry that overflows int64, the dtype hint of a
// convolution, and constructors given sizes below 1. Each error is typed
// and names the layer, the option and the value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::has;
using flx::testing::rand64;
using flx::testing::shown;
using V = std::vector<Tensor>;

// ---- 1. ConvTranspose with SamePad(): output = input × stride -----------------

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

// ---- 2. pooling gradients on empty batches and zero channels -----------------

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

// ---- 4. dropout: a dropped element is exactly 0, whatever it held -------------

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

// ---- 8. convolution geometry that overflows int64 ----------------------------

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

// ---- 9. a convolution's dtype hint names the layer's dtype ------------------------

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

// ---- 10. constructors given sizes below 1 -----------------------------------

TEST(HostileLayers, ConstructorsRejectBadSizesNamingTheLayer) {
  struct Case {
    std::string layer, value;
    std::function<void()> make;
  };
  const std::vector<Case> cases = {
      {"LayerNorm", "-3", [] { LayerNorm(-3); }},
      {"LayerNorm", "0", [] { LayerNorm(0); }},
      {"LayerNorm", "-3", [] { LayerNorm({4, -3}); }},
      {"Embedding", "-5", [] { Embedding(-5, 3); }},
      {"Embedding", "0", [] { Embedding(5, 0); }},
      {"Dense", "-2", [] { Dense(-2, 3); }},
      {"Dense", "-7", [] { Dense(3, -7, relu); }},
      {"Dense", "0", [] { Dense(0, 3); }},
      {"Conv", "-1", [] { Conv({3, 3}, -1, 2); }},
      {"Conv", "-3", [] { Conv({-3, 3}, 1, 2); }},
      {"CrossCor", "0", [] { CrossCor({3}, 2, 0); }},
      {"ConvTranspose", "-4", [] { ConvTranspose({3, 3}, 1, -4); }},
      {"BatchNorm", "-2", [] { BatchNorm(-2); }},
      {"BatchNorm", "0", [] { BatchNorm(0, relu); }},
      {"RNN", "-1", [] { RNN(-1, 3); }},
      {"LSTM", "0", [] { LSTM(3, 0); }},
      {"GRU", "-6", [] { GRU(2, -6); }},
      {"RNNCell", "-1", [] { RNNCell(-1, 3); }},
      {"LSTMCell", "-2", [] { LSTMCell(4, -2); }},
      {"GRUCell", "0", [] { GRUCell(0, 2); }},
      {"MaxPool", "0", [] { MaxPool({2, 0}); }},
      {"MeanPool", "-2", [] { MeanPool({-2}); }},
      {"AdaptiveMaxPool", "0", [] { AdaptiveMaxPool({0, 2}); }},
      {"AdaptiveMeanPool", "-1", [] { AdaptiveMeanPool({-1}); }},
      {"Dropout", "-1", [] { Dropout(0.5, {-1}); }},
      {"Dropout", "1.5", [] { Dropout(1.5); }},
  };
  for (const auto& c : cases) {
    EXPECT_THROW(c.make(), ArgumentError) << c.layer << " " << c.value;
    const std::string m = error_message(c.make);
    EXPECT_EQ(m.rfind(c.layer, 0), 0u) << c.layer << ": " << m;  // the message starts with the layer
    EXPECT_TRUE(has(m, c.value)) << c.layer << ": " << m;
    EXPECT_FALSE(has(m, "dims must be non-negative")) << c.layer << ": " << m;
  }
}

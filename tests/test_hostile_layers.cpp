// Layers as a hostile user meets them (issue 27), across every family:
// constructors given sizes below 1, each error typed and naming the layer
// and the value. The other hostile cases live with their family's tests:
// SamePad on a strided ConvTranspose, pooling gradients of empty batches,
// convolution geometry that overflows int64 and a convolution's dtype hint
// in tests/layers/test_conv.cpp; dropout of Inf and NaN in
// tests/layers/test_normalise.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;
using flx::testing::shown;

// ---- constructors given sizes below 1 (issue 27) ------------------------------------

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

// ---- issue 39: layers given edge inputs ------------------------------------------------

namespace {
// Flux's ConvTranspose in one spatial dim, one channel each way, from its
// definition (the transpose of a true convolution): out[o] = b + Σ_j Σ_k
// w[K-1-k] x[j] over o = j·stride + k·dilation - pad_lo, for o in [0, len).
std::vector<double> conv_transpose_1d(const std::vector<double>& x, const std::vector<double>& w, double b,
                                      int64_t stride, int64_t dilation, int64_t pad_lo, int64_t len) {
  std::vector<double> out(size_t(len), b);
  const int64_t k_n = int64_t(w.size());
  for (int64_t j = 0; j < int64_t(x.size()); ++j)
    for (int64_t k = 0; k < k_n; ++k) {
      const int64_t o = j * stride + k * dilation - pad_lo;
      if (o >= 0 && o < len) out[size_t(o)] += w[size_t(k_n - 1 - k)] * x[size_t(j)];
    }
  return out;
}
}  // namespace

// An InstanceNorm that tracks statistics, trained on one spatial element
// per channel, would make its running variance 0 · 1/0 = NaN, and every
// later inference NaN: refused, as PyTorch refuses it, statistics untouched.
TEST(HostileLayers, InstanceNormRefusesToTrackStatisticsOfOneSpatialElement) {
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    InstanceNorm in = trainmode(InstanceNorm(3, {.track_stats = true})) | dev;
    const std::string m = error_message<DimensionMismatch>([&] { (void)in(rand(1, 3, 4).to(dev)); });
    EXPECT_TRUE(has(m, "InstanceNorm(3") && has(m, "track_stats") && has(m, "1×3×4")) << m;
    EXPECT_EQ(in.running_var.to_vector<double>(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(in.running_mean.to_vector<double>(), (std::vector<double>{0, 0, 0}));
    // Two elements train, and inference stays finite.
    (void)in(rand(2, 3, 4).to(dev));
    for (double v : in.running_var.to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
    const InstanceNorm inference = testmode(in);
    for (double v : inference(rand(1, 3, 4).to(dev)).to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
    // Without running statistics there is nothing to poison: as before.
    (void)(trainmode(InstanceNorm(3)) | dev)(rand(1, 3, 4).to(dev));
    // An empty batch leaves the statistics as they are.
    const std::vector<double> before = in.running_var.to_vector<double>();
    (void)in(rand(5, 3, 0).to(dev));
    EXPECT_EQ(in.running_var.to_vector<double>(), before);
  }
}

// PyTorch's rule, which ConvTranspose states: outpad below the stride or the
// dilation. An outpad of at least the stride (below the dilation) adds rows
// no input reaches: they hold the bias, as in PyTorch.
TEST(HostileLayers, ConvTransposeRunsAnOutpadBelowTheDilation) {
  set_seed(39);
  EXPECT_EQ(outputsize(ConvTranspose({3}, 1, 1, {.dilation = 3, .outpad = 2}), Shape{4, 1, 1}), (Shape{12, 1, 1}));
  const Tensor x = flx::testing::rand64({4, 1, 1}), w = flx::testing::rand64({3, 1, 1}), b = tensor(std::vector<double>{0.25}, {1});
  const ConvTranspose t(w, b, {}, {.dilation = 3, .outpad = 2});
  const std::vector<double> want = conv_transpose_1d(x.to_vector<double>(), w.to_vector<double>(), 0.25, 1, 3, 0, 12);
  EXPECT_EQ(want[11], 0.25);  // a row no input reaches: the bias
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    const Tensor y = (t | dev)(x.to(dev));
    EXPECT_EQ(y.shape(), (Shape{12, 1, 1}));
    flx::testing::expect_values(y, want, 1e-12);
  }
  // With padding on both sides, stride in the other dim, several channels:
  // the values from the definition (dim 0 alone, through a one-dim slice of
  // the weight, is the reference's case), shapes from outputsize, gradients
  // by finite differences.
  const ConvOptions o{.stride = {1, 2}, .pad = {1, 2}, .dilation = {3, 1}, .outpad = {2, 1}};
  const ConvTranspose u({3, 2}, 2, 3, o);
  const Tensor x2 = rand(Float64, Shape{5, 3, 2, 2});
  EXPECT_EQ(f64(u)(x2).shape(), outputsize(u, x2.shape()));
  const Tensor x1 = flx::testing::rand64({5, 1, 1});
  flx::testing::expect_values(ConvTranspose(w, b, {}, {.pad = 2, .dilation = 3, .outpad = 2})(x1),
                              conv_transpose_1d(x1.to_vector<double>(), w.to_vector<double>(), 0.25, 1, 3, 2,
                                                (5 - 1) + 7 + 2 - 4),
                              1e-12);
  using V = std::vector<Tensor>;
  flx::testing::check_gradients(
      [&](const V& v) { return sum(conv_transpose(v[0], v[1], v[2], o) * v[3]); },
      {flx::testing::rand64({4, 3, 2, 1}), flx::testing::rand64({3, 2, 3, 2}), flx::testing::rand64({3}),
       rand(Float64, outputsize(ConvTranspose({3, 2}, 2, 3, o), Shape{4, 3, 2, 1}))},
      1e-6, 1e-6, "outpad at least the stride");
  // And on every device as on the CPU.
  for (const Device& dev : flx::testing::accelerator_devices())
    flx::testing::expect_close((f64(u) | dev)(x2.to(dev)), f64(u)(x2), 1e-10, dev.str());
  // Outpad at the dilation and the stride is still refused, naming the rule.
  EXPECT_TRUE(has(error_message<ArgumentError>([] { ConvTranspose({3}, 1, 1, {.dilation = 3, .outpad = 3}); }),
                  "outpad must be below the stride or the dilation"));
}

// Sizes past int64 from a scale or an upscale factor: typed errors naming
// the layer and the number, not negative extents, SIGFPE or length_error.
TEST(HostileLayers, UpsampleAndPixelShuffleRefuseSizesPastInt64) {
  const std::string up = error_message<ArgumentError>([] { (void)outputsize(Upsample(1e300, "bilinear"), Shape{4, 4, 1, 1}); });
  EXPECT_TRUE(has(up, "Upsample(:bilinear, scale = 1e+300)") && has(up, "scale 1e+300")) << up;
  EXPECT_EQ(error_message<ArgumentError>([] { (void)Upsample(1e300, "bilinear")(rand(4, 4, 1, 1)); }), up);
  const std::string op = error_message<ArgumentError>([] { (void)upsample_bilinear(rand(4, 4, 1, 1), {.scale = {1e300, 1}}); });
  EXPECT_TRUE(has(op, "upsample_bilinear: ") && has(op, "times scale 1e+300")) << op;
  // Each dim fits, their product does not.
  const std::string product = error_message<ArgumentError>(
      [] { (void)outputsize(Upsample(std::pow(2.0, 31), "bilinear"), Shape{4, 4, 1, 1}); });
  EXPECT_TRUE(has(product, "Upsample(") && has(product, "does not fit a 64-bit size")) << product;
  const int64_t r = int64_t(1) << 32;
  const std::string ps = error_message<ArgumentError>([&] { (void)outputsize(PixelShuffle(r), Shape{2, 2, 4, 1}); });
  EXPECT_TRUE(has(ps, "PixelShuffle(4294967296)") && has(ps, "r = 4294967296")) << ps;
  const std::string psop = error_message<ArgumentError>([&] { (void)pixel_shuffle(rand(2, 2, 4, 1), r); });
  EXPECT_TRUE(has(psop, "pixel_shuffle") && has(psop, "r = 4294967296")) << psop;
  EXPECT_THROW((void)PixelShuffle(r)(rand(2, 2, 4, 1)), ArgumentError);
  // r^d fits, r times a spatial size does not.
  const std::string wide = error_message<ArgumentError>(
      [] { (void)outputsize(PixelShuffle(int64_t(1) << 31), Shape{int64_t(1) << 33, int64_t(1) << 31, 1}); });
  EXPECT_TRUE(has(wide, "PixelShuffle(") && has(wide, "does not fit a 64-bit size")) << wide;
}

// Flux's Upsample(scale = 2) is written `{.scale = 2}` (a single number, as
// well as a list).
TEST(HostileLayers, UpsampleTakesOneNumberAsItsScale) {
  const Tensor x = rand(3, 2, 1, 1);
  EXPECT_EQ(Upsample({.scale = 2})(x).to_vector<double>(), Upsample({.scale = {2, 2}})(x).to_vector<double>());
  EXPECT_EQ(Upsample({.mode = "bilinear", .scale = 1.5})(x).shape(), (Shape{4, 3, 1, 1}));
  EXPECT_EQ(shown(Upsample({.scale = 2})), "Upsample(:nearest, scale = 2)");
}

TEST(HostileLayers, ScaleNamesItselfAndTheSizeItRefuses) {
  for (const auto& make : std::vector<std::function<void()>>{[] { Scale(-2); }, [] { Scale(3, -2, relu); }, [] { Scale(0); }}) {
    const std::string m = error_message<ArgumentError>(make);
    EXPECT_EQ(m.rfind("Scale: ", 0), 0u) << m;
    EXPECT_FALSE(has(m, "dims must be non-negative")) << m;
  }
  EXPECT_TRUE(has(error_message<ArgumentError>([] { Scale(3, -2, relu); }), "(3, -2)"));
}

// Shape errors count dims from 0, as everywhere in flx.
TEST(HostileLayers, ConvolutionMessagesCountDimsFromZero) {
  const std::string m = error_message<DimensionMismatch>([] { (void)Conv({3, 3}, 3, 8)(rand(8, 8, 2, 1)); });
  EXPECT_TRUE(has(m, "(dim 2 of the input")) << m;
  const std::string t = error_message<DimensionMismatch>([] { (void)ConvTranspose({3, 3}, 3, 8)(rand(8, 8, 2, 1)); });
  EXPECT_TRUE(has(t, "(dim 2 of the input")) << t;
  const std::string pad =
      error_message<ArgumentError>([] { (void)Conv({3, 3}, 1, 1, {.pad = {0, 0, -1, 0}})(rand(8, 8, 1, 1)); });
  EXPECT_TRUE(has(pad, "for dim 1")) << pad;
}

// Conv nets on the CPU: convolution, pooling, batch normalisation and
// dropout against closed forms and Float64 finite differences; the layers'
// shapes, defaults, printing, modes and errors (Flux's behaviour). The
// other devices are compared with the CPU by the conformance suite.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::shown;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::rand64;
using V = std::vector<Tensor>;

namespace {
Tensor vec(std::vector<double> v, Shape s) { return tensor(v, s); }
}  // namespace

TEST(ConvOps, ConvIsATrueConvolutionAndCrossCorIsNot) {
  // x = 1 2 3 4, w = 1 0 -1 (kernel 3, one channel, one sample)
  const Tensor x = vec({1, 2, 3, 4}, {4, 1, 1}), w = vec({1, 0, -1}, {3, 1, 1});
  flx::testing::expect_values(crosscor(x, w, Tensor()), {1 - 3, 2 - 4});
  flx::testing::expect_values(conv(x, w, Tensor()), {-1 + 3, -2 + 4});  // the kernel flipped
  flx::testing::expect_values(conv(x, w, vec({10}, {1})), {12, 12});
  // Padding, stride and dilation: out = (4 + 1 + 2 - 2·2 - 1) / 2 + 1 = 2
  flx::testing::expect_values(crosscor(x, w, Tensor(), {.stride = 2, .pad = {1, 2}, .dilation = 2}),
                              {0 * 1 + 2 * 0 - 4, 2 * 1 + 4 * 0 - 0});
}

TEST(ConvOps, ShapesFollowFlux) {
  set_seed(1);
  const Tensor x = rand(Float32, {28, 28, 1, 4});
  EXPECT_EQ(Conv({3, 3}, 1, 16, relu, {.pad = 1})(x).shape(), (Shape{28, 28, 16, 4}));
  EXPECT_EQ(Conv({3, 3}, 1, 16, {.stride = 2})(x).shape(), (Shape{13, 13, 16, 4}));
  EXPECT_EQ(Conv({5, 4}, 1, 2, {.pad = SamePad()})(x).shape(), (Shape{28, 28, 2, 4}));
  EXPECT_EQ(Conv({3, 3}, 1, 2, {.stride = 2, .pad = SamePad()})(x).shape(), (Shape{14, 14, 2, 4}));
  EXPECT_EQ(ConvTranspose({3, 3}, 1, 2, {.stride = 2})(x).shape(), (Shape{57, 57, 2, 4}));
  EXPECT_EQ(MaxPool({2, 2})(x).shape(), (Shape{14, 14, 1, 4}));
  EXPECT_EQ(MeanPool({3, 3}, {.stride = 2, .pad = 1})(x).shape(), (Shape{14, 14, 1, 4}));
  EXPECT_EQ(GlobalMeanPool()(x).shape(), (Shape{1, 1, 1, 4}));
  EXPECT_EQ(AdaptiveMaxPool({5, 7})(x).shape(), (Shape{5, 7, 1, 4}));
  EXPECT_EQ(flatten(x).shape(), (Shape{784, 4}));
  // Flux's initialisation: Glorot-uniform over fans prod(k)·in and prod(k)·out, zero bias.
  Conv c({3, 3}, 4, 8);
  EXPECT_EQ(c.weight.shape(), (Shape{3, 3, 4, 8}));
  const double bound = std::sqrt(6.0 / (9 * 4 + 9 * 8));
  EXPECT_LE(maximum(abs(c.weight)).item<double>(), bound);
  EXPECT_GT(maximum(abs(c.weight)).item<double>(), 0.8 * bound);
  EXPECT_EQ(sum(abs(c.bias)).item<double>(), 0);
  EXPECT_EQ(Conv({3}, 4, 8, {.groups = 2}).weight.shape(), (Shape{3, 2, 8}));
  EXPECT_EQ(ConvTranspose({3}, 4, 8, {.groups = 2}).weight.shape(), (Shape{3, 4, 4}));
}

TEST(ConvOps, PoolingClosedForms) {
  // 4×2 image (x fastest), one channel: 1 2 3 4 / 5 6 7 8
  const Tensor x = vec({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2, 1, 1});
  flx::testing::expect_values(maxpool(x, {2, 2}), {6, 8});
  flx::testing::expect_values(meanpool(x, {2, 2}), {3.5, 5.5});
  // Padding counts in the mean's divisor (NNlib, PyTorch's count_include_pad); never wins a max.
  flx::testing::expect_values(meanpool(x, {2, 1}, {.pad = {1, 0}}), {0.5, 2.5, 2, 2.5, 6.5, 4});
  flx::testing::expect_values(maxpool(-x, {2, 1}, {.pad = {1, 0}}), {-1, -2, -4, -5, -6, -8});
  flx::testing::expect_values(GlobalMaxPool()(x), {8});
  flx::testing::expect_values(AdaptiveMeanPool({2, 1})(x), {3.5, 5.5});
}

TEST(ConvOps, GradientsMatchFiniteDifferences) {
  set_seed(3);
  const Tensor none;
  auto weighted = [](const Tensor& y, uint64_t seed) {
    set_seed(seed);
    return sum(y * rand(Float64, y.shape()));
  };
  check_gradients([&](const V& v) { return weighted(conv(v[0], v[1], v[2], {.stride = {2, 1}, .pad = {1, 0, 2, 1}, .groups = 2}), 5); },
                  {rand64({6, 5, 4, 2}), rand64({3, 2, 2, 6}), rand64({6})}, 1e-6, 1e-6, "conv 2-d, groups");
  check_gradients([&](const V& v) { return weighted(crosscor(v[0], v[1], none, {.pad = SamePad(), .dilation = 2}), 6); },
                  {rand64({7, 3, 2}), rand64({3, 3, 2})}, 1e-6, 1e-6, "crosscor 1-d, dilated");
  check_gradients([&](const V& v) { return weighted(crosscor(v[0], v[1], none, {.stride = 2}), 7); },
                  {rand64({4, 4, 3, 2, 1}), rand64({2, 2, 2, 2, 3})}, 1e-6, 1e-6, "crosscor 3-d");
  check_gradients([&](const V& v) { return weighted(conv_transpose(v[0], v[1], v[2], {.stride = 2, .pad = 1}), 8); },
                  {rand64({4, 3, 4, 2}), rand64({3, 3, 3, 4}), rand64({3})}, 1e-6, 1e-6, "conv_transpose");
  check_gradients([&](const V& v) { return weighted(maxpool(v[0], {3, 2}, {.stride = 2, .pad = {1, 0}}), 9); },
                  {rand64({7, 6, 3, 2})}, 1e-6, 1e-6, "maxpool");
  check_gradients([&](const V& v) { return weighted(meanpool(v[0], {2, 3}, {.pad = 1}), 10); },
                  {rand64({6, 5, 2, 2})}, 1e-6, 1e-6, "meanpool");
  check_gradients([&](const V& v) { return weighted(batchnorm(v[0], v[1], v[2], none, none, true), 11); },
                  {rand64({5, 4, 3, 2}), rand64({3}), rand64({3})}, 1e-6, 1e-6, "batchnorm, training");
  check_gradients([&](const V& v) { return weighted(batchnorm(v[0], none, none, none, none, true), 12); },
                  {rand64({3, 6})}, 1e-6, 1e-6, "batchnorm of features, no affine");
  const Tensor mu = rand64({3}), var = rand64({3}, 0.5, 2);
  check_gradients([&](const V& v) { return weighted(batchnorm(v[0], v[1], v[2], mu, var, false), 13); },
                  {rand64({5, 3, 4}), rand64({3}), rand64({3})}, 1e-6, 1e-6, "batchnorm, inference");
  check_gradients([&](const V& v) {
    set_seed(14);  // the same mask at every evaluation
    return weighted(dropout(v[0], 0.3, {1}), 15);
  }, {rand64({4, 5, 2})}, 1e-6, 1e-6, "dropout");
}

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

TEST(ConvLayers, BigModelsPrintAsFluxDisplaysThem) {
  // Seed 004's model: two layers with arrays, one per line, then the totals.
  EXPECT_EQ(shown(Chain(Dense(1, 256, flx::tanh), Dense(256, 1))),
            "Chain(\n"
            "  Dense(1 => 256, tanh),                # 512 parameters\n"
            "  Dense(256 => 1),                      # 257 parameters\n"
            ")                   # Total: 4 arrays, 769 parameters, 3.004 KiB.");
  // BatchNorm's statistics count apart; layers without arrays have no count;
  // a nested Chain with arrays opens its own block.
  const auto cnn = Chain(Conv({3, 3}, 1, 16, relu, {.pad = 1}), BatchNorm(16), MaxPool({2, 2}),
                         Chain(Flatten(), Dense(16 * 14 * 14, 10)));
  EXPECT_EQ(shown(cnn),
            "Chain(\n"
            "  Conv((3, 3), 1 => 16, relu, pad=1),   # 160 parameters\n"
            "  BatchNorm(16),                        # 32 parameters, plus 32\n"
            "  MaxPool((2, 2)),\n"
            "  Chain(\n"
            "    flatten,\n"
            "    Dense(3136 => 10),                  # 31_370 parameters\n"
            "  ),\n"
            ")         # Total: 6 trainable arrays, 31_562 parameters,\n"
            "          # plus 2 non-trainable, 32 parameters, summarysize 123.414 KiB.");  // (31_562 + 32) × 4 bytes
  // Small models keep the one-line form, with Flux's digit groups.
  EXPECT_EQ(shown(Chain(Dense(784, 256, relu), softmax)), "Chain(Dense(784 => 256, relu), softmax)  # 200_960 parameters");
}

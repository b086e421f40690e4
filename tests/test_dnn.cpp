// The functions of include/flx/dnn.hpp (src/ops/dnn_*.cpp) on the CPU:
// convolution, pooling, batch normalisation and dropout against closed
// forms and Float64 finite differences; the shapes and initialisation of
// the layers built on them (Flux's behaviour). The layers themselves:
// tests/layers/test_conv.cpp and test_normalise.cpp; the CPU backend's dnn
// table: test_cpu_dnn.cpp; the other devices: the conformance suite.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::rand64;
using flx::testing::vec;
using V = std::vector<Tensor>;

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

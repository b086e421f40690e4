// The upsampling layers of src/layers/upsample.cpp
// (include/flx/layers/upsample.hpp, Flux's upsample.jl): Upsample (nearest,
// bilinear, trilinear; .scale or .size) and PixelShuffle, against NNlib's
// functions and Flux's docstrings, Float64 finite differences, printing,
// the shape rule and typed errors that name the layer and the shapes. On
// every device in a model: NormUpsampleLayers in test_normalise.cpp; the
// functions under them: tests/test_array_ops.cpp; PyTorch's values:
// test_layer_parity.cpp.
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
using V = std::vector<Tensor>;

// ---- Upsample -----------------------------------------------------------------------

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
                  "size 5 of dim 0 is not a whole multiple of the input's 2 (input shape 2×2×1×1)"));
  EXPECT_EQ(error_message<DimensionMismatch>([] { outputsize(Upsample(2, "bilinear"), Shape{4, 3, 2}); }), three);
}

// ---- PixelShuffle -------------------------------------------------------------------

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

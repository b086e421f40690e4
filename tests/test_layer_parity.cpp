// PyTorch parity of GroupNorm, InstanceNorm, Upsample (nearest; bilinear
// with align_corners), PixelShuffle, ConvTranspose's outpad (below the
// stride, and past it below the dilation) and LPNormPool (PyTorch's
// LPPool2d): outputs and
// the gradients of sum(y .* c) for input and weights against PyTorch's, in
// Float64, read from tests/parity/layer_fixtures.safetensors (written by
// tests/parity/make_layer_fixtures.py with torch, in flx's layout; the
// sizes and options here are the script's). Tolerance: 1e-10 relative
// (Float64 both sides; what differs is the order of the sums).
#include <gtest/gtest.h>

#include <string>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_close;

namespace {

constexpr double kTol = 1e-10;

const State& fixtures() {
  static const State s = load(std::string(FLX_TEST_PARITY_DIR) + "/layer_fixtures.safetensors");
  return s;
}
Tensor fx(const std::string& name) { return fixtures().at(name); }

// y = layer(x), then the gradients of sum(y .* c) for x and the layer,
// against the fixture's.
template <class L, class Grads>
void expect_parity(const std::string& name, const L& layer, Grads check_params) {
  SCOPED_TRACE(name);
  const Tensor x = fx(name + ".x"), c = fx(name + ".c");
  ASSERT_EQ(x.dtype(), Float64);
  expect_close(layer(x), fx(name + ".y"), kTol, name + " output");
  auto [gl, gx] = gradient([&](const L& l, const Tensor& xx) { return sum(l(xx) * c); }, layer, x);
  expect_close(gx, fx(name + ".dx"), kTol, name + " input gradient");
  check_params(gl);
}

}  // namespace

TEST(LayerParity, GroupNormMatchesPyTorch) {
  GroupNorm l(6, 2);
  l.scale = fx("groupnorm.weight");
  l.bias = fx("groupnorm.bias");
  expect_parity("groupnorm", l, [](const GroupNorm& g) {
    expect_close(g.scale, fx("groupnorm.dweight"), kTol, "scale gradient");
    expect_close(g.bias, fx("groupnorm.dbias"), kTol, "bias gradient");
  });
}

TEST(LayerParity, InstanceNormMatchesPyTorch) {
  InstanceNorm l(4, {.affine = true});
  l.scale = fx("instancenorm.weight");
  l.bias = fx("instancenorm.bias");
  expect_parity("instancenorm", l, [](const InstanceNorm& g) {
    expect_close(g.scale, fx("instancenorm.dweight"), kTol, "scale gradient");
    expect_close(g.bias, fx("instancenorm.dbias"), kTol, "bias gradient");
  });
}

TEST(LayerParity, UpsampleAndPixelShuffleMatchPyTorch) {
  auto none = [](const auto&) {};
  expect_parity("upsample_nearest", Upsample({.scale = {2}}), none);
  expect_parity("upsample_bilinear", Upsample({.mode = "bilinear", .size = {7, 5}}), none);  // (W, H)
  expect_parity("pixelshuffle", PixelShuffle(2), none);
}

TEST(LayerParity, ConvTransposeWithOutpadMatchesPyTorch) {
  // PyTorch's weight, dims reversed (kW, kH, out, in), flipped for flx's
  // ConvTranspose (docs/checkpoints.md: torch_to_conv).
  const ConvTranspose l(flip_kernel(fx("convtranspose.weight"), 2), fx("convtranspose.bias"), {},
                        {.stride = {3, 2}, .pad = 1, .outpad = {2, 1}});
  expect_parity("convtranspose", l, [](const ConvTranspose& g) {
    expect_close(flip_kernel(g.weight, 2), fx("convtranspose.dweight"), kTol, "weight gradient");
    expect_close(g.bias, fx("convtranspose.dbias"), kTol, "bias gradient");
  });
}

TEST(LayerParity, LPNormPoolMatchesPyTorchsLPPool) {
  auto none = [](const auto&) {};
  expect_parity("lppool2", LPNormPool(2, {2, 2}), none);
  expect_parity("lppool15", LPNormPool(1.5, {2, 3}, {.stride = PerDim{2, 1}}), none);  // (W, H)
}

// An output_padding of at least the stride (below the dilation): rows no
// input reaches, which hold the bias (issue 39).
TEST(LayerParity, ConvTransposeWithAnOutpadPastTheStrideMatchesPyTorch) {
  const ConvTranspose l(flip_kernel(fx("convtranspose_dilated.weight"), 1), fx("convtranspose_dilated.bias"), {},
                        {.pad = 1, .dilation = 3, .outpad = 2});
  expect_parity("convtranspose_dilated", l, [](const ConvTranspose& g) {
    expect_close(flip_kernel(g.weight, 1), fx("convtranspose_dilated.dweight"), kTol, "weight gradient");
    expect_close(g.bias, fx("convtranspose_dilated.dbias"), kTol, "bias gradient");
  });
}

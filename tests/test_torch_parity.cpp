// PyTorch parity from a committed fixture (tests/data/torch_parity.safetensors,
// written by tests/interop/torch_parity_fixture.py in Float64 and in flx's
// layouts): nn.EmbeddingBag (mean, sum, max; bags as a matrix and as data
// with offsets), nn.Bilinear, and weight_norm of an nn.Linear, their outputs
// and the gradients of sum(y .* c), against flx's EmbeddingBag, Bilinear and
// WeightNorm(Dense). In Float64 to 1e-12 (both sides compute the same sums
// in double, in different orders); in Float32 to 1e-5 relative.
#include <gtest/gtest.h>

#include <string>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_close;

namespace {

const State& fixture() {
  static const State s = load(std::string(FLX_TEST_DATA_DIR) + "/torch_parity.safetensors");
  return s;
}
Tensor at(const std::string& name, DType t) {
  const Tensor x = fixture().at(name);
  return is_floating(x.dtype()) ? x.to(t) : x;
}
double tol(DType t) { return t == Float64 ? 1e-12 : 1e-5; }

class TorchParity : public ::testing::TestWithParam<DType> {};

}  // namespace

TEST_P(TorchParity, EmbeddingBagMatchesPyTorchsForEachMode) {
  const DType t = GetParam();
  const Tensor bags = at("bag.input", t), data = at("bag.data", t), offsets = at("bag.offsets", t);
  ASSERT_EQ(bags.shape(), (Shape{3, 5}));
  ASSERT_EQ(offsets.shape(), (Shape{4}));
  const Tensor c_bags = at("bag.c_input", t), c_ragged = at("bag.c_offsets", t);
  const std::pair<const char*, BagReduction> modes[] = {
      {"mean", BagReduction::Mean}, {"sum", BagReduction::Sum}, {"max", BagReduction::Max}};
  for (const auto& [mode, r] : modes) {
    SCOPED_TRACE(mode);
    const EmbeddingBag eb(at("bag.weight", t), r);
    const std::string p = std::string("bag.") + mode;
    expect_close(eb(bags), at(p + ".y_input", t), tol(t), "bags as columns");
    expect_close(eb(data, offsets), at(p + ".y_offsets", t), tol(t), "data and offsets");
    auto [g] = gradient([&](const EmbeddingBag& m) { return sum(m(bags) * c_bags) + sum(m(data, offsets) * c_ragged); },
                        eb);
    expect_close(g.weight, at(p + ".d_weight", t), tol(t), "weight gradient");
  }
}

TEST_P(TorchParity, BilinearMatchesPyTorchsOutputAndGradients) {
  const DType t = GetParam();
  const Bilinear bl(at("bilinear.weight", t), at("bilinear.bias", t));
  const Tensor x = at("bilinear.x", t), y = at("bilinear.y", t), c = at("bilinear.c", t);
  expect_close(bl(x, y), at("bilinear.out", t), tol(t), "output");
  auto [gm, gx, gy] = gradient([&](const Bilinear& m, const Tensor& a, const Tensor& b) { return sum(m(a, b) * c); },
                               bl, x, y);
  expect_close(gm.weight, at("bilinear.d_weight", t), tol(t), "weight gradient");
  expect_close(gm.bias, at("bilinear.d_bias", t), tol(t), "bias gradient");
  expect_close(gx, at("bilinear.d_x", t), tol(t), "x gradient");
  expect_close(gy, at("bilinear.d_y", t), tol(t), "y gradient");
}

// PyTorch's weight_norm has no epsilon under the square root, flx's (Flux's)
// adds the element type's: |v|² of order 1 moves the result by about eps/2.
TEST_P(TorchParity, WeightNormOfALinearMatchesPyTorchs) {
  const DType t = GetParam();
  const Tensor v = at("weightnorm.v", t);
  WeightNorm wd(Dense(v, at("weightnorm.bias", t)));
  ASSERT_EQ(wd.g.shape(), at("weightnorm.g", t).shape());  // one g per output row, as PyTorch's
  wd.g = at("weightnorm.g", t);
  const Tensor x = at("weightnorm.x", t), c = at("weightnorm.c", t);
  expect_close(wd(x), at("weightnorm.out", t), tol(t), "output");
  auto [gm, gx] = gradient([&](const WeightNorm<Dense>& m, const Tensor& a) { return sum(m(a) * c); }, wd, x);
  expect_close(gm.g, at("weightnorm.d_g", t), tol(t), "g gradient");
  expect_close(gm.layer.weight, at("weightnorm.d_v", t), tol(t), "v gradient");
  expect_close(gm.layer.bias, at("weightnorm.d_bias", t), tol(t), "bias gradient");
  expect_close(gx, at("weightnorm.d_x", t), tol(t), "x gradient");
}

INSTANTIATE_TEST_SUITE_P(Types, TorchParity, ::testing::Values(Float64, Float32),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

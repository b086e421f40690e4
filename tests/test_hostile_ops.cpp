// Ops, losses, optimiser tools and data tools as a hostile user meets them
// (issue 39): exactly right predictions in the focal losses, an infinite
// error in huber_loss, empty batches in batched_mul, counts and paddings
// near INT64_MAX, a model of mixed precisions through destructure, a
// DataLoader's batchsize near INT64_MAX, and a LossScaler restored out of
// range. Computations run on every device (CPU, OpenCL, CUDA where there).
// The layers' cases are in test_hostile_layers.cpp, the element-type
// conversions in test_conversions.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;

namespace {
using V = std::vector<Tensor>;

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}
}  // namespace

// Two leaves of different precisions, the narrow one first.
struct MixedLeaves {
  Tensor a, b;
};
FLX_FUNCTOR(MixedLeaves, a, b)

// A prediction that is exactly right makes Flux's (1 - ŷ - ϵ) equal -ϵ; a
// non-integer power of it was NaN. The base is clamped at 0: the loss is 0
// there and its gradient 0, and elsewhere the formula is Flux's.
TEST(HostileOps, FocalLossesOfExactlyRightPredictionsAreFinite) {
  const Tensor onehot = tensor(std::vector<double>{1, 0, 0, 0, 1, 0}, {3, 2});
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    for (double gamma : {0.5, 1.5, 2.0}) {
      const Tensor p = onehot.to(dev);
      auto [l, g] = withgradient([&](const Tensor& y) { return focal_loss(y, p, {.gamma = gamma}); }, p);
      EXPECT_EQ(l.item<double>(), 0.0) << gamma;
      EXPECT_EQ(std::get<0>(g).to_vector<double>(), std::vector<double>(6, 0.0)) << gamma;
      auto [bl, bg] = withgradient([&](const Tensor& y) { return binary_focal_loss(y, p, {.gamma = gamma}); }, p);
      EXPECT_TRUE(std::isfinite(bl.item<double>())) << gamma;
      EXPECT_GE(bl.item<double>(), 0.0) << gamma;
      EXPECT_TRUE(all_finite(std::get<0>(bg))) << gamma;
    }
  }
  // Away from the clamp: Flux's formula, and its gradient by finite differences.
  const Tensor yhat = tensor(std::vector<double>{0.7, 0.2, 0.1, 0.25, 0.5, 0.25}, {3, 2});
  const double eps = std::numeric_limits<double>::epsilon();
  double want = 0;
  for (int c : {0, 4}) {
    const double q = yhat.to_vector<double>()[size_t(c)] + eps;
    want += -std::pow(1 - q, 0.5) * std::log(q);
  }
  EXPECT_NEAR(focal_loss(yhat, onehot, {.gamma = 0.5}).item<double>(), want / 2, 1e-15);
  flx::testing::check_gradients([&](const V& v) { return focal_loss(v[0], onehot, {.gamma = 0.5}); }, {yhat}, 1e-6,
                                1e-7, "focal_loss");
  flx::testing::check_gradients([&](const V& v) { return binary_focal_loss(v[0], onehot, {.gamma = 0.5}); }, {yhat},
                                1e-6, 1e-7, "binary_focal_loss");
}

// PyTorch's gradient of an infinite error is δ·sign(ŷ - y)/N: the linear
// branch's; the quadratic branch's 0 · Inf must not reach it.
TEST(HostileOps, HuberLossOfAnInfinitePredictionHasTheLinearGradient) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor yhat = tensor(std::vector<double>{inf, 0.5, -inf, -3}, {4}), y = zeros(Float64, Shape{4});
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    auto [l, g] = withgradient([&](const Tensor& p) { return huber_loss(p, y.to(dev), {.delta = 1.5}); }, yhat.to(dev));
    EXPECT_EQ(l.item<double>(), inf);
    EXPECT_EQ(std::get<0>(g).to_vector<double>(), (std::vector<double>{1.5 / 4, 0.5 / 4, -1.5 / 4, -1.5 / 4}));
  }
  // Finite values: Flux's formula on both sides of δ.
  const Tensor p = tensor(std::vector<double>{0.3, -2.5, 1.0, 4}, {4});
  EXPECT_NEAR(huber_loss(p, y, {.agg = Agg::sum}).item<double>(), 0.045 + 2.0 + 0.5 + 3.5, 1e-15);
  flx::testing::check_gradients([&](const V& v) { return huber_loss(v[0], y); }, {p}, 1e-7, 1e-7, "huber_loss");
}

// A batch dim of 1 stretches to 0, as every size-1 dim stretches (flx's
// broadcasting, and PyTorch's): (2, 3, 0) times (3, 5, 1) is (2, 5, 0).
TEST(HostileOps, BatchedMulStretchesABatchOfOneToAnEmptyBatch) {
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    const Tensor a = rand(2, 3, 0).to(dev), b = rand(3, 5, 1).to(dev);
    EXPECT_EQ(batched_mul(a, b).shape(), (Shape{2, 5, 0}));
    EXPECT_EQ(batched_mul(rand(2, 3, 1).to(dev), rand(3, 5, 0).to(dev)).shape(), (Shape{2, 5, 0}));
    EXPECT_EQ(matmul(a, b).shape(), (Shape{2, 5, 0}));
    auto [ga, gb] = gradient([](const Tensor& x, const Tensor& w) { return sum(batched_mul(x, w)); }, a, b);
    EXPECT_EQ(ga.shape(), a.shape());
    EXPECT_EQ(gb.shape(), b.shape());
    EXPECT_EQ(gb.to_vector<double>(), std::vector<double>(15, 0.0));  // a sum over no products
  }
}

// MLUtils' chunk(x, n) makes pieces of cld(len, n): 10 pieces of 1 for any
// n >= 10, however near INT64_MAX.
TEST(HostileOps, ChunkIntoMorePiecesThanElements) {
  const Tensor x = rand(3, 10);
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (int64_t n : {int64_t(10), int64_t(11), big - 1, big}) {
    const std::vector<Tensor> pieces = chunk(x, n);
    ASSERT_EQ(pieces.size(), 10u) << n;
    for (size_t i = 0; i < pieces.size(); ++i)
      EXPECT_EQ(pieces[i].to_vector<double>(), slice(x, 1, int64_t(i), int64_t(i) + 1).to_vector<double>());
  }
  EXPECT_EQ(chunk(x, big - 1, 0).size(), 3u);
  EXPECT_EQ(chunk(x, 4).size(), 4u);  // 3, 3, 3, 1
  EXPECT_EQ(chunk(x, 4)[3].shape(), (Shape{3, 1}));
}

// Every size an array op computes from a padding or a count is checked:
// past int64 it is an ArgumentError naming the op and what overflowed.
TEST(HostileOps, PaddingsAndRepeatCountsPastInt64NameTheOp) {
  const int64_t big = std::numeric_limits<int64_t>::max(), e62 = int64_t(1) << 62, e61 = int64_t(1) << 61;
  struct Case {
    std::string op, part;
    std::function<void()> run;
  };
  const Tensor x = rand(3, 4), v = rand(2);
  const std::vector<Case> cases = {
      {"pad_zeros", "padded by (4611686018427387904, 4611686018427387904)", [&] { (void)pad_zeros(x, {e62, e62}); }},
      {"pad_zeros", "an output of shape", [&] { (void)pad_zeros(x, {e61, e61}); }},
      {"pad_constant", "padded by", [&] { (void)pad_constant(x, {0, 0, big, 1}, 2.0); }},
      {"pad_repeat", "padded by (9223372036854775807, 0)", [&] { (void)pad_repeat(x, {big, 0}); }},
      {"pad_reflect", "padded by", [&] { (void)pad_reflect(x, {big, big}); }},
      {"repeat", "times 9223372036854775807", [&] { (void)repeat(v, {big}); }},
      {"repeat", "an output of shape", [&] { (void)repeat(x, {e61, 2}); }},
      {"upsample_nearest", "times", [&] { (void)upsample_nearest(rand(2, 2, 1, 1), {.scale = {double(e62), 1}}); }},
  };
  for (const auto& c : cases) {
    const std::string m = error_message<ArgumentError>(c.run);
    EXPECT_EQ(m.rfind(c.op + ": ", 0), 0u) << m;
    EXPECT_TRUE(has(m, c.part) && has(m, "does not fit a 64-bit size")) << m;
    EXPECT_FALSE(has(m, "dims must be non-negative")) << m;
  }
  // A padding that fits but could never be allocated is an OutOfMemory, not a std::length_error.
  EXPECT_THROW((void)pad_repeat(x, {e61 / 8, 0}), OutOfMemory);
}

// Optimisers.jl's destructure promotes the flat vector to the widest leaf
// type, so that re(flat) gives every leaf back exactly.
TEST(HostileOps, DestructurePromotesToTheWidestLeafType) {
  const MixedLeaves m{tensor(std::vector<double>{0.5, -2}, {2}).to(Float16),
                      tensor(std::vector<float>{1e5f, 1e-8f}, {2})};
  auto [flat, re] = destructure(m);
  EXPECT_EQ(flat.dtype(), Float32);
  const MixedLeaves back = re(flat);
  EXPECT_EQ(back.a.dtype(), Float16);
  EXPECT_EQ(back.b.to_vector<float>(), (std::vector<float>{1e5f, 1e-8f}));
  EXPECT_EQ(back.a.to_vector<double>(), (std::vector<double>{0.5, -2}));
  // Float16 with BFloat16: Float32, as two tensors promote.
  const MixedLeaves halves{ones(Float16, Shape{2}), full(BFloat16, 3.0, Shape{1})};
  EXPECT_EQ(destructure(halves).first.dtype(), Float32);
  const MixedLeaves wide{ones(Float32, Shape{1}), full(Float64, 1 + 1e-12, Shape{1})};
  EXPECT_EQ(destructure(wide).first.dtype(), Float64);
  EXPECT_EQ(destructure(wide).second(destructure(wide).first).b.item<double>(), 1 + 1e-12);
}

// One partial batch, as MLUtils gives, for any batchsize past the data.
TEST(HostileOps, DataLoaderWithABatchsizeNearInt64MaxGivesOnePartialBatch) {
  const Tensor x = rand(2, 10);
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (int64_t bs : {int64_t(11), big - 5, big}) {
    DataLoader loader(x, {.batchsize = bs});
    EXPECT_EQ(loader.size(), 1) << bs;
    int batches = 0;
    for (const Tensor& b : loader) {
      EXPECT_EQ(b.shape(), (Shape{2, 10})) << bs;
      ++batches;
    }
    EXPECT_EQ(batches, 1) << bs;
    EXPECT_EQ(DataLoader(x, {.batchsize = bs, .partial = false}).size(), 0) << bs;
  }
}

TEST(HostileOps, LossScalerRestoreTakesWhatTheConstructorTakes) {
  LossScaler s;
  const std::string m = error_message<ArgumentError>([&] { s.restore(1e300, 0); });
  EXPECT_TRUE(has(m, "LossScaler::restore") && has(m, "Float32's range") && has(m, "1e+300")) << m;
  EXPECT_THROW(LossScaler({.init_scale = 1e300}), ArgumentError);
  s.restore(65536, 3);
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.good_steps(), 3);
}

TEST(HostileOps, AdamWPrintsWhetherItsDecayIsCoupled) {
  std::ostringstream coupled, decoupled;
  coupled << AdamW(0.001, {0.9, 0.999}, 0.01);
  decoupled << AdamW(0.001, {0.9, 0.999}, 0.01, 1e-8, false);
  EXPECT_EQ(coupled.str(), "AdamW(0.001, (0.9, 0.999), 0.01, 1e-08)");
  EXPECT_EQ(decoupled.str(), "AdamW(0.001, (0.9, 0.999), 0.01, 1e-08, couple=false)");
}

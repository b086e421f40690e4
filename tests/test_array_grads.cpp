// The gradients of the array operations against central finite differences
// in Float64 (as tests/test_autodiff.cpp does for the other ops), first
// order and through a nested gradient call (their rules are made of recorded
// ops, so they differentiate again).
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::rand64;
using V = std::vector<Tensor>;

namespace {
// A fixed random weighting of an op's output: sum(y .* w) has a gradient
// that tells every element apart.
Tensor weigh(const Tensor& y) {
  set_seed(uint64_t(y.numel()) * 7 + 1);
  return sum(y * rand(Float64, y.shape()));
}
}  // namespace

TEST(GradCheck, Concatenation) {
  check_gradients([](const V& v) { return weigh(cat({v[0], v[1]}, 0)); }, {rand64({2, 3}), rand64({1, 3})}, 1e-6, 1e-6,
                  "cat dim 0");
  check_gradients([](const V& v) { return weigh(hcat(v[0], v[1], v[0])); }, {rand64({2, 3}), rand64({2})}, 1e-6, 1e-6,
                  "hcat");
  check_gradients([](const V& v) { return weigh(cat({v[0], v[1]}, 2)); }, {rand64({2, 3}), rand64({2, 3})}, 1e-6, 1e-6,
                  "cat new dim");
  check_gradients([](const V& v) { return weigh(vcat(v[0], v[1].to(Float32))); }, {rand64({2}), rand64({3})}, 1e-4,
                  1e-3, "vcat promoting");
  check_gradients([](const V& v) { return weigh(stack({v[0], v[1], v[0]}, 1)); }, {rand64({2, 2}), rand64({2, 2})}, 1e-6,
                  1e-6, "stack");
}

TEST(GradCheck, Splitting) {
  check_gradients([](const V& v) {
    auto parts = unstack(v[0], 1);
    return weigh(parts[0] * parts[2]) + weigh(parts[1]);
  }, {rand64({3, 3})}, 1e-6, 1e-6, "unstack");
  check_gradients([](const V& v) {
    auto parts = chunk(v[0], 2, 0);
    return weigh(parts[0]) + weigh(square(parts[1]));
  }, {rand64({5, 2})}, 1e-6, 1e-6, "chunk dim 0");
  check_gradients([](const V& v) {
    auto parts = chunk(v[0], 3);
    return weigh(parts[0] * parts[1]) + weigh(parts[2]);
  }, {rand64({2, 6})}, 1e-6, 1e-6, "chunk last (views)");
  check_gradients([](const V& v) { return weigh(selectdim(v[0], 0, 1)) + weigh(selectdim(v[0], 1, 2)); },
                  {rand64({3, 4})}, 1e-6, 1e-6, "selectdim");
  check_gradients([](const V& v) { return weigh(slice(v[0], 1, 1, 3)) + weigh(slice(v[0], 0, 0, 2)); },
                  {rand64({3, 4, 2})}, 1e-6, 1e-6, "slice");
}

TEST(GradCheck, RepeatReverseCumsum) {
  check_gradients([](const V& v) { return weigh(repeat(v[0], {2, 1, 3})); }, {rand64({2, 3})}, 1e-6, 1e-6, "repeat");
  check_gradients([](const V& v) { return weigh(reverse(v[0], 1)); }, {rand64({2, 3, 2})}, 1e-6, 1e-6, "reverse");
  check_gradients([](const V& v) { return weigh(cumsum(v[0], 0)); }, {rand64({5, 2})}, 1e-6, 1e-6, "cumsum dim 0");
  check_gradients([](const V& v) { return weigh(cumsum(v[0], 1)); }, {rand64({2, 7, 2})}, 1e-6, 1e-6, "cumsum middle");
}

TEST(GradCheck, Padding) {
  const Tensor x = rand64({3, 4, 2});
  check_gradients([](const V& v) { return weigh(pad_zeros(v[0], {1, 2, 0, 1})); }, {x}, 1e-6, 1e-6, "pad_zeros");
  check_gradients([](const V& v) { return weigh(pad_constant(v[0], {0, 1, 2, 0}, 3.5)); }, {x}, 1e-6, 1e-6,
                  "pad_constant");
  check_gradients([](const V& v) { return weigh(pad_reflect(v[0], {2, 1, 1, 3})); }, {x}, 1e-6, 1e-6, "pad_reflect");
  check_gradients([](const V& v) { return weigh(pad_symmetric(v[0], {2, 3})); }, {x}, 1e-6, 1e-6, "pad_symmetric");
  check_gradients([](const V& v) { return weigh(pad_repeat(v[0], {2, 1, 0, 3})); }, {x}, 1e-6, 1e-6, "pad_repeat");
  check_gradients([](const V& v) { return weigh(pad_circular(v[0], {1, 3, 4, 2})); }, {x}, 1e-6, 1e-6, "pad_circular");
}

TEST(GradCheck, UpsamplingAndPixelShuffle) {
  const Tensor x = rand64({3, 2, 2, 2});
  check_gradients([](const V& v) { return weigh(upsample_nearest(v[0], {.scale = {2, 3}})); }, {x}, 1e-6, 1e-6,
                  "upsample_nearest");
  check_gradients([](const V& v) { return weigh(upsample_bilinear(v[0], {.scale = {2.5, 2}})); }, {x}, 1e-6, 1e-6,
                  "upsample_bilinear");
  check_gradients([](const V& v) { return weigh(upsample_bilinear(v[0], {.size = {5, 3}, .align_corners = false})); },
                  {x}, 1e-6, 1e-6, "upsample_bilinear, corners not aligned");
  check_gradients([](const V& v) { return weigh(pixel_shuffle(v[0], 2)); }, {rand64({2, 3, 8, 2})}, 1e-6, 1e-6,
                  "pixel_shuffle");
}

TEST(GradCheck, MathStatisticsAndBatchedMul) {
  check_gradients([](const V& v) { return weigh(flx::sin(v[0])); }, {rand64({5}, -3, 3)}, 1e-6, 1e-6, "sin");
  check_gradients([](const V& v) { return weigh(flx::cos(v[0])); }, {rand64({5}, -3, 3)}, 1e-6, 1e-6, "cos");
  check_gradients([](const V& v) { return weigh(flx::erf(v[0])); }, {rand64({5}, -2, 2)}, 1e-6, 1e-6, "erf");
  check_gradients([](const V& v) { return logsumexp(v[0]); }, {rand64({3, 4}, -3, 3)}, 1e-6, 1e-6, "logsumexp");
  check_gradients([](const V& v) { return weigh(logsumexp(v[0], {1})); }, {rand64({3, 4}, -3, 3)}, 1e-6, 1e-6,
                  "logsumexp dims");
  check_gradients([](const V& v) { return var(v[0]); }, {rand64({3, 4})}, 1e-6, 1e-6, "var");
  check_gradients([](const V& v) { return weigh(var(v[0], {0}, false)); }, {rand64({3, 4})}, 1e-6, 1e-6, "var dims");
  check_gradients([](const V& v) { return weigh(flx::std(v[0], {1, 2})); }, {rand64({2, 3, 2})}, 1e-6, 1e-6, "std");
  check_gradients([](const V& v) { return weigh(batched_mul(v[0], v[1])); }, {rand64({2, 3, 2}), rand64({3, 4, 2})},
                  1e-6, 1e-6, "batched_mul");
  check_gradients([](const V& v) { return weigh(batched_mul(v[0], v[1])); }, {rand64({2, 3}), rand64({3, 4, 2})}, 1e-6,
                  1e-6, "batched_mul shared matrix");
}

TEST(GradCheck, SecondOrderThroughTheArrayOps) {
  // A function of an inner gradient: every rule above differentiates again.
  check_gradients([](const V& v) {
    const Tensor &x = v[0], &w = v[1];
    auto [dy] = gradient([&](const Tensor& y) {
      Tensor t = cumsum(square(y) * x, 0) + reverse(flx::sin(y) * x, 1) + slice(pad_reflect(y * x, {1, 1}), 0, 1, 4);
      Tensor c = cat({y * x, flx::erf(y)}, 0);
      Tensor u = upsample_bilinear(reshape(y * x, {3, 2, 1}), {.scale = {2}});
      return sum(t * w) + sum(square(c)) + logsumexp(y * x) + sum(square(u)) + var(y * x) +
             sum(repeat(flx::cos(y), {1, 2}) * slice(x, 1, 0, 1)) + sum(selectdim(y, 0, 2) * selectdim(x, 0, 0));
    }, x * 0.5 + 0.25);
    return sum(dy * dy) + sum(dy * x);
  }, {rand64({3, 2}), rand64({3, 2})}, 1e-5, 1e-6, "second order");
}

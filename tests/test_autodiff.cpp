// Autodiff: every differentiable op against central finite differences in
// Float64, and the structure of what gradient/withgradient return.
#include "autograd.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::expect_values;
using flx::testing::rand64;
using V = std::vector<Tensor>;

namespace {
Tensor pos64(std::initializer_list<int64_t> dims) { return rand64(dims, 0.5, 2.0); }
}  // namespace

TEST(GradCheck, Arithmetic) {
  check_gradients([](const V& v) { return sum(v[0] + v[1]); }, {rand64({3, 4}), rand64({3})}, 1e-6, 1e-6, "+ bcast");
  check_gradients([](const V& v) { return sum(square(v[0] - v[1])); }, {rand64({3, 4}), rand64({1, 4})}, 1e-6, 1e-6, "-");
  check_gradients([](const V& v) { return sum(v[0] * v[1]); }, {rand64({3, 4}), rand64({3, 4})}, 1e-6, 1e-6, "*");
  check_gradients([](const V& v) { return sum(v[0] / v[1]); }, {rand64({2, 3}), pos64({2, 1})}, 1e-6, 1e-6, "/");
  check_gradients([](const V& v) { return sum(-v[0] * v[0]); }, {rand64({4})}, 1e-6, 1e-6, "neg");
  check_gradients([](const V& v) { return sum((v[0] * 3.0 + 1.0) / 2.0 - 0.5); }, {rand64({4})}, 1e-6, 1e-6, "scalar");
  check_gradients([](const V& v) { return sum(2.0 / v[0] + (1.0 - v[0])); }, {pos64({4})}, 1e-6, 1e-6, "scalar left");
  check_gradients([](const V& v) { return sum(v[0] * sum(v[0])); }, {rand64({3})}, 1e-6, 1e-6, "0-dim bcast");
}

TEST(GradCheck, MathFunctions) {
  check_gradients([](const V& v) { return sum(pow(v[0], 3.0)); }, {pos64({5})}, 1e-6, 1e-6, "pow scalar");
  check_gradients([](const V& v) { return sum(pow(v[0], v[1])); }, {pos64({5}), rand64({5})}, 1e-6, 1e-6, "pow");
  check_gradients([](const V& v) { return sum(square(v[0])); }, {rand64({5})}, 1e-6, 1e-6, "square");
  check_gradients([](const V& v) { return sum(sqrt(v[0])); }, {pos64({5})}, 1e-6, 1e-6, "sqrt");
  check_gradients([](const V& v) { return sum(exp(v[0])); }, {rand64({5})}, 1e-6, 1e-6, "exp");
  check_gradients([](const V& v) { return sum(log(v[0])); }, {pos64({5})}, 1e-6, 1e-6, "log");
  check_gradients([](const V& v) { return sum(abs(v[0])); }, {pos64({5}) * -1.0}, 1e-6, 1e-6, "abs");
  check_gradients([](const V& v) { return sum(clamp(v[0], -0.5, 0.5) * v[0]); },
                  {tensor({-0.9, -0.2, 0.1, 0.7})}, 1e-6, 1e-6, "clamp");
  check_gradients([](const V& v) { return sum(maximum(v[0], v[1]) + minimum(v[0], v[1]) * 2.0); },
                  {tensor({1.0, -2.0, 0.5}), tensor({0.0, 1.0, 0.7})}, 1e-6, 1e-6, "max/min");
  check_gradients([](const V& v) { return sum(where(v[0] > 0.0, v[0] * 2.0, v[1])); },
                  {tensor({1.0, -2.0, 0.5}), rand64({3})}, 1e-6, 1e-6, "where");
  check_gradients([](const V& v) { return sum(xlogy(v[0], v[1])); }, {rand64({4}), pos64({4})}, 1e-6, 1e-6, "xlogy");
}

TEST(GradCheck, Activations) {
  // Points away from the kinks so that central differences are exact enough.
  Tensor x = tensor({-1.7, -0.6, 0.3, 1.2, 2.5});
  check_gradients([](const V& v) { return sum(sigmoid(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "sigmoid");
  check_gradients([](const V& v) { return sum(relu(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "relu");
  check_gradients([](const V& v) { return sum(flx::tanh(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "tanh");
  check_gradients([](const V& v) { return sum(gelu(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "gelu");
  check_gradients([](const V& v) { return sum(leakyrelu(v[0], 0.2) * v[0]); }, {x}, 1e-6, 1e-6, "leakyrelu");
  check_gradients([](const V& v) { return sum(elu(v[0], 0.7) * v[0]); }, {x}, 1e-6, 1e-6, "elu");
  check_gradients([](const V& v) { return sum(swish(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "swish");
  check_gradients([](const V& v) { return sum(softplus(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "softplus");
  check_gradients([](const V& v) { return sum(identity(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, "identity");
}

TEST(GradCheck, Reductions) {
  Tensor w = rand64({3, 4, 2});
  check_gradients([&](const V& v) { return sum(sum(v[0], {1}) * sum(w, {1})); }, {rand64({3, 4, 2})}, 1e-6, 1e-6, "sum dims");
  check_gradients([&](const V& v) { return sum(mean(v[0], {0, 2}) * mean(w, {0, 2})); }, {rand64({3, 4, 2})}, 1e-6, 1e-6,
                  "mean dims");
  check_gradients([](const V& v) { return mean(v[0]) * sum(v[0]); }, {rand64({3, 4})}, 1e-6, 1e-6, "mean all");
  check_gradients([](const V& v) { return sum(maximum(v[0], {0}) * 3.0); }, {rand64({4, 3})}, 1e-6, 1e-6, "maximum dims");
  check_gradients([](const V& v) { return maximum(v[0]) - minimum(v[0]) * 2.0; }, {rand64({4, 3})}, 1e-6, 1e-6,
                  "max/min all");
  check_gradients([](const V& v) { return sum(minimum(v[0], {1})); }, {rand64({4, 3})}, 1e-6, 1e-6, "minimum dims");
}

TEST(GradCheck, LinearAlgebraAndShapes) {
  check_gradients([](const V& v) { return sum(square(matmul(v[0], v[1]))); }, {rand64({3, 4}), rand64({4, 2})}, 1e-6,
                  1e-6, "matmul");
  check_gradients([](const V& v) { return sum(square(matmul(v[0], v[1]))); }, {rand64({3, 4}), rand64({4})}, 1e-6, 1e-6,
                  "matvec");
  check_gradients([](const V& v) { return sum(square(matmul(v[0], v[1]))); }, {rand64({2, 3, 2}), rand64({3, 2, 2})},
                  1e-6, 1e-6, "batched");
  check_gradients([](const V& v) { return sum(square(matmul(v[0], v[1]))); }, {rand64({2, 3, 3}), rand64({3, 2})}, 1e-6,
                  1e-6, "batched broadcast");
  Tensor w = rand64({4, 3});
  check_gradients([&](const V& v) { return sum(reshape(v[0], {4, 3}) * w); }, {rand64({2, 6})}, 1e-6, 1e-6, "reshape");
  check_gradients([&](const V& v) { return sum(permutedims(v[0], {1, 0}) * w); }, {rand64({3, 4})}, 1e-6, 1e-6,
                  "permutedims");
  check_gradients([&](const V& v) { return sum(transpose(v[0]) * w); }, {rand64({3, 4})}, 1e-6, 1e-6, "transpose");
  check_gradients([&](const V& v) { return sum(v[0].slice_last(1, 3) * w.slice_last(0, 2)); }, {rand64({4, 3})}, 1e-6,
                  1e-6, "slice_last");
  Tensor idx = tensor(std::vector<int64_t>{2, 0, 2, 1, 3}, {5}), w45 = rand64({4, 5});
  check_gradients([&](const V& v) { return sum(square(gather(v[0], idx)) * w45); }, {rand64({4, 4})}, 1e-6,
                  1e-6, "gather");
  check_gradients([](const V& v) { return sum(square(v[0].to(Float32).to(Float64))); }, {rand64({3})}, 1e-4, 1e-3,
                  "cast");
  check_gradients([](const V& v) { return sum(square(v[0].to(Device::cpu()))); }, {rand64({3})}, 1e-6, 1e-6, "move");
}

TEST(GradCheck, SoftmaxAndLosses) {
  Tensor w = rand64({4, 3});
  check_gradients([&](const V& v) { return sum(softmax(v[0]) * w); }, {rand64({4, 3})}, 1e-6, 1e-6, "softmax");
  check_gradients([&](const V& v) { return sum(softmax(v[0], 1) * w); }, {rand64({4, 3})}, 1e-6, 1e-6, "softmax dim 1");
  check_gradients([&](const V& v) { return sum(logsoftmax(v[0]) * w); }, {rand64({4, 3})}, 1e-6, 1e-6, "logsoftmax");
  Tensor y = onehotbatch({0, 2, 1}, 4).to(Float64);
  check_gradients([&](const V& v) { return mse(v[0], w); }, {rand64({4, 3})}, 1e-6, 1e-6, "mse");
  check_gradients([&](const V& v) { return crossentropy(softmax(v[0]), y); }, {rand64({4, 3})}, 1e-6, 1e-6,
                  "crossentropy");
  check_gradients([&](const V& v) { return logitcrossentropy(v[0], y); }, {rand64({4, 3})}, 1e-6, 1e-6,
                  "logitcrossentropy");
  check_gradients([&](const V& v) { return binarycrossentropy(sigmoid(v[0]), y); }, {rand64({4, 3})}, 1e-6, 1e-6,
                  "binarycrossentropy");
}

struct Pair {
  Tensor a;
  Tensor b;
};
FLX_FUNCTOR(Pair, a, b)

TEST(Autodiff, GradientsAreShapedLikeArguments) {
  Pair p{tensor({1.0, 2.0}), tensor({3.0})};
  Tensor x = tensor({5.0, 7.0});
  auto [gp, gx] = gradient([](const Pair& q, const Tensor& x) { return sum(q.a * x); }, p, x);
  expect_values(gp.a, {5, 7});
  EXPECT_FALSE(gp.b.defined());  // no gradient flowed to b
  expect_values(gx, {1, 2});
  auto [val, grads] = withgradient([](const Tensor& t) { return sum(square(t)); }, x);
  EXPECT_DOUBLE_EQ(val.item<double>(), 74.0);
  expect_values(std::get<0>(grads), {10, 14});
  EXPECT_FALSE(val.requires_grad());
}

TEST(Autodiff, TiedLeavesAccumulate) {
  Tensor w = tensor({2.0});
  Pair tied{w, w};
  auto [g] = gradient([](const Pair& q) { return sum(q.a * 3.0 + q.b * q.b); }, tied);
  expect_values(g.a, {3 + 2 * 2.0});
  EXPECT_EQ(g.a.id(), g.b.id());  // one leaf, one gradient
}

TEST(Autodiff, NothingIsRecordedOutsideGradient) {
  Tensor x = rand(3);
  Tensor y = exp(x) * 2.0 + x;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(detail::is_recording());
  gradient([&](const Tensor& t) {
    EXPECT_TRUE(detail::is_recording());
    Tensor inner = exp(t);
    EXPECT_TRUE(inner.requires_grad());
    EXPECT_FALSE((x * 2.0).requires_grad());  // untracked inputs record nothing
    return sum(inner);
  }, x);
  EXPECT_FALSE(detail::is_recording());
}

TEST(Autodiff, DeepGraphsNeedNoRecursion) {
  Tensor x = tensor({1.0});
  auto [g] = gradient([](const Tensor& t) {
    Tensor h = t;
    for (int i = 0; i < 50000; ++i) h = h + 0.0;
    return sum(h * 2.0);
  }, x);
  expect_values(g, {2});
}

TEST(Autodiff, NonScalarLossIsAnError) {
  EXPECT_THROW(gradient([](const Tensor& t) { return t * 2.0; }, rand(3)), ArgumentError);
}

TEST(Autodiff, Float32GradientsKeepTheirType) {
  auto [g] = gradient([](const Tensor& t) { return sum(t * tensor({1.0, 2.0})); }, ones(2));
  EXPECT_EQ(g.dtype(), Float32);
  expect_values(g, {1, 2});
}

TEST(Autodiff, GraphsAreFreedAfterBackward) {
  // Rules that save their op's output must not keep the graph alive.
  Tensor x = rand64({4, 3}, 0.5, 2.0);
  auto f = [](const Tensor& t) {
    Tensor h = exp(t) + sqrt(t) + sigmoid(t) + flx::tanh(t) + t / (t + 1.0) + pow(t, t) + 2.0 / t;
    return sum(logsoftmax(h) + softmax(h)) + maximum(h) + mean(maximum(h, {0}));
  };
  gradient(f, x);  // warm up
  MemoryStats before = memory_stats(Device::cpu());
  for (int i = 0; i < 5; ++i) gradient(f, x);
  EXPECT_EQ(memory_stats(Device::cpu()).allocations, before.allocations);
  EXPECT_EQ(memory_stats(Device::cpu()).in_use, before.in_use);
}

// ---- nested gradient calls ------------------------------------------------------

TEST(Autodiff, InnerGradientLeavesTheOuterLeavesAlone) {
  // The inner backward pass must not add its d/dx into the outer call's leaf.
  auto [g] = gradient([](const Tensor& x) {
    auto [dy] = gradient([&](const Tensor& y) { return sum(y * x); }, ones(3));
    return sum(x * 0.0) + sum(dy) * 0.0;
  }, full(5.0f, 3));
  expect_values(g, {0, 0, 0});
}

TEST(Autodiff, OuterGradientDifferentiatesThroughTheInnerOne) {
  // F(x) = Σ ∂/∂y Σ exp(y·x) at y = x = Σ x·exp(x²), so F'(x) = exp(x²)(1 + 2x²).
  Tensor x = rand64({4});
  auto [g] = gradient([](const Tensor& x) {
    auto [dy] = gradient([&](const Tensor& y) { return sum(exp(y * x)); }, x);
    return sum(dy);
  }, x);
  std::vector<double> want;
  for (double v : x.to_vector<double>()) want.push_back(std::exp(v * v) * (1 + 2 * v * v));
  expect_values(g, want, 1e-12);
  // The inner call's value is differentiable too: d/dx 2·Σ(1·x) = 2.
  auto [gv] = gradient([](const Tensor& x) {
    auto [v, gr] = withgradient([&](const Tensor& y) { return sum(y * x); }, ones(Float64, 4));
    return v * 2.0;
  }, x);
  expect_values(gv, {2, 2, 2, 2}, 1e-12);
}

TEST(GradCheck, SecondOrderThroughEveryHigherOrderRule) {
  // Float64 finite differences of a function of an inner gradient.
  check_gradients([](const V& v) {
    const Tensor &x = v[0], &w = v[1];
    auto [dy] = gradient([&](const Tensor& y) {
      Tensor t = flx::tanh(y * x) + sigmoid(y) * x + exp(y) / (x + 2.0) + pow(y, 3.0) * x + log(y) * x +
                 sqrt(y) * x + 2.0 / y + abs(y) * x + relu(y) * x + pow(y, x) + where(y > 1.5, y * x, y) +
                 (-y) * (1.0 - x) + square(y - x) + (y * x).to(Float32).to(Float64);
      Tensor row = permutedims(reshape(y, Shape{3, 1}), {1, 0});  // (1, 3) * (3,): broadcasts to (3, 3)
      return sum(t) + sum(square(matmul(w, y))) + mean(y * x) + maximum(y * x) + sum(row * x);
    }, x * 0.5 + 1.5);
    return sum(dy * dy) + sum(dy * x);
  }, {rand64({3}), rand64({3, 3})}, 1e-5, 1e-6, "second order");
}

TEST(Autodiff, NestedGradientThroughAFirstOrderOnlyRuleIsRefused) {
  // softmax's backward is a fused kernel: its gradient cannot be differentiated
  // again, so a result that depends on it is an error, never a wrong number.
  std::string msg = flx::testing::error_message<ArgumentError>([] {
    gradient([](const Tensor& x) {
      auto [dy] = gradient([&](const Tensor& y) { return sum(softmax(y * x) * x); }, ones(Float64, 3));
      return sum(dy);
    }, rand64({3}));
  });
  EXPECT_NE(msg.find("softmax"), std::string::npos) << msg;
  // where the inner gradient does not depend on the outer variable, it is a constant
  auto [g] = gradient([](const Tensor& x) {
    auto [dy] = gradient([](const Tensor& y) { return sum(logsoftmax(y) * tensor({1.0, 2.0, 3.0})); },
                         ones(Float64, 3));
    return sum(dy * x);
  }, rand64({3}));
  expect_values(g, {-1, 0, 1}, 1e-12);
}

TEST(Autodiff, NestedGraphsAreFreed) {
  Tensor x = rand64({3}, 0.5, 2.0);
  auto f = [](const Tensor& x) {
    auto [dy] = gradient([&](const Tensor& y) { return sum(exp(y * x) + sigmoid(y) / x); }, x);
    return sum(dy * dy);
  };
  gradient(f, x);  // warm up
  MemoryStats before = memory_stats(Device::cpu());
  for (int i = 0; i < 5; ++i) gradient(f, x);
  EXPECT_EQ(memory_stats(Device::cpu()).allocations, before.allocations);
  EXPECT_EQ(memory_stats(Device::cpu()).in_use, before.in_use);
}

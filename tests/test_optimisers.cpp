// Optimisers: each rule's steps against the closed forms of Optimisers.jl,
// tied parameters, skipped leaves, bare tensors and chains.
#include <sstream>

#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_values;

namespace {
// Run `steps` updates on x = [x0] with constant gradient g and return x.
template <class R>
double run(const R& rule, double x0, double g, int steps) {
  Tensor x = tensor({x0});
  auto st = setup(rule, x);
  for (int i = 0; i < steps; ++i) update(st, x, tensor({g}));
  return x.item<double>();
}
}  // namespace

TEST(Optimisers, DescentMomentumNesterov) {
  EXPECT_DOUBLE_EQ(run(Descent(0.1), 1.0, 2.0, 1), 1.0 - 0.2);
  // Momentum: v1 = ηg, v2 = ρv1 + ηg
  double eta = 0.01, rho = 0.9, g = 2.0;
  double v1 = eta * g, v2 = rho * v1 + eta * g;
  EXPECT_NEAR(run(Momentum(eta, rho), 1.0, g, 2), 1.0 - v1 - v2, 1e-15);
  // Nesterov: step = -ρ²v + (1+ρ)ηg; v' = ρv - ηg
  double v = 0, x = 1.0;
  for (int i = 0; i < 3; ++i) {
    double step = -rho * rho * v + (1 + rho) * eta * g;
    v = rho * v - eta * g;
    x -= step;
  }
  EXPECT_NEAR(run(Nesterov(eta, rho), 1.0, g, 3), x, 1e-15);
}

TEST(Optimisers, RMSPropAdamAdamW) {
  double eta = 0.001, rho = 0.9, eps = 1e-8, g = 0.5;
  double quad = 0, x = 1.0;
  for (int i = 0; i < 3; ++i) {
    quad = rho * quad + (1 - rho) * g * g;
    x -= g * eta / (std::sqrt(quad) + eps);
  }
  EXPECT_NEAR(run(RMSProp(eta, rho, eps), 1.0, g, 3), x, 1e-14);
  double b1 = 0.9, b2 = 0.999, m = 0, vv = 0, b1t = b1, b2t = b2;
  x = 1.0;
  for (int i = 0; i < 3; ++i) {
    m = b1 * m + (1 - b1) * g;
    vv = b2 * vv + (1 - b2) * g * g;
    x -= m / (1 - b1t) / (std::sqrt(vv / (1 - b2t)) + eps) * eta;
    b1t *= b1;
    b2t *= b2;
  }
  EXPECT_NEAR(run(Adam(eta), 1.0, g, 3), x, 1e-14);
  // AdamW (coupled): x -= η(adam_unit + λx)
  double lambda = 0.1;
  m = vv = 0;
  b1t = b1;
  b2t = b2;
  x = 1.0;
  for (int i = 0; i < 2; ++i) {
    m = b1 * m + (1 - b1) * g;
    vv = b2 * vv + (1 - b2) * g * g;
    double unit = m / (1 - b1t) / (std::sqrt(vv / (1 - b2t)) + eps);
    x -= eta * (unit + lambda * x);
    b1t *= b1;
    b2t *= b2;
  }
  EXPECT_NEAR(run(AdamW(eta, {b1, b2}, lambda), 1.0, g, 2), x, 1e-14);
}

TEST(Optimisers, ClippingWeightDecayAndChains) {
  EXPECT_DOUBLE_EQ(run(OptimiserChain(ClipGrad(0.5), Descent(1.0)), 1.0, 3.0, 1), 0.5);
  EXPECT_DOUBLE_EQ(run(OptimiserChain(WeightDecay(0.1), Descent(1.0)), 1.0, 0.0, 1), 0.9);
  Tensor x = tensor({0.0, 0.0});
  auto st = setup(OptimiserChain(ClipNorm(1.0), Descent(1.0)), x);
  update(st, x, tensor({3.0, 4.0}));  // norm 5 → scaled to norm 1
  expect_values(x, {-0.6, -0.8}, 1e-14);
  std::ostringstream os;
  os << OptimiserChain(ClipGrad(1), Adam());
  EXPECT_EQ(os.str(), "OptimiserChain(ClipGrad(1), Adam(0.001, (0.9, 0.999), 1e-08))");
}

struct Tied {
  Tensor a;
  Tensor b;
  Tensor frozen;
};
FLX_FUNCTOR(Tied, a, b, frozen)

TEST(Optimisers, TiedLeavesOneUpdateWithSummedGradient) {
  Tensor w = tensor({1.0});
  Tied m{w, w, tensor({5.0})};
  auto st = setup(Descent(0.1), m);
  EXPECT_EQ(st.entries().size(), 2u);  // w once, frozen once
  // distinct gradient tensors at the two places are summed
  Tied g{tensor({1.0}), tensor({2.0}), Tensor{}};
  update(st, m, g);
  EXPECT_NEAR(w.item<double>(), 1.0 - 0.1 * 3.0, 1e-15);
  expect_values(m.frozen, {5});  // no gradient: skipped
  // from gradient(): one leaf, so the same gradient tensor sits at both places
  auto [gg] = gradient([](const Tied& t) { return sum(t.a * 2.0 + t.b * 3.0); }, m);
  update(st, m, gg);
  EXPECT_NEAR(w.item<double>(), 0.7 - 0.1 * 5.0, 1e-12);
}

TEST(Optimisers, TrainsADenseLayerAndChecksShapes) {
  set_seed(3);
  Dense d(3, 1);
  Tensor x = rand(3, 64), y = matmul(tensor(std::vector<float>{1, -2, 3}, {1, 3}), x) + 0.5;
  auto st = setup(Adam(0.05), d);
  double first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    auto [l, g] = withgradient([&](const Dense& m) { return mse(m(x), y); }, d);
    if (i == 0) first = l.item<double>();
    last = l.item<double>();
    update(st, d, std::get<0>(g));
  }
  EXPECT_LT(last, first / 100);
  Dense other(3, 2);
  EXPECT_THROW(update(st, other, other), ArgumentError);  // not the model setup() saw
}

TEST(Optimisers, AdjustChangesTheLearningRateKeepingState) {
  Tensor x = tensor({1.0});
  auto st = setup(OptimiserChain(ClipGrad(10), Descent(0.1)), x);
  update(st, x, tensor({1.0}));
  adjust(st, 0.01);
  update(st, x, tensor({1.0}));
  EXPECT_NEAR(x.item<double>(), 1.0 - 0.1 - 0.01, 1e-15);
  std::ostringstream os;
  os << st.rule();
  EXPECT_EQ(os.str(), "OptimiserChain(ClipGrad(10), Descent(0.01))");
}

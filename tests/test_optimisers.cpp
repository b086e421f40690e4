// Optimisers: each rule's steps against the closed forms of Optimisers.jl,
// tied parameters, skipped leaves, bare tensors and chains.
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "adam_reference.hpp"
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

TEST(Optimisers, RMSProp) {
  double eta = 0.001, rho = 0.9, eps = 1e-8, g = 0.5;
  double quad = 0, x = 1.0;
  for (int i = 0; i < 3; ++i) {
    quad = rho * quad + (1 - rho) * g * g;
    x -= g * eta / (std::sqrt(quad) + eps);
  }
  EXPECT_NEAR(run(RMSProp(eta, rho, eps), 1.0, g, 3), x, 1e-14);
}

// Adam's closed form (tests/adam_reference.hpp) with gradients that change at
// every step, through each way flx runs the fused step: in place (Adam
// alone), into a step tensor (Adam in a chain, AdamW), in Float64 and in
// Float32 (the CPU's AVX2 build of the kernel).
TEST(Optimisers, AdamAndAdamWFollowTheirClosedFormWithChangingGradients) {
  using flx::testing::AdamSettings;
  const std::vector<double> x0 = {0.3, -0.7, 1.2, 0.05, -0.4, 0.9, 2.5, -1.5, 0.6};
  const auto grads = flx::testing::changing_gradients(int64_t(x0.size()));
  const AdamSettings adam{.eta = 0.1, .beta1 = 0.8, .beta2 = 0.95, .epsilon = 1e-8};
  AdamSettings coupled = adam, decoupled = adam;
  coupled.lambda = decoupled.lambda = 0.3;
  decoupled.couple = false;
  const std::vector<std::tuple<std::string, std::shared_ptr<OptRule>, AdamSettings>> runs = {
      {"Adam (in place)", std::make_shared<Adam>(0.1, std::pair{0.8, 0.95}, 1e-8), adam},
      {"OptimiserChain(Adam) (a step tensor)", std::make_shared<OptimiserChain>(Adam(0.1, {0.8, 0.95}, 1e-8)), adam},
      {"Adam with the default settings", std::make_shared<Adam>(), AdamSettings{}},
      {"AdamW", std::make_shared<AdamW>(0.1, std::pair{0.8, 0.95}, 0.3), coupled},
      {"AdamW, decoupled", std::make_shared<AdamW>(0.1, std::pair{0.8, 0.95}, 0.3, 1e-8, false), decoupled}};
  // Float32: m, v and x round at each of the 8 steps, 2^-24 relative each.
  for (DType t : {Float64, Float32}) {
    for (const auto& [name, rule, settings] : runs) {
      SCOPED_TRACE(name + " in " + std::string(dtype_name(t)));
      Tensor x = tensor(x0).to(t);
      OptState st(rule->clone(), {{"x", x}});
      for (const auto& g : grads) st.step({{x, tensor(g).to(t)}});
      expect_values(x, flx::testing::adam_closed_form(x0, grads, settings), t == Float64 ? 1e-14 : 2e-6, name);
    }
  }
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

TEST(Optimisers, UpdateRefusesGradientTreesOfAnotherStructure) {
  using flx::testing::error_message;
  std::vector<Dense> m{Dense(2, 2), Dense(2, 2)}, g{Dense(2, 2)};
  auto st = setup(Descent(), m);
  std::string msg = error_message<DimensionMismatch>([&] { update(st, m, g); });
  EXPECT_NE(msg.find("(root)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 elements"), std::string::npos) << msg;
  std::map<std::string, Dense> mm{{"enc", Dense(2, 2)}, {"dec", Dense(2, 2)}}, gm{{"enc", Dense(2, 2)}};
  auto stm = setup(Descent(), mm);
  msg = error_message<ArgumentError>([&] { update(stm, mm, gm); });
  EXPECT_NE(msg.find("dec"), std::string::npos) << msg;
}

// ---- update is all or nothing ------------------------------------------------

namespace {
using Bytes = std::vector<uint8_t>;

Bytes bytes_of(const Tensor& t0) {
  Tensor t = t0.to(Device::cpu());
  Bytes out;
  auto put = [&](const auto& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(v[0]));
  };
  if (t.dtype() == Float64) put(t.to_vector<double>());
  else put(t.to_vector<float>());
  return out;
}
void state_bytes(const RuleState& s, std::vector<Bytes>& out) {
  for (const auto& t : s.tensors) out.push_back(bytes_of(t));
  Bytes sc(s.scalars.size() * sizeof(double));
  if (!sc.empty()) std::memcpy(sc.data(), s.scalars.data(), sc.size());
  out.push_back(sc);
  for (const auto& c : s.children) state_bytes(c, out);
}
// Every byte of every parameter and of every optimiser-state tensor and scalar.
std::vector<Bytes> snapshot(const OptState& st) {
  std::vector<Bytes> out;
  for (const auto& leaf : st.entries()) {
    out.push_back(bytes_of(leaf.param));
    state_bytes(leaf.state, out);
  }
  return out;
}

std::vector<Dense> four_layers() {
  set_seed(11);
  return {Dense(3, 3), Dense(3, 3), Dense(3, 3), Dense(3, 3)};
}
std::vector<Dense> gradient_of(const std::vector<Dense>& m) {
  Tensor x = rand(3, 5);
  auto [g] = gradient([&](const std::vector<Dense>& layers) {
    Tensor h = x;
    for (const auto& d : layers) h = d(h);
    return sum(square(h));
  }, m);
  return g;
}

std::vector<std::pair<std::string, std::shared_ptr<OptRule>>> all_rules() {
  return {{"Descent", std::make_shared<Descent>(0.1)},
          {"Momentum", std::make_shared<Momentum>()},
          {"Nesterov", std::make_shared<Nesterov>()},
          {"RMSProp", std::make_shared<RMSProp>()},
          {"Adam", std::make_shared<Adam>()},
          {"AdamW", std::make_shared<AdamW>(0.001, std::pair{0.9, 0.999}, 0.01)},
          {"ClipNorm,Descent", std::make_shared<OptimiserChain>(ClipNorm(1), Descent())},
          {"ClipNorm,Adam", std::make_shared<OptimiserChain>(ClipNorm(1), Adam())},
          {"Momentum,ClipNorm", std::make_shared<OptimiserChain>(Momentum(), ClipNorm(0.1))},
          {"WeightDecay,ClipNorm(1,Inf),Adam", std::make_shared<OptimiserChain>(WeightDecay(), ClipNorm(1, INFINITY), Adam())}};
}

// One good step (so that every state is non-zero), then a refused one:
// afterwards every byte must be as it was before the refused step.
template <class E>
void expect_refused_unchanged(const std::string& what, const std::function<void(std::vector<Dense>&)>& spoil,
                              const std::string& only = "") {
  for (const auto& [name, rule] : all_rules()) {
    if (name.find(only) == std::string::npos) continue;
    SCOPED_TRACE(what + " with " + name);
    auto m = four_layers();
    auto st = setup(*rule, m);
    update(st, m, gradient_of(m));
    auto before = snapshot(st);
    auto g = gradient_of(m);
    spoil(g);
    EXPECT_THROW(update(st, m, g), E);
    EXPECT_TRUE(snapshot(st) == before) << "a refused update changed the model or the optimiser state";
  }
}
}  // namespace

TEST(Optimisers, RefusedUpdateChangesNothing) {
  // NaN / Inf in the last layer: ClipNorm (which throws on a non-finite norm) refuses it
  expect_refused_unchanged<ArgumentError>("a NaN in the last layer", [](std::vector<Dense>& g) {
    g[3].bias = tensor(std::vector<float>{0.f, NAN, 1.f}, {3});
  }, "ClipNorm");
  expect_refused_unchanged<ArgumentError>("an Inf in the last layer",
                                          [](std::vector<Dense>& g) { g[3].weight = g[3].weight * INFINITY; }, "ClipNorm");
  expect_refused_unchanged<DimensionMismatch>("a wrong shape in the last layer",
                                              [](std::vector<Dense>& g) { g[3].bias = zeros(4); });
  expect_refused_unchanged<TypeError>("an integer gradient in the last layer", [](std::vector<Dense>& g) {
    g[3].bias = tensor(std::vector<int32_t>{1, 2, 3}, {3});
  });
  expect_refused_unchanged<DimensionMismatch>("a gradient tree with a layer missing",
                                              [](std::vector<Dense>& g) { g.pop_back(); });
}

TEST(Optimisers, RefusedUpdateOnAnotherDeviceChangesNothing) {
  auto accel = flx::testing::accelerator_devices();
  if (accel.empty()) GTEST_SKIP() << "no second device (OpenCL through PoCL: POCL_DEVICES=\"pthread pthread\")";
  Device dev = accel.front();
  expect_refused_unchanged<DeviceMismatch>("a gradient on " + dev.str() + " for a CPU model",
                                           [dev](std::vector<Dense>& g) { g[3].weight = g[3].weight.to(dev); });
}

// ---- ClipNorm follows Optimisers.jl: norm(dx, p) from LinearAlgebra ----------

namespace {
// x = 0 after one step of OptimiserChain(ClipNorm(ω, p), Descent(1)): -dx·min(ω/‖dx‖ₚ, 1).
std::vector<double> clipped(const ClipNorm& rule, const std::vector<double>& dx) {
  Tensor x = zeros(Float64, int64_t(dx.size()));
  auto st = setup(OptimiserChain(rule, Descent(1.0)), x);
  update(st, x, tensor(dx));
  auto v = x.to_vector<double>();
  for (double& e : v) e = -e;
  return v;
}
std::vector<double> scaled(const std::vector<double>& dx, double omega, double norm) {
  std::vector<double> out = dx;
  double lambda = std::min(omega / norm, 1.0);
  for (double& e : out) e *= lambda;
  return out;
}
void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-13 * std::max(1.0, std::fabs(want[i]))) << what << " [" << i << "]";
}
}  // namespace

TEST(Optimisers, ClipNormUsesThePNormOfLinearAlgebra) {
  const std::vector<double> dx{3, -4, 0, 1, 0.5};
  const double w = 0.25;
  expect_near_all(clipped(ClipNorm(w, 2), dx), scaled(dx, w, std::sqrt(9 + 16 + 1 + 0.25)), "p = 2");
  expect_near_all(clipped(ClipNorm(w, 1), dx), scaled(dx, w, 8.5), "p = 1");
  expect_near_all(clipped(ClipNorm(w, 3), dx), scaled(dx, w, std::cbrt(27 + 64 + 1 + 0.125)), "p = 3");
  expect_near_all(clipped(ClipNorm(w, INFINITY), dx), scaled(dx, w, 4), "p = Inf: max |x|");
  expect_near_all(clipped(ClipNorm(w, 0), dx), scaled(dx, w, 4), "p = 0: the count of nonzeros");
  double half = std::sqrt(3.0) + 2 + 0 + 1 + std::sqrt(0.5);
  expect_near_all(clipped(ClipNorm(w, 0.5), dx), scaled(dx, w, half * half), "p = 0.5");
  // p = -Inf: min |x|; a zero entry makes the norm 0, so nothing is scaled
  expect_near_all(clipped(ClipNorm(w, -INFINITY), dx), dx, "p = -Inf with a zero");
  const std::vector<double> nz{3, -4, 1, 0.5};
  expect_near_all(clipped(ClipNorm(w, -INFINITY), nz), scaled(nz, w, 0.5), "p = -Inf: min |x|");
  double inv = 1 / 9.0 + 1 / 16.0 + 1 + 4;  // p = -2: (Σ|x|⁻²)^(-1/2)
  expect_near_all(clipped(ClipNorm(w, -2), nz), scaled(nz, w, 1 / std::sqrt(inv)), "p = -2");
  // below the threshold, unchanged
  expect_near_all(clipped(ClipNorm(100, 2), dx), dx, "norm below omega");
  expect_near_all(clipped(ClipNorm(1, 2), {0, 0}), {0, 0}, "zero gradient");
}

TEST(Optimisers, ClipNormNonFiniteNorms) {
  using flx::testing::error_message;
  const std::vector<double> bad{1, NAN, 2};
  for (double p : std::vector<double>{2, 1, 3, 0.5, INFINITY, -INFINITY}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    EXPECT_NE(error_message<ArgumentError>([&] { clipped(ClipNorm(1, p), bad); }).find("not finite"), std::string::npos);
  }
  // p = 0 counts NaN as nonzero: a finite norm, as in LinearAlgebra
  auto counted = clipped(ClipNorm(1, 0), bad);
  EXPECT_NEAR(counted[0], 1.0 / 3, 1e-15);
  // throw = false: λ = min(ω/NaN, 1) is NaN, as in Optimisers.jl
  for (double v : clipped(ClipNorm(1, 2, false), {1, NAN})) EXPECT_TRUE(std::isnan(v));
  auto inf = clipped(ClipNorm(1, 2, false), {1, INFINITY});  // λ = ω/Inf = 0
  EXPECT_EQ(inf[0], 0.0);
  // a Float32 gradient whose squares overflow still has a finite 2-norm
  Tensor x = zeros(2);
  auto st = setup(OptimiserChain(ClipNorm(1), Descent(1.0)), x);
  update(st, x, tensor(std::vector<float>{3e30f, 4e30f}, {2}));
  expect_values(x, {-0.6, -0.8}, 1e-6);
}

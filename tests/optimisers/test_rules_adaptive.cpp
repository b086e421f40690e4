// The rules added after Adam (NAdam, RAdam, AdaMax, OAdam, AdaGrad,
// AdaDelta, AMSGrad, AdaBelief, Lion, Rprop, SignDecay): each against its
// closed form, written here from Optimisers.jl 0.4's src/rules.jl in Float64
// entry by entry, over three steps whose gradients change (sign included),
// on every device;
// and each rule's state through a checkpoint, resuming bit for bit.
#include <cmath>
#include <functional>
#include <sstream>

#include "flx/optimiser_rules.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::TempDir;

namespace {
const std::vector<double> kX0 = {0.3, -0.7, 1.2, 0.05, -0.4, 0.9};
// Three steps' gradients: entries keep, flip or zero their sign between steps.
const std::vector<std::vector<double>> kGrads = {
    {0.5, -0.2, 1.5, 0.0, -3.0, 0.01},
    {0.4, 0.3, -0.5, 0.2, -1.0, 0.02},
    {-0.1, 0.25, -0.7, 0.2, 2.0, 0.0},
};

// One entry's closed form: called with (x, g, t) for t = 1, 2, 3 in order,
// it returns the step to subtract; it keeps its own state.
using Entry = std::function<double(double x, double g, int t)>;

// On every device of the conformance suite, in Float64: the rules' element
// updates are one body (include/flx/backend_rules.h) compiled for each
// backend, so a wrong constant in that body fails here on each of them.
template <class R>
void expect_closed_form(const R& rule, const std::function<Entry()>& make, double tol = 1e-14) {
  std::ostringstream name;
  name << rule;
  SCOPED_TRACE(name.str());
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    Tensor x = tensor(kX0).to(dev);
    auto st = setup(rule, x);
    std::vector<Entry> entries;
    for (size_t i = 0; i < kX0.size(); ++i) entries.push_back(make());
    std::vector<double> expected = kX0;
    for (int t = 1; t <= 3; ++t) {
      const auto& g = kGrads[size_t(t - 1)];
      for (size_t i = 0; i < expected.size(); ++i) expected[i] -= entries[i](expected[i], g[i], t);
      update(st, x, tensor(g).to(dev));
      const auto got = x.to(Device::cpu()).to_vector<double>();
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i])))
            << "step " << t << " entry " << i;
    }
  }
}
double sgn(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }
}  // namespace

TEST(OptimiserRules, NAdamFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-8;
  expect_closed_form(NAdam(eta, {b1, b2}, eps), [=] {
    return [=, m = 0.0, v = 0.0](double, double g, int t) mutable {
      const double bt1 = std::pow(b1, t), bt2 = std::pow(b2, t);  // βᵗ starts at β
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      return (b1 * m / (1 - b1 * bt1) + (1 - b1) * g / (1 - bt1)) / (std::sqrt(v * b2 / (1 - bt2)) + eps) * eta;
    };
  });
}

TEST(OptimiserRules, RAdamFollowsItsClosedFormBeforeRectifying) {
  // In three steps ρₜ = ρ∞ - 2tβ₂ᵗ/(1-β₂ᵗ) stays at most 4 for these β₂
  // (ρ₁ = 1, ρ₂ ≈ 2, ρ₃ ≈ 3 at 0.999; ρ∞ < 4 at 0.5 and 0.3): the
  // momentum-only branch. RAdamRectifiedBranch takes the other.
  for (double b2 : {0.5, 0.999, 0.3}) {
    const double eta = 0.05, b1 = 0.8, eps = 1e-8;
    expect_closed_form(RAdam(eta, {b1, b2}, eps), [=] {
      return [=, m = 0.0, v = 0.0](double, double g, int t) mutable {
        const double bt1 = std::pow(b1, t), bt2 = std::pow(b2, t);
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        const double rinf = 2 / (1 - b2) - 1, rho = rinf - 2 * t * bt2 / (1 - bt2);
        if (rho > 4) {
          const double r = std::sqrt((rho - 4) * (rho - 2) * rinf / ((rinf - 4) * (rinf - 2) * rho));
          return m / (1 - bt1) / (std::sqrt(v / (1 - bt2)) + eps) * eta * r;
        }
        return m / (1 - bt1) * eta;
      };
    });
  }
}

TEST(OptimiserRules, RAdamRectifiedBranch) {
  // ρₜ = ρ∞ - 2tβ₂ᵗ/(1-β₂ᵗ) passes 4 from t = 5 with β₂ = 0.9 (ρ∞ = 19):
  // eight steps of a constant gradient, against the same closed form.
  const double eta = 0.05, b1 = 0.8, b2 = 0.9, eps = 1e-8, g = 0.3;
  Tensor x = tensor({1.0});
  auto st = setup(RAdam(eta, {b1, b2}, eps), x);
  double m = 0, v = 0, xe = 1.0;
  int rectified = 0;
  for (int t = 1; t <= 8; ++t) {
    const double bt1 = std::pow(b1, t), bt2 = std::pow(b2, t);
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double rinf = 2 / (1 - b2) - 1, rho = rinf - 2 * t * bt2 / (1 - bt2);
    if (rho > 4) {
      ++rectified;
      const double r = std::sqrt((rho - 4) * (rho - 2) * rinf / ((rinf - 4) * (rinf - 2) * rho));
      xe -= m / (1 - bt1) / (std::sqrt(v / (1 - bt2)) + eps) * eta * r;
    } else {
      xe -= m / (1 - bt1) * eta;
    }
    update(st, x, tensor({g}));
    EXPECT_NEAR(x.item<double>(), xe, 1e-14) << "step " << t;
  }
  EXPECT_GT(rectified, 0);
  EXPECT_LT(rectified, 8);
}

TEST(OptimiserRules, AdaMaxFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-8;
  expect_closed_form(AdaMax(eta, {b1, b2}, eps), [=] {
    return [=, m = 0.0, u = 0.0](double, double g, int t) mutable {
      m = b1 * m + (1 - b1) * g;
      u = std::max(b2 * u, std::abs(g));
      return eta / (1 - std::pow(b1, t)) * m / (u + eps);
    };
  });
}

TEST(OptimiserRules, OAdamFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.5, b2 = 0.9, eps = 1e-8;
  expect_closed_form(OAdam(eta, {b1, b2}, eps), [=] {
    return [=, m = 0.0, v = 0.0, term = 0.0](double, double g, int t) mutable {
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const double prev = term;
      term = eta * m / (1 - std::pow(b1, t)) / (std::sqrt(v / (1 - std::pow(b2, t))) + eps);
      return 2 * term - prev;
    };
  });
}

TEST(OptimiserRules, AdaGradFollowsItsClosedForm) {
  const double eta = 0.1, eps = 1e-3;  // a large ϵ, to see the accumulator start at it
  expect_closed_form(AdaGrad(eta, eps), [=] {
    return [=, acc = eps](double, double g, int) mutable {
      acc += g * g;
      return g * eta / (std::sqrt(acc) + eps);
    };
  });
}

TEST(OptimiserRules, AdaDeltaFollowsItsClosedForm) {
  const double rho = 0.9, eps = 1e-6;
  expect_closed_form(AdaDelta(rho, eps), [=] {
    return [=, acc = 0.0, dacc = 0.0](double, double g, int) mutable {
      acc = rho * acc + (1 - rho) * g * g;
      const double step = g * std::sqrt(dacc + eps) / std::sqrt(acc + eps);
      dacc = rho * dacc + (1 - rho) * step * step;
      return step;
    };
  });
}

TEST(OptimiserRules, AMSGradFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-4;
  expect_closed_form(AMSGrad(eta, {b1, b2}, eps), [=] {
    return [=, m = eps, v = eps, vhat = eps](double, double g, int) mutable {
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      vhat = std::max(vhat, v);
      return eta * m / (std::sqrt(vhat) + eps);
    };
  });
}

TEST(OptimiserRules, AdaBeliefFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-10;
  expect_closed_form(AdaBelief(eta, {b1, b2}, eps), [=] {
    return [=, m = 0.0, s = 0.0](double, double g, int t) mutable {
      m = b1 * m + (1 - b1) * g;
      s = b2 * s + (1 - b2) * (g - m) * (g - m) + eps;
      return eta * m / (1 - std::pow(b1, t)) / (std::sqrt(s / (1 - std::pow(b2, t))) + eps);
    };
  });
}

TEST(OptimiserRules, LionFollowsItsClosedForm) {
  const double eta = 0.05, b1 = 0.9, b2 = 0.99;
  expect_closed_form(Lion(eta, {b1, b2}), [=] {
    return [=, m = 0.0](double, double g, int) mutable {
      m = b2 * g + (1 - b2) * m;  // Optimisers.jl 0.4's order, the new m below
      return eta * sgn((b2 - b1) * g + b1 * m);
    };
  });
}

TEST(OptimiserRules, RpropFollowsItsClosedForm) {
  // γ bounds close enough to the start that the clamps act within 3 steps.
  const double eta = 0.01, l1 = 0.5, l2 = 1.2, gmin = 0.006, gmax = 0.013;
  expect_closed_form(Rprop(eta, {l1, l2}, {gmin, gmax}), [=] {
    return [=, gprev = 0.0, size = eta](double, double g, int) mutable {
      const double p = gprev * g;
      size = p > 0 ? std::min(size * l2, gmax) : p < 0 ? std::max(size * l1, gmin) : size;
      gprev = p < 0 ? 0.0 : g;
      return size * sgn(gprev);
    };
  });
}

TEST(OptimiserRules, SignDecayAloneStepsByTheGradientPlusLambdaSignX) {
  const double lambda = 0.01;
  expect_closed_form(SignDecay(lambda), [=] {
    return [=](double x, double g, int) { return g + lambda * sgn(x); };
  });
  // In a chain before Descent, the decay is scaled by η too.
  const double eta = 0.1;
  expect_closed_form(OptimiserChain(SignDecay(lambda), Descent(eta)), [=] {
    return [=](double x, double g, int) { return eta * (g + lambda * sgn(x)); };
  });
}

TEST(OptimiserRules, AccumGradStepsWithTheMeanEveryNthGradient) {
  // Alone: x -= mean of the last n gradients on every n-th step, else no step.
  expect_closed_form(AccumGrad(3), [=] {
    return [sum = 0.0](double, double g, int t) mutable {
      sum += g;
      return t == 3 ? sum / 3 : 0.0;
    };
  });
  // First in a chain: the later rules see the mean, and only then (Descent's
  // state-free step; Momentum's velocity moves once every 2 steps).
  const double eta = 0.1, rho = 0.9;
  expect_closed_form(OptimiserChain(AccumGrad(2), Momentum(eta, rho)), [=] {
    return [=, sum = 0.0, v = 0.0](double, double g, int t) mutable {
      sum += g;
      if (t % 2) return 0.0;
      v = rho * v + eta * sum / 2;
      sum = 0;
      return v;
    };
  });
  EXPECT_THROW(AccumGrad(0), ArgumentError);
}

TEST(OptimiserRules, DefaultsAreOptimisersJls) {
  auto text = [](const OptRule& r) {
    std::ostringstream os;
    os << r;
    return os.str();
  };
  EXPECT_EQ(text(NAdam()), "NAdam(0.001, (0.9, 0.999), 1e-08)");
  EXPECT_EQ(text(RAdam()), "RAdam(0.001, (0.9, 0.999), 1e-08)");
  EXPECT_EQ(text(AdaMax()), "AdaMax(0.001, (0.9, 0.999), 1e-08)");
  EXPECT_EQ(text(OAdam()), "OAdam(0.001, (0.5, 0.9), 1e-08)");
  EXPECT_EQ(text(AdaGrad()), "AdaGrad(0.1, 1e-08)");
  EXPECT_EQ(text(AdaDelta()), "AdaDelta(0.9, 1e-08)");
  EXPECT_EQ(text(AMSGrad()), "AMSGrad(0.001, (0.9, 0.999), 1e-08)");
  EXPECT_EQ(text(AdaBelief()), "AdaBelief(0.001, (0.9, 0.999), 1e-16)");
  EXPECT_EQ(text(Lion()), "Lion(0.001, (0.9, 0.999))");
  EXPECT_EQ(text(Rprop()), "Rprop(0.001, (0.5, 1.2), (1e-06, 50))");
  EXPECT_EQ(text(SignDecay()), "SignDecay(0.001)");
  EXPECT_EQ(text(OptimiserChain(AccumGrad(4), Adam())), "OptimiserChain(AccumGrad(4), Adam(0.001, (0.9, 0.999), 1e-08))");
}

// Each rule's state through a checkpoint file: 3 steps, save, load into a
// fresh state, 2 more steps == 5 steps straight, bit for bit (Float32).
TEST(OptimiserRules, EveryRuleStateResumesFromACheckpointExactly) {
  TempDir tmp;
  const std::vector<std::shared_ptr<OptRule>> rules = {
      std::make_shared<NAdam>(0.01), std::make_shared<RAdam>(0.01, Beta{0.8, 0.9}), std::make_shared<AdaMax>(0.01),
      std::make_shared<OAdam>(0.01), std::make_shared<AdaGrad>(), std::make_shared<AdaDelta>(),
      std::make_shared<AMSGrad>(0.01), std::make_shared<AdaBelief>(0.01), std::make_shared<Lion>(0.01),
      std::make_shared<Rprop>(0.01), std::make_shared<SignDecay>(0.01),
      std::make_shared<OptimiserChain>(SignDecay(0.01), NAdam(0.01)),
      std::make_shared<OptimiserChain>(AccumGrad(2), Adam(0.01))};
  set_seed(9);
  std::vector<Tensor> grads;
  for (int k = 0; k < 5; ++k) grads.push_back(randn(4, 3) * (k % 2 ? 0.1 : 1.0));
  for (const auto& rule : rules) {
    std::ostringstream name;
    name << *rule;
    SCOPED_TRACE(name.str());
    set_seed(4);
    const Tensor x0 = randn(4, 3);
    auto dup = [](const Tensor& t) { return tensor(t.to_vector<float>(), t.shape()); };
    Tensor a = dup(x0), b = dup(x0);
    OptState sa(rule->clone(), {{"w", a}});
    for (int k = 0; k < 5; ++k) sa.step({{a, grads[size_t(k)]}});

    OptState sb(rule->clone(), {{"w", b}});
    for (int k = 0; k < 3; ++k) sb.step({{b, grads[size_t(k)]}});
    save(tmp / "opt.safetensors", sb);
    Tensor c = dup(b);
    OptState sc(rule->clone(), {{"w", c}});
    loadmodel(sc, load(tmp / "opt.safetensors"));
    for (int k = 3; k < 5; ++k) sc.step({{c, grads[size_t(k)]}});
    EXPECT_EQ(c.to_vector<float>(), a.to_vector<float>());
  }
}

// Optimisers.jl's _eps: for Float16 parameters ϵ is at least Float16(1e-7)
// (1e-8 would round to 0 there), so a zero gradient steps by 0, not NaN.
TEST(OptimiserRules, Float16KeepsEpsilonAboveZero) {
  const std::vector<std::shared_ptr<OptRule>> rules = {
      std::make_shared<NAdam>(), std::make_shared<RAdam>(), std::make_shared<AdaMax>(), std::make_shared<OAdam>(),
      std::make_shared<AdaDelta>(), std::make_shared<AdaBelief>()};
  for (const auto& rule : rules) {
    std::ostringstream name;
    name << *rule;
    Tensor x = tensor({0.5, -0.25}).to(Float16);
    OptState st(rule->clone(), {{"x", x}});
    st.step({{x, zeros(Float16, {2})}});
    EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0.5, -0.25})) << name.str();
  }
}

// The rest of Optimisers.jl 0.4's rules, next to those of optimisers.hpp:
//
//   auto state = setup(NAdam(), model);
//   auto chain = setup(OptimiserChain(SignDecay(1e-3), Lion(1e-4)), model);
//
// Defaults and formulas are Optimisers.jl's (src/rules.jl). Each stateful
// rule's element update is written once, in include/flx/backend_rules.h,
// and every backend compiles that body (src/optimisers/rules_adaptive.cpp
// computes the host scalars). States save and load in checkpoints as the
// other rules' do.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <memory>
#include <ostream>
#include <utility>

#include "flx/optimisers.hpp"

namespace flx {

#include "flx/optimiser_rule_macros.inc"
// βᵗ below is the state's running power of β, starting at β (step 1).
using Beta = std::pair<double, double>;

// Nesterov-accelerated Adam: η·(β₁m/(1-β₁β₁ᵗ) + (1-β₁)dx/(1-β₁ᵗ)) / (√(vβ₂/(1-β₂ᵗ)) + ϵ).
struct FLX_API NAdam : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit NAdam(double eta = 0.001, Beta beta = {0.9, 0.999}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(NAdam)
};
// Rectified Adam: Adam's step times the rectification r once ρₜ > 4, else
// the bias-corrected momentum alone.
struct FLX_API RAdam : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit RAdam(double eta = 0.001, Beta beta = {0.9, 0.999}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(RAdam)
};
// Adam with the infinity norm: u = max(β₂u, |dx|); η/(1-β₁ᵗ)·m/(u+ϵ).
struct FLX_API AdaMax : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit AdaMax(double eta = 0.001, Beta beta = {0.9, 0.999}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(AdaMax)
};
// Optimistic Adam: 2·term - previous term, term being Adam's step.
struct FLX_API OAdam : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit OAdam(double eta = 0.001, Beta beta = {0.5, 0.9}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(OAdam)
};
// acc (starting at ϵ) += dx²; η·dx/(√acc + ϵ).
struct FLX_API AdaGrad : OptRule {
  double eta, epsilon;
  explicit AdaGrad(double eta = 0.1, double epsilon = 1e-8) : eta(eta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(AdaGrad)
};
// No learning rate (adjust(state, eta) leaves it alone, as Optimisers.jl's).
struct FLX_API AdaDelta : OptRule {
  double rho, epsilon;
  explicit AdaDelta(double rho = 0.9, double epsilon = 1e-8) : rho(rho), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_METHODS(AdaDelta)
};
// m, v and v̂ = max(v̂, v) all start at ϵ; η·m/(√v̂ + ϵ), no bias correction.
struct FLX_API AMSGrad : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit AMSGrad(double eta = 0.001, Beta beta = {0.9, 0.999}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(AMSGrad)
};
// Adam with s = β₂s + (1-β₂)(dx-m)² + ϵ in place of v.
struct FLX_API AdaBelief : OptRule {
  double eta;
  Beta beta;
  double epsilon;
  explicit AdaBelief(double eta = 0.001, Beta beta = {0.9, 0.999}, double epsilon = 1e-16)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(AdaBelief)
};
// As Optimisers.jl 0.4 writes it: m = β₂dx + (1-β₂)m, then
// η·sign((β₂-β₁)dx + β₁m) with the new m.
struct FLX_API Lion : OptRule {
  double eta;
  Beta beta;
  explicit Lion(double eta = 0.001, Beta beta = {0.9, 0.999}) : eta(eta), beta(beta) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(Lion)
};
// Resilient backpropagation: a step size per entry (starting at η) grows by
// ell.second while the gradient keeps its sign, shrinks by ell.first when it
// flips, kept within gamma; the step is the size times the gradient's sign
// (0 just after a flip).
struct FLX_API Rprop : OptRule {
  double eta;
  std::pair<double, double> ell, gamma;
  explicit Rprop(double eta = 1e-3, std::pair<double, double> ell = {0.5, 1.2},
                 std::pair<double, double> gamma = {1e-6, 50.0})
      : eta(eta), ell(ell), gamma(gamma) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(Rprop)
};
// dx + λ·sign(x); alone it steps x -= dx + λ·sign(x) (put it before the
// rule with the learning rate in a chain to scale it).
struct FLX_API SignDecay : OptRule {
  double lambda;
  explicit SignDecay(double lambda = 1e-3) : lambda(lambda) {}
  FLX_RULE_METHODS(SignDecay)
};
// Optimisers.jl's AccumGrad(n): averages n gradients and passes the mean
// on every n-th step; the steps between change nothing (a chain's later
// rules are skipped, as Optimisers.jl's `nothing`). Put it first in an
// OptimiserChain: OptimiserChain(AccumGrad(4), Adam()). State: the running
// mean, and the count (1 to n) in scalars.
struct FLX_API AccumGrad : OptRule {
  int64_t n;
  explicit AccumGrad(int64_t n);
  FLX_RULE_METHODS(AccumGrad)
};
#undef FLX_RULE_METHODS
#undef FLX_RULE_ETA
#undef FLX_RULE_IN_PLACE

}  // namespace flx

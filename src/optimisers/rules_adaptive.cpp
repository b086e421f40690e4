// The rest of Optimisers.jl 0.4's rules (src/rules.jl): NAdam, RAdam,
// AdaMax, OAdam, AdaGrad, AdaDelta, AMSGrad, AdaBelief, Lion, Rprop, SignDecay
// and AccumGrad. The stateful ones' element updates are
// include/flx/backend_rules.h's, which every backend compiles; here are
// their host scalars (βᵗ, the step count, in RuleState::scalars, so
// checkpoints save them) and the parameters each body reads.
#include <algorithm>
#include <cmath>

#include "flx/error.hpp"

#include "flx/ops.hpp"
#include "flx/optimiser_rules.hpp"
#include "ops/ops_internal.hpp"
#include "optimisers/rule_step.hpp"

namespace flx {

namespace {
using detail::RuleStep;
Tensor filled_like(const Tensor& x, double v) {
  Tensor z = empty(x.dtype(), x.shape(), x.device());
  ops::fill(z, v);
  return z;
}
Tensor zeros_like(const Tensor& x) { return filled_like(x, 0.0); }
// Optimisers.jl's _eps(T, ϵ): ϵ itself, but at least Float16(1e-7) for
// Float16 parameters (a smaller nonzero ϵ rounds to 0 there), so the
// denominators stay nonzero. States that start at ϵ start at ϵ itself.
double eps_for(const Tensor& x, double e) { return x.dtype() == Float16 && e != 0 ? std::max(e, 1e-7) : e; }
void print_beta(std::ostream& os, const Beta& b) { os << "(" << b.first << ", " << b.second << ")"; }
// State for the rules with m, v and βᵗ (scalars {β₁ᵗ, β₂ᵗ}, starting at β).
RuleState two_moments(const Tensor& x, const Beta& beta) {
  return {{zeros_like(x), zeros_like(x)}, {beta.first, beta.second}, {}};
}
void advance(RuleState& st, const Beta& beta) {
  st.scalars[0] *= beta.first;
  st.scalars[1] *= beta.second;
}

RuleStep next_step(const NAdam& r, RuleState& st, const Tensor& x) {
  const double bt1 = st.scalars[0], bt2 = st.scalars[1], b1 = r.beta.first, b2 = r.beta.second;
  advance(st, r.beta);
  return {FLX_RULE_NADAM,
          "NAdam's step",
          {r.eta, b1, b2, eps_for(x, r.epsilon), b1 / (1 - b1 * bt1), (1 - b1) / (1 - bt1), b2 / (1 - bt2)}};
}
// scalars {β₁ᵗ, β₂ᵗ, t}: ρₜ = ρ∞ - 2tβ₂ᵗ/(1-β₂ᵗ) decides the branch on the host.
RuleStep next_step(const RAdam& r, RuleState& st, const Tensor& x) {
  const double bt1 = st.scalars[0], bt2 = st.scalars[1], t = st.scalars[2];
  const double rho_inf = 2 / (1 - r.beta.second) - 1;
  const double rho = rho_inf - 2 * t * bt2 / (1 - bt2);
  const bool rectified = rho > 4;
  const double scale = rectified ? r.eta * std::sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
                                 : r.eta / (1 - bt1);
  advance(st, r.beta);
  st.scalars[2] = t + 1;
  return {FLX_RULE_RADAM,
          "RAdam's step",
          {scale, r.beta.first, r.beta.second, eps_for(x, r.epsilon), 1 - bt1, 1 - bt2, rectified ? 1.0 : 0.0}};
}
RuleStep next_step(const AdaMax& r, RuleState& st, const Tensor& x) {
  const double bt1 = st.scalars[0];
  advance(st, r.beta);
  return {FLX_RULE_ADAMAX, "AdaMax's step", {r.eta / (1 - bt1), r.beta.first, r.beta.second, eps_for(x, r.epsilon)}};
}
RuleStep next_step(const OAdam& r, RuleState& st, const Tensor& x) {
  const double bt1 = st.scalars[0], bt2 = st.scalars[1];
  advance(st, r.beta);
  return {FLX_RULE_OADAM, "OAdam's step", {r.eta, r.beta.first, r.beta.second, eps_for(x, r.epsilon), 1 - bt1, 1 - bt2}};
}
RuleStep next_step(const AdaGrad& r, RuleState&, const Tensor& x) {
  return {FLX_RULE_ADAGRAD, "AdaGrad's step", {r.eta, eps_for(x, r.epsilon)}};
}
RuleStep next_step(const AdaDelta& r, RuleState&, const Tensor& x) {
  return {FLX_RULE_ADADELTA, "AdaDelta's step", {r.rho, eps_for(x, r.epsilon), 1 - r.rho}};
}
RuleStep next_step(const AMSGrad& r, RuleState&, const Tensor& x) {
  return {FLX_RULE_AMSGRAD, "AMSGrad's step", {r.eta, r.beta.first, r.beta.second, eps_for(x, r.epsilon)}};
}
RuleStep next_step(const AdaBelief& r, RuleState& st, const Tensor& x) {
  const double bt1 = st.scalars[0], bt2 = st.scalars[1];
  advance(st, r.beta);
  return {FLX_RULE_ADABELIEF,
          "AdaBelief's step",
          {r.eta, r.beta.first, r.beta.second, eps_for(x, r.epsilon), 1 - bt1, 1 - bt2}};
}
RuleStep next_step(const Lion& r, RuleState&, const Tensor&) {
  return {FLX_RULE_LION, "Lion's step", {r.eta, r.beta.first, r.beta.second}};
}
RuleStep next_step(const Rprop& r, RuleState&, const Tensor&) {
  return {FLX_RULE_RPROP, "Rprop's step", {r.ell.first, r.ell.second, r.gamma.first, r.gamma.second}};
}
}  // namespace

// ---- NAdam ------------------------------------------------------------------------
RuleState NAdam::init(const Tensor& x) const { return two_moments(x, beta); }
FLX_FUSED_RULE(NAdam)
void NAdam::print(std::ostream& os) const {
  os << "NAdam(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- RAdam ------------------------------------------------------------------------
// scalars {β₁ᵗ, β₂ᵗ, t}, t starting at 1.
RuleState RAdam::init(const Tensor& x) const {
  RuleState st = two_moments(x, beta);
  st.scalars.push_back(1);
  return st;
}
FLX_FUSED_RULE(RAdam)
void RAdam::print(std::ostream& os) const {
  os << "RAdam(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaMax -----------------------------------------------------------------------
RuleState AdaMax::init(const Tensor& x) const { return two_moments(x, beta); }
FLX_FUSED_RULE(AdaMax)
void AdaMax::print(std::ostream& os) const {
  os << "AdaMax(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- OAdam ------------------------------------------------------------------------
// tensors {m, v, term}: term is the last step's Adam term.
RuleState OAdam::init(const Tensor& x) const {
  RuleState st = two_moments(x, beta);
  st.tensors.push_back(zeros_like(x));
  return st;
}
FLX_FUSED_RULE(OAdam)
void OAdam::print(std::ostream& os) const {
  os << "OAdam(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaGrad ----------------------------------------------------------------------
RuleState AdaGrad::init(const Tensor& x) const { return {{filled_like(x, epsilon)}, {}, {}}; }
FLX_FUSED_RULE(AdaGrad)
void AdaGrad::print(std::ostream& os) const { os << "AdaGrad(" << eta << ", " << epsilon << ")"; }

// ---- AdaDelta ---------------------------------------------------------------------
RuleState AdaDelta::init(const Tensor& x) const { return {{zeros_like(x), zeros_like(x)}, {}, {}}; }
FLX_FUSED_RULE(AdaDelta)
void AdaDelta::print(std::ostream& os) const { os << "AdaDelta(" << rho << ", " << epsilon << ")"; }

// ---- AMSGrad ----------------------------------------------------------------------
RuleState AMSGrad::init(const Tensor& x) const {
  return {{filled_like(x, epsilon), filled_like(x, epsilon), filled_like(x, epsilon)}, {}, {}};
}
FLX_FUSED_RULE(AMSGrad)
void AMSGrad::print(std::ostream& os) const {
  os << "AMSGrad(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaBelief --------------------------------------------------------------------
RuleState AdaBelief::init(const Tensor& x) const { return two_moments(x, beta); }
FLX_FUSED_RULE(AdaBelief)
void AdaBelief::print(std::ostream& os) const {
  os << "AdaBelief(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- Lion -------------------------------------------------------------------------
RuleState Lion::init(const Tensor& x) const { return {{zeros_like(x)}, {}, {}}; }
FLX_FUSED_RULE(Lion)
void Lion::print(std::ostream& os) const {
  os << "Lion(" << eta << ", ";
  print_beta(os, beta);
  os << ")";
}

// ---- Rprop ------------------------------------------------------------------------
// tensors {g, η}: the last gradient kept (0 after a sign flip) and the
// step sizes, starting at eta.
RuleState Rprop::init(const Tensor& x) const { return {{zeros_like(x), filled_like(x, eta)}, {}, {}}; }
FLX_FUSED_RULE(Rprop)
void Rprop::print(std::ostream& os) const {
  os << "Rprop(" << eta << ", (" << ell.first << ", " << ell.second << "), (" << gamma.first << ", " << gamma.second
     << "))";
}

// ---- SignDecay --------------------------------------------------------------------
RuleState SignDecay::init(const Tensor&) const { return {}; }
Tensor SignDecay::apply(RuleState&, const Tensor& x, const Tensor& dx) const { return dx + sign(x) * lambda; }
void SignDecay::print(std::ostream& os) const { os << "SignDecay(" << lambda << ")"; }

// ---- AccumGrad --------------------------------------------------------------------
AccumGrad::AccumGrad(int64_t n) : n(n) {
  FLX_CHECK(n > 0, ArgumentError, "AccumGrad must accumulate at least one gradient (got n = ", n, ")");
}
RuleState AccumGrad::init(const Tensor& x) const { return {{zeros_like(x)}, {1}, {}}; }
// The mean so far, and the step (the mean) on the n-th call; an undefined
// tensor (no step) on the others.
Tensor AccumGrad::apply(RuleState& st, const Tensor& x, const Tensor& dx) const {
  double& counter = st.scalars[0];
  const RuleStep mean{FLX_RULE_ACCUMGRAD, "AccumGrad's mean", {double(n), counter == 1 ? 1.0 : 0.0}};
  Tensor step = detail::run_rule(mean, st.tensors, x, dx, false);
  if (counter >= double(n)) {
    counter = 1;
    return step;
  }
  counter += 1;
  return Tensor();
}
void AccumGrad::print(std::ostream& os) const { os << "AccumGrad(" << n << ")"; }

}  // namespace flx

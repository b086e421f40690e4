// The rest of Optimisers.jl 0.4's rules (src/rules.jl): NAdam, RAdam,
// AdaMax, OAdam, AdaGrad, AdaDelta, AMSGrad, AdaBelief, Lion, Rprop and
// SignDecay. Each is composed of elementwise tensor ops (as Momentum and
// RMSProp are), so every device runs it from this one formula. Host scalars
// (βᵗ, the step count) live in RuleState::scalars, so checkpoints save them.
#include <algorithm>
#include <cmath>

#include "flx/error.hpp"

#include "flx/ops.hpp"
#include "flx/optimiser_rules.hpp"
#include "ops/ops_internal.hpp"

namespace flx {

namespace {
Tensor filled_like(const Tensor& x, double v) {
  Tensor z = empty(x.dtype(), x.shape(), x.device());
  ops::fill(z, v);
  return z;
}
Tensor zeros_like(const Tensor& x) { return filled_like(x, 0.0); }
// In place: dst .= src (same shape; src converted to dst's type).
void assign(const Tensor& dst, const Tensor& src) {
  const Tensor s = src.dtype() == dst.dtype() ? src : src.to(dst.dtype());
  ops::raw_map_into(dst, FLX_OP_COPY, dst.dtype(), {{&s}});
}
// m = β₁m + (1-β₁)dx; v = β₂v + (1-β₂)dx², in place.
void moments(Tensor& m, Tensor& v, const Tensor& dx, const Beta& beta) {
  assign(m, m * beta.first + dx * (1 - beta.first));
  assign(v, v * beta.second + square(dx) * (1 - beta.second));
}
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
}  // namespace

// ---- NAdam ------------------------------------------------------------------------
RuleState NAdam::init(const Tensor& x) const { return two_moments(x, beta); }
Tensor NAdam::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &v = st.tensors[1];
  const double bt1 = st.scalars[0], bt2 = st.scalars[1];
  const double b1 = beta.first, b2 = beta.second;
  moments(m, v, dx, beta);
  Tensor step = (m * (b1 / (1 - b1 * bt1)) + dx * ((1 - b1) / (1 - bt1))) / (sqrt(v * (b2 / (1 - bt2))) + eps) * eta;
  advance(st, beta);
  return step;
}
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
Tensor RAdam::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &v = st.tensors[1];
  const double bt1 = st.scalars[0], bt2 = st.scalars[1], t = st.scalars[2];
  moments(m, v, dx, beta);
  const double rho_inf = 2 / (1 - beta.second) - 1;
  const double rho = rho_inf - 2 * t * bt2 / (1 - bt2);
  Tensor step;
  if (rho > 4) {
    const double r = std::sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho));
    step = m / (1 - bt1) / (sqrt(v / (1 - bt2)) + eps) * (eta * r);
  } else {
    step = m * (eta / (1 - bt1));
  }
  advance(st, beta);
  st.scalars[2] = t + 1;
  return step;
}
void RAdam::print(std::ostream& os) const {
  os << "RAdam(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaMax -----------------------------------------------------------------------
RuleState AdaMax::init(const Tensor& x) const { return two_moments(x, beta); }
Tensor AdaMax::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &u = st.tensors[1];
  const double bt1 = st.scalars[0];
  assign(m, m * beta.first + dx * (1 - beta.first));
  assign(u, maximum(u * beta.second, abs(dx)));
  Tensor step = m / (u + eps) * (eta / (1 - bt1));
  advance(st, beta);
  return step;
}
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
Tensor OAdam::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &v = st.tensors[1], &term = st.tensors[2];
  const double bt1 = st.scalars[0], bt2 = st.scalars[1];
  moments(m, v, dx, beta);
  Tensor now = m / (1 - bt1) / (sqrt(v / (1 - bt2)) + eps) * eta;
  Tensor step = now * 2.0 - term;
  assign(term, now);
  advance(st, beta);
  return step;
}
void OAdam::print(std::ostream& os) const {
  os << "OAdam(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaGrad ----------------------------------------------------------------------
RuleState AdaGrad::init(const Tensor& x) const { return {{filled_like(x, epsilon)}, {}, {}}; }
Tensor AdaGrad::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor& acc = st.tensors[0];
  assign(acc, acc + square(dx));
  return dx * eta / (sqrt(acc) + eps);
}
void AdaGrad::print(std::ostream& os) const { os << "AdaGrad(" << eta << ", " << epsilon << ")"; }

// ---- AdaDelta ---------------------------------------------------------------------
RuleState AdaDelta::init(const Tensor& x) const { return {{zeros_like(x), zeros_like(x)}, {}, {}}; }
Tensor AdaDelta::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &acc = st.tensors[0], &dacc = st.tensors[1];
  assign(acc, acc * rho + square(dx) * (1 - rho));
  Tensor step = dx * sqrt(dacc + eps) / sqrt(acc + eps);  // the old Δacc
  assign(dacc, dacc * rho + square(step) * (1 - rho));
  return step;
}
void AdaDelta::print(std::ostream& os) const { os << "AdaDelta(" << rho << ", " << epsilon << ")"; }

// ---- AMSGrad ----------------------------------------------------------------------
RuleState AMSGrad::init(const Tensor& x) const {
  return {{filled_like(x, epsilon), filled_like(x, epsilon), filled_like(x, epsilon)}, {}, {}};
}
Tensor AMSGrad::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &v = st.tensors[1], &vhat = st.tensors[2];
  moments(m, v, dx, beta);
  assign(vhat, maximum(vhat, v));
  return m * eta / (sqrt(vhat) + eps);
}
void AMSGrad::print(std::ostream& os) const {
  os << "AMSGrad(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- AdaBelief --------------------------------------------------------------------
RuleState AdaBelief::init(const Tensor& x) const { return two_moments(x, beta); }
Tensor AdaBelief::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  const double eps = eps_for(dx, epsilon);
  Tensor &m = st.tensors[0], &s = st.tensors[1];
  const double bt1 = st.scalars[0], bt2 = st.scalars[1];
  assign(m, m * beta.first + dx * (1 - beta.first));
  assign(s, s * beta.second + square(dx - m) * (1 - beta.second) + eps);
  Tensor step = m * eta / (1 - bt1) / (sqrt(s / (1 - bt2)) + eps);
  advance(st, beta);
  return step;
}
void AdaBelief::print(std::ostream& os) const {
  os << "AdaBelief(" << eta << ", ";
  print_beta(os, beta);
  os << ", " << epsilon << ")";
}

// ---- Lion -------------------------------------------------------------------------
RuleState Lion::init(const Tensor& x) const { return {{zeros_like(x)}, {}, {}}; }
Tensor Lion::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  Tensor& m = st.tensors[0];
  assign(m, dx * beta.second + m * (1 - beta.second));
  return sign(dx * (beta.second - beta.first) + m * beta.first) * eta;
}
void Lion::print(std::ostream& os) const {
  os << "Lion(" << eta << ", ";
  print_beta(os, beta);
  os << ")";
}

// ---- Rprop ------------------------------------------------------------------------
// tensors {g, η}: the last gradient kept (0 after a sign flip) and the
// step sizes, starting at eta.
RuleState Rprop::init(const Tensor& x) const { return {{zeros_like(x), filled_like(x, eta)}, {}, {}}; }
Tensor Rprop::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  Tensor &g = st.tensors[0], &size = st.tensors[1];
  const Tensor d = dx.dtype() == g.dtype() ? dx : dx.to(g.dtype());
  const Tensor prod = g * d;
  const Tensor up = clamp(size * ell.second, -INFINITY, gamma.second);
  const Tensor down = clamp(size * ell.first, gamma.first, INFINITY);
  assign(size, where(prod > 0.0, up, where(prod < 0.0, down, size)));
  assign(g, where(prod < 0.0, zeros_like(d), d));
  return size * sign(g);
}
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
Tensor AccumGrad::apply(RuleState& st, const Tensor&, const Tensor& dx) const {
  Tensor& acc = st.tensors[0];
  double& counter = st.scalars[0];
  if (counter == 1) assign(acc, dx / double(n));
  else assign(acc, acc + dx / double(n));
  if (counter >= double(n)) {
    counter = 1;
    return acc;
  }
  counter += 1;
  return Tensor();
}
void AccumGrad::print(std::ostream& os) const { os << "AccumGrad(" << n << ")"; }

}  // namespace flx

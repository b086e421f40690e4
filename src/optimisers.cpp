// Optimiser rules (Optimisers.jl's apply!) and the state-tree step.
#include "flx/optimisers.hpp"

#include <cfloat>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "flx/ops.hpp"
#include "ops/ops_internal.hpp"
#include "optimisers/rule_step.hpp"
#include "tensor_impl.hpp"

namespace flx {

std::ostream& operator<<(std::ostream& os, const OptRule& r) {
  r.print(os);
  return os;
}

namespace {
Tensor zeros_like(const Tensor& x) {
  Tensor z = empty(x.dtype(), x.shape(), x.device());
  ops::fill(z, 0.0);
  return z;
}
// In place: dst .= src (same shape and dtype).
void assign(const Tensor& dst, const Tensor& src) { ops::raw_map_into(dst, FLX_OP_COPY, dst.dtype(), {{&src}}); }
}  // namespace

RuleState Descent::init(const Tensor&) const { return {}; }
Tensor Descent::apply(RuleState&, const Tensor&, const Tensor& dx) const { return dx * eta; }
void Descent::print(std::ostream& os) const { os << "Descent(" << eta << ")"; }

// ---- the stateful rules: their element updates are include/flx/backend_rules.h's ----
namespace {
using detail::RuleStep;

RuleStep next_step(const Momentum& r, RuleState&, const Tensor&) {
  RuleStep s{FLX_RULE_MOMENTUM, "Momentum's step", {r.eta, r.rho}};
  s.before_2_12 = [eta = r.eta, rho = r.rho](std::vector<Tensor>& st, const Tensor&, const Tensor& g) {
    assign(st[0], st[0] * rho + g * eta);
    return st[0];
  };
  return s;
}
RuleStep next_step(const Nesterov& r, RuleState&, const Tensor&) {
  const double eta = r.eta, rho = r.rho;
  RuleStep s{FLX_RULE_NESTEROV, "Nesterov's step", {eta, rho, -rho * rho, (1 + rho) * eta}};
  s.before_2_12 = [=](std::vector<Tensor>& st, const Tensor&, const Tensor& g) {
    Tensor step = st[0] * (-rho * rho) + g * ((1 + rho) * eta);
    assign(st[0], st[0] * rho - g * eta);
    return step;
  };
  return s;
}
RuleStep next_step(const RMSProp& r, RuleState&, const Tensor&) {
  const double eta = r.eta, rho = r.rho, eps = r.epsilon;
  const bool centred = r.centred;
  RuleStep s{FLX_RULE_RMSPROP, "RMSProp's step", {eta, rho, eps, 1 - rho, centred ? 1.0 : 0.0}};
  s.before_2_12 = [=](std::vector<Tensor>& st, const Tensor&, const Tensor& g) {
    Tensor &quad = st[0], &lin = st[1];
    assign(quad, quad * rho + square(g) * (1 - rho));
    if (centred) assign(lin, lin * rho + g * (1 - rho));
    Tensor denom = centred ? sqrt(quad - square(lin)) : sqrt(quad);
    return g * eta / (denom + eps);
  };
  return s;
}

// Adam's parameters {η, β₁, β₂, ϵ, 1/(1-β₁ᵗ), 1/(1-β₂ᵗ)}, the corrections
// computed in the compute type (as the CPU always has); advances βᵗ.
RuleStep adam_like(flx_rule rule, const char* what, RuleState& st, DType t, double eta, std::pair<double, double> beta,
                   double eps) {
  const double bp1 = st.scalars[0], bp2 = st.scalars[1];
  auto inverse = [t](double pow) { return detail::in_compute_type(t, 1 / detail::in_compute_type(t, 1 - pow)); };
  RuleStep s{rule, what, {eta, beta.first, beta.second, eps, inverse(bp1), inverse(bp2)}};
  st.scalars[0] *= beta.first;
  st.scalars[1] *= beta.second;
  // Before ABI 2.12: minor 0's fused Adam (optim_step), with η = 1 for AdamW.
  s.before_2_12 = [=](std::vector<Tensor>& state, const Tensor&, const Tensor& g) {
    Tensor out = empty(g.dtype(), g.shape(), g.device());
    flx_optim_desc d{};
    d.kind = FLX_OPTIM_ADAM;
    d.dtype = int32_t(g.dtype());
    d.n = g.numel();
    d.grad = detail::mem(g);
    d.m = detail::mem(state[0]);
    d.v = detail::mem(state[1]);
    d.dx = detail::mem(out);
    d.eta = rule == FLX_RULE_ADAM ? eta : 1.0;
    d.beta1 = beta.first;
    d.beta2 = beta.second;
    d.eps = eps;
    d.beta1_pow = bp1;
    d.beta2_pow = bp2;
    if (d.n) detail::be(g).optim_step(detail::dev(g), d);
    return out;
  };
  return s;
}
RuleStep next_step(const Adam& r, RuleState& st, const Tensor& x) {
  return adam_like(FLX_RULE_ADAM, "Adam's step", st, x.dtype(), r.eta, r.beta, r.epsilon);
}
RuleStep next_step(const AdamW& r, RuleState& st, const Tensor& x) {
  RuleStep s = adam_like(FLX_RULE_ADAMW, "AdamW's step", st, x.dtype(), r.eta, r.beta, r.epsilon);
  s.param[6] = r.lambda;
  s.param[7] = r.couple ? 1 : 0;
  s.reads_x = true;
  s.before_2_12 = [unit = s.before_2_12, eta = r.eta, lambda = r.lambda, couple = r.couple](
                      std::vector<Tensor>& state, const Tensor& x, const Tensor& g) {
    Tensor u = unit(state, x, g);
    if (lambda == 0) return u * eta;
    return couple ? (u + x * lambda) * eta : u * eta + x * lambda;
  };
  return s;
}
}  // namespace

RuleState Momentum::init(const Tensor& x) const { return {{zeros_like(x)}, {}, {}}; }
FLX_FUSED_RULE(Momentum)
void Momentum::print(std::ostream& os) const { os << "Momentum(" << eta << ", " << rho << ")"; }

RuleState Nesterov::init(const Tensor& x) const { return {{zeros_like(x)}, {}, {}}; }
FLX_FUSED_RULE(Nesterov)
void Nesterov::print(std::ostream& os) const { os << "Nesterov(" << eta << ", " << rho << ")"; }

RuleState RMSProp::init(const Tensor& x) const { return {{zeros_like(x), zeros_like(x)}, {}, {}}; }
FLX_FUSED_RULE(RMSProp)
void RMSProp::print(std::ostream& os) const {
  os << "RMSProp(" << eta << ", " << rho << ", " << epsilon << (centred ? ", centred" : "") << ")";
}

RuleState Adam::init(const Tensor& x) const { return {{zeros_like(x), zeros_like(x)}, {beta.first, beta.second}, {}}; }
FLX_FUSED_RULE(Adam)
void Adam::print(std::ostream& os) const {
  os << "Adam(" << eta << ", (" << beta.first << ", " << beta.second << "), " << epsilon << ")";
}

RuleState AdamW::init(const Tensor& x) const { return {{zeros_like(x), zeros_like(x)}, {beta.first, beta.second}, {}}; }
FLX_FUSED_RULE(AdamW)
void AdamW::print(std::ostream& os) const {
  os << "AdamW(" << eta << ", (" << beta.first << ", " << beta.second << "), " << lambda << ", " << epsilon
     << (couple ? "" : ", couple=false") << ")";
}

RuleState ClipGrad::init(const Tensor&) const { return {}; }
Tensor ClipGrad::apply(RuleState&, const Tensor&, const Tensor& dx) const { return clamp(dx, -delta, delta); }
void ClipGrad::print(std::ostream& os) const { os << "ClipGrad(" << delta << ")"; }

namespace {
// The smallest normal number of a floating type: a sum below it has lost
// precision to underflow.
double smallest_normal(DType t) {
  if (t == Float64) return DBL_MIN;
  if (t == Float16) return 6.103515625e-05;
  return FLT_MIN;  // Float32, and BFloat16 with the same exponent range
}

// LinearAlgebra's norm(x, p): p = Inf is max|x|, -Inf min|x|, 0 the number
// of nonzeros, any other p (Σ|x|ᵖ)^(1/p). Like LinearAlgebra, a sum that
// overflows or underflows is taken again with |x| scaled by max|x| (min|x|
// for p < 0), so a Float32 gradient of 1e30s has a finite 2-norm.
double pnorm(const Tensor& x, double p) {
  if (x.numel() == 0) return 0;
  if (p == INFINITY) return maximum(abs(x)).item<double>();
  if (p == -INFINITY) return minimum(abs(x)).item<double>();
  if (p == 0) return sum(x != 0.0).item<double>();
  Tensor a = abs(x);
  auto root = [p](double s) { return p == 2 ? std::sqrt(s) : p == 1 ? s : std::pow(s, 1 / p); };
  auto sum_p = [p](const Tensor& t) {
    return (p == 2 ? sum(square(t)) : p == 1 ? sum(t) : sum(pow(t, p))).item<double>();
  };
  double s = sum_p(a);
  if (std::isfinite(s) && s >= smallest_normal(x.dtype())) return root(s);
  double m = (p > 0 ? maximum(a) : minimum(a)).item<double>();
  if (m == 0 || !std::isfinite(m)) return m;  // NaN stays NaN
  return m * root(sum_p(a / m));
}
}  // namespace

// Optimisers.jl: λ = min(ω / norm(dx, p), 1), throwing first on a norm that
// is not finite when throw_nonfinite (its `throw` keyword).
RuleState ClipNorm::init(const Tensor&) const { return {}; }
Tensor ClipNorm::apply(RuleState&, const Tensor&, const Tensor& dx) const {
  double norm = pnorm(dx, p);
  FLX_CHECK(!throw_nonfinite || std::isfinite(norm), ArgumentError, "ClipNorm: the ", p,
            "-norm of a gradient of shape ", dx.shape(), " is not finite (", norm,
            "); check the loss for NaN or Inf, or use ClipNorm(omega, p, false) to scale by it anyway");
  double lambda = std::min(omega / norm, 1.0);  // NaN when the norm is (as Julia's min)
  return lambda == 1.0 ? dx : dx * lambda;
}
void ClipNorm::print(std::ostream& os) const {
  os << "ClipNorm(" << omega << ", " << p << (throw_nonfinite ? "" : ", throw=false") << ")";
}

RuleState WeightDecay::init(const Tensor&) const { return {}; }
Tensor WeightDecay::apply(RuleState&, const Tensor& x, const Tensor& dx) const { return dx + x * lambda; }
void WeightDecay::print(std::ostream& os) const { os << "WeightDecay(" << lambda << ")"; }

// ---- MixedPrecision ---------------------------------------------------------------

void detail::check_chain_member(const OptRule& r) {
  FLX_CHECK(!dynamic_cast<const MixedPrecision*>(&r), ArgumentError, "OptimiserChain: ", r,
            " is inside the chain, but MixedPrecision must wrap the whole chain (as in Optimisers.jl): write "
            "MixedPrecision(Float32, OptimiserChain(...))");
}

void MixedPrecision::check() const {
  FLX_CHECK(rule, ArgumentError, "MixedPrecision: the inner rule is missing");
  FLX_CHECK(is_floating(dtype), ArgumentError, "MixedPrecision: the copies' type must be floating (Float32, as "
            "Optimisers.jl's default, or Float64); got ", dtype);
}

// The state: tensors[0] the parameter's copy in `dtype` (never the
// parameter itself, even when it has that type), children[0] the inner
// rule's state for that copy.
RuleState MixedPrecision::init(const Tensor& x) const {
  Tensor copy = empty(dtype, x.shape(), x.device());
  assign(copy, x.to(dtype));
  RuleState st;
  st.children.push_back(rule->init(copy));
  st.tensors.push_back(copy);
  return st;
}

namespace {
// The inner rule's step on the copy xT, in place, with the gradient in xT's type.
void step_copy(const OptRule& rule, RuleState& inner, const Tensor& xT, const Tensor& dx) {
  const Tensor g = dx.to(xT.dtype());
  if (rule.apply_in_place(inner, xT, g)) return;
  const Tensor step = rule.apply(inner, xT, g);
  if (!step.defined()) return;  // no step this time (AccumGrad)
  const Tensor s = step.to(xT.dtype());
  ops::raw_map_into(xT, FLX_OP_SUB, xT.dtype(), {{&xT}, {&s}});
}
}  // namespace

bool MixedPrecision::apply_in_place(RuleState& st, const Tensor& x, const Tensor& dx) const {
  const Tensor& xT = st.tensors[0];
  step_copy(*rule, st.children[0], xT, dx);
  assign(x, xT.to(x.dtype()));  // the copy, rounded once to the parameter's type
  return true;
}

// The step as a tensor (update() itself steps in place, above): x - xT' in
// `dtype`, which subtract() below takes in `dtype` before rounding once.
Tensor MixedPrecision::apply(RuleState& st, const Tensor& x, const Tensor& dx) const {
  const Tensor& xT = st.tensors[0];
  step_copy(*rule, st.children[0], xT, dx);
  return x.to(dtype) - xT;
}

void MixedPrecision::print(std::ostream& os) const {
  std::ostringstream inner;
  inner << *rule;
  const std::string text = inner.str();
  os << "MixedPrecision{" << dtype << ", " << text.substr(0, text.find('(')) << "}(" << text << ")";
}

// ---- OptimiserChain ---------------------------------------------------------------

RuleState OptimiserChain::init(const Tensor& x) const {
  RuleState st;
  for (const auto& r : rules) st.children.push_back(r->init(x));
  return st;
}
Tensor OptimiserChain::apply(RuleState& st, const Tensor& x, const Tensor& dx) const {
  Tensor d = dx;
  // An undefined step (AccumGrad between its n-th gradients) ends the chain:
  // no step, as Optimisers.jl's `nothing`.
  for (size_t i = 0; i < rules.size() && d.defined(); ++i) d = rules[i]->apply(st.children[i], x, d);
  return d;
}
std::shared_ptr<GradientTransform> OptimiserChain::gradient_transform(const std::vector<Tensor>& params) const {
  for (size_t i = 1; i < rules.size(); ++i)
    FLX_CHECK(!rules[i]->transforms_gradients(), ArgumentError, "OptimiserChain: rule ", i + 1, " (", *rules[i],
              ") changes the gradients of every parameter at once, so it must come first: the rules before it would "
              "see gradients it has not changed yet. Put it first, or wrap the chain: DistributedOptimizer(backend, "
              "OptimiserChain(...))");
  return rules.empty() ? nullptr : rules[0]->gradient_transform(params);
}
void OptimiserChain::print(std::ostream& os) const {
  os << "OptimiserChain(";
  for (size_t i = 0; i < rules.size(); ++i) os << (i ? ", " : "") << *rules[i];
  os << ")";
}

OptState::OptState(std::shared_ptr<const OptRule> rule, const std::vector<std::pair<std::string, Tensor>>& params)
    : rule_(std::move(rule)) {
  std::unordered_map<const void*, bool> seen;
  autograd::PauseScope pause;
  for (const auto& [path, t] : params) {
    if (!t.defined() || !seen.emplace(t.id(), true).second) continue;  // tied: one state
    FLX_CHECK(is_floating(t.dtype()), TypeError, "setup: parameter ", path.empty() ? "(root)" : path,
              " has element type ", t.dtype(), "; optimisers update floating tensors only");
    leaves_.push_back({path, t, rule_->init(t)});
  }
  std::vector<Tensor> distinct;
  for (const auto& l : leaves_) distinct.push_back(l.param);
  transform_ = rule_->gradient_transform(distinct);
}

void OptState::adjust(double eta) {
  auto r = rule_->clone();
  r->set_eta(eta);
  rule_ = std::move(r);
}

// Every gradient, summed per parameter (a tied tensor appears at several
// places; the same gradient tensor there counts once), after checking each
// against its parameter. Writes nothing.
std::vector<Tensor> OptState::checked_gradients(const std::vector<std::pair<Tensor, Tensor>>& param_grads) const {
  std::unordered_map<const void*, size_t> index;
  for (size_t i = 0; i < leaves_.size(); ++i) index.emplace(leaves_[i].param.id(), i);
  std::vector<Tensor> total(leaves_.size());
  std::vector<std::vector<const void*>> seen(leaves_.size());
  for (const auto& [p, g] : param_grads) {
    if (!p.defined() || !g.defined()) continue;
    auto it = index.find(p.id());
    FLX_CHECK(it != index.end(), ArgumentError,
              "update: the model has a tensor the optimiser state does not know (shape ", p.shape(),
              "); call setup() again after changing the model");
    size_t i = it->second;
    const std::string& path = leaves_[i].path.empty() ? "(root)" : leaves_[i].path;
    FLX_CHECK(g.shape() == p.shape(), DimensionMismatch, "update: gradient for ", path, " has shape ", g.shape(),
              " but the parameter has shape ", p.shape());
    FLX_CHECK(is_floating(g.dtype()), TypeError, "update: gradient for ", path, " has element type ", g.dtype(),
              "; gradients must be floating (the parameter is ", p.dtype(), ")");
    FLX_CHECK(g.device() == p.device(), DeviceMismatch, "update: gradient for ", path, " lives on ", g.device(),
              " but the parameter on ", p.device(), "; move the gradient to the model's device first");
    auto& s = seen[i];
    if (std::find(s.begin(), s.end(), g.id()) != s.end()) continue;
    s.push_back(g.id());
    total[i] = total[i].defined() ? total[i] + g : g;
  }
  for (size_t i = 0; i < leaves_.size(); ++i)
    if (total[i].defined()) total[i] = total[i].to(rule_->gradient_dtype(leaves_[i].param));
  return total;
}

namespace {
RuleState copy_state(const RuleState& st) {
  RuleState out{{}, st.scalars, {}};
  for (const auto& t : st.tensors) {
    out.tensors.push_back(empty(t.dtype(), t.shape(), t.device()));
    assign(out.tensors.back(), t);
  }
  for (const auto& c : st.children) out.children.push_back(copy_state(c));
  return out;
}
// dst takes src's values in place (its tensors stay the same objects).
void commit_state(RuleState& dst, const RuleState& src) {
  for (size_t k = 0; k < dst.tensors.size(); ++k) assign(dst.tensors[k], src.tensors[k]);
  dst.scalars = src.scalars;
  for (size_t j = 0; j < dst.children.size(); ++j) commit_state(dst.children[j], src.children[j]);
}
// x .= x - step. A step wider than x (MixedPrecision's, in Float32 for a
// BFloat16 x) is subtracted in its own type and the difference rounded once.
void subtract(const Tensor& x, const Tensor& step) {
  if (dtype_size(step.dtype()) > dtype_size(x.dtype()) && is_floating(step.dtype())) {
    assign(x, (x.to(step.dtype()) - step).to(x.dtype()));
    return;
  }
  Tensor s = step.to(x.dtype());
  ops::raw_map_into(x, FLX_OP_SUB, x.dtype(), {{&x}, {&s}});
}
}  // namespace

void OptState::step(const std::vector<std::pair<Tensor, Tensor>>& param_grads) {
  autograd::PauseScope pause;
  std::vector<Tensor> grads = checked_gradients(param_grads);
  if (transform_) transform_->transform(grads);
  if (rule_->may_refuse()) {
    // Stage: every step on a copy of its leaf's state (and, for a rule that
    // steps in place, of its parameter), then commit them all.
    struct Staged {
      size_t leaf;
      RuleState state;
      Tensor step;     // to subtract, or
      Tensor updated;  // the parameter's new value
    };
    std::vector<Staged> staged;
    for (size_t i = 0; i < leaves_.size(); ++i) {
      if (!grads[i].defined() || leaves_[i].frozen) continue;
      const Tensor& x = leaves_[i].param;
      RuleState st = copy_state(leaves_[i].state);
      if (rule_->steps_in_place()) {
        Tensor updated = empty(x.dtype(), x.shape(), x.device());
        assign(updated, x);
        FLX_CHECK(rule_->apply_in_place(st, updated, grads[i]), ArgumentError, "update: ", *rule_,
                  " says it steps in place but did not");
        staged.push_back({i, std::move(st), Tensor(), updated});
      } else {
        Tensor s = rule_->apply(st, x, grads[i]);
        staged.push_back({i, std::move(st), s, Tensor()});
      }
    }
    for (auto& [i, st, s, updated] : staged) {
      commit_state(leaves_[i].state, st);
      if (updated.defined()) assign(leaves_[i].param, updated);
      else if (s.defined()) subtract(leaves_[i].param, s);
    }
    return;
  }
  for (size_t i = 0; i < leaves_.size(); ++i) {
    if (!grads[i].defined() || leaves_[i].frozen) continue;
    Leaf& leaf = leaves_[i];
    if (rule_->apply_in_place(leaf.state, leaf.param, grads[i])) continue;
    const Tensor s = rule_->apply(leaf.state, leaf.param, grads[i]);
    if (s.defined()) subtract(leaf.param, s);  // undefined: no step (AccumGrad)
  }
}

namespace {
// Whether the leaf at `leaf` is `path` or under it ("" is everything).
bool under(const std::string& leaf, const std::string& path) {
  return path.empty() || leaf == path ||
         (leaf.size() > path.size() && leaf.compare(0, path.size(), path) == 0 && leaf[path.size()] == '.');
}
size_t set_frozen(OptState& state, const std::string& path, bool frozen, const char* what) {
  bool named = false;
  size_t changed = 0;
  for (auto& leaf : state.entries()) {
    if (!under(leaf.path, path)) continue;
    named = true;
    changed += leaf.frozen != frozen;
    leaf.frozen = frozen;
  }
  if (!named && !path.empty()) {
    std::string names;
    for (const auto& leaf : state.entries()) names += (names.empty() ? "" : ", ") + leaf.path;
    FLX_THROW(ArgumentError, what, ": no leaf of the optimiser state is at \"", path, "\"; its leaves are ", names);
  }
  return changed;
}
}  // namespace

size_t freeze(OptState& state, const std::string& path) { return set_frozen(state, path, true, "freeze"); }
size_t thaw(OptState& state, const std::string& path) { return set_frozen(state, path, false, "thaw"); }

}  // namespace flx

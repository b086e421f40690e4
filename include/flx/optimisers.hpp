// Optimisers with Optimisers.jl semantics:
//
//   auto state = setup(Adam(1e-3), model);   // a state tree for the model's leaves
//   update(state, model, grads);             // steps the model's tensors in place
//
// Tied tensors (one tensor reached twice) have one state and get one update
// with the sum of their gradients; leaves without a gradient are skipped.
// Rules compose with OptimiserChain(ClipGrad(1.0), Adam()); MixedPrecision
// wraps a rule for models in Float16 or BFloat16 (see it below).
#pragma once

#include "flx/export.hpp"

#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {

// Per-leaf state of a rule: tensors (moments, velocities), host scalars
// (bias-correction powers) and the states of sub-rules.
struct FLX_API RuleState {
  std::vector<Tensor> tensors;
  std::vector<double> scalars;
  std::vector<RuleState> children;
};

// A step's whole set of gradients, changed before any rule sees them:
// DistributedOptimizer averages them across processes. An OptRule makes one
// per setup(); the state keeps it.
class FLX_API GradientTransform {
 public:
  virtual ~GradientTransform() = default;
  // grads[i] is the gradient of the state's i-th parameter (undefined:
  // none); replaced in place.
  virtual void transform(std::vector<Tensor>& grads) = 0;
};

class FLX_API OptRule {
 public:
  virtual ~OptRule() = default;
  virtual RuleState init(const Tensor& x) const = 0;
  // The step to subtract from x, given the gradient dx; updates st.
  virtual Tensor apply(RuleState& st, const Tensor& x, const Tensor& dx) const = 0;
  // Apply the step to x directly, if this rule can do so in one fused pass
  // (returns false otherwise, and the caller subtracts apply()'s result).
  virtual bool apply_in_place(RuleState&, const Tensor&, const Tensor&) const { return false; }
  // Whether apply_in_place steps x (returns true): update()'s staged path
  // (may_refuse) then gives it a copy of the parameter to step.
  virtual bool steps_in_place() const { return false; }
  // Whether apply() may refuse a gradient for its values (ClipNorm on a
  // non-finite norm). update() then computes every leaf's step on copies of
  // the state before it writes anything, so a refused update changes nothing.
  virtual bool may_refuse() const { return false; }
  virtual void print(std::ostream& os) const = 0;
  virtual std::shared_ptr<OptRule> clone() const = 0;
  // Set the learning rate (rules without one ignore it; chains pass it on).
  virtual void set_eta(double) {}
  // Whether this rule changes whole steps' gradients (gradient_transform
  // gives a transform), and that transform for the parameters `params`
  // (setup's order); most rules act leaf by leaf.
  virtual bool transforms_gradients() const { return false; }
  virtual std::shared_ptr<GradientTransform> gradient_transform(const std::vector<Tensor>& /*params*/) const {
    return nullptr;
  }
  // The rule whose state this one keeps: itself, or for a wrapper that only
  // changes the gradients it passes on (DistributedOptimizer), the wrapped
  // rule's. Saved optimiser states name it, so such a state loads with or
  // without the wrapper (a checkpoint of 2 ranks resumes in one process).
  virtual const OptRule& state_rule() const { return *this; }
  // The element type this rule takes the gradient of `param` in: the
  // parameter's own (update() converts the gradients to it), or for
  // MixedPrecision its wider type, so that a Float32 gradient of a BFloat16
  // parameter (LossScaler's, unscaled) reaches the rule unrounded.
  virtual DType gradient_dtype(const Tensor& param) const { return param.dtype(); }
};
FLX_API std::ostream& operator<<(std::ostream& os, const OptRule& r);

#include "flx/optimiser_rule_macros.inc"

struct FLX_API Descent : OptRule {  // x -= η dx
  double eta;
  explicit Descent(double eta = 0.1) : eta(eta) {}
  FLX_RULE_ETA
  FLX_RULE_METHODS(Descent)
};
struct FLX_API Momentum : OptRule {  // v = ρv + η dx; x -= v
  double eta, rho;
  explicit Momentum(double eta = 0.01, double rho = 0.9) : eta(eta), rho(rho) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(Momentum)
};
struct FLX_API Nesterov : OptRule {
  double eta, rho;
  explicit Nesterov(double eta = 0.001, double rho = 0.9) : eta(eta), rho(rho) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(Nesterov)
};
struct FLX_API RMSProp : OptRule {
  double eta, rho, epsilon;
  bool centred;
  explicit RMSProp(double eta = 0.001, double rho = 0.9, double epsilon = 1e-8, bool centred = false)
      : eta(eta), rho(rho), epsilon(epsilon), centred(centred) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(RMSProp)
};
struct FLX_API Adam : OptRule {
  double eta;
  std::pair<double, double> beta;
  double epsilon;
  explicit Adam(double eta = 0.001, std::pair<double, double> beta = {0.9, 0.999}, double epsilon = 1e-8)
      : eta(eta), beta(beta), epsilon(epsilon) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(Adam)
};
// Adam with decoupled weight decay (Optimisers.jl 0.4): the step is
// η·(adam + λx) when couple (the default), else η·adam + λx.
struct FLX_API AdamW : OptRule {
  double eta;
  std::pair<double, double> beta;
  double lambda, epsilon;
  bool couple;
  explicit AdamW(double eta = 0.001, std::pair<double, double> beta = {0.9, 0.999}, double lambda = 0,
                 double epsilon = 1e-8, bool couple = true)
      : eta(eta), beta(beta), lambda(lambda), epsilon(epsilon), couple(couple) {}
  FLX_RULE_IN_PLACE
  FLX_RULE_ETA
  FLX_RULE_METHODS(AdamW)
};
struct FLX_API ClipGrad : OptRule {  // clamp each gradient entry to [-δ, δ]
  double delta;
  explicit ClipGrad(double delta = 10) : delta(delta) {}
  FLX_RULE_METHODS(ClipGrad)
};
struct FLX_API ClipNorm : OptRule {  // rescale so the p-norm of each gradient is at most ω
  double omega, p;
  bool throw_nonfinite;
  explicit ClipNorm(double omega = 10, double p = 2, bool throw_nonfinite = true)
      : omega(omega), p(p), throw_nonfinite(throw_nonfinite) {}
  bool may_refuse() const override { return throw_nonfinite; }
  FLX_RULE_METHODS(ClipNorm)
};
struct FLX_API WeightDecay : OptRule {  // dx + λx
  double lambda;
  explicit WeightDecay(double lambda = 5e-4) : lambda(lambda) {}
  FLX_RULE_METHODS(WeightDecay)
};
namespace detail {
// An ArgumentError when r is a MixedPrecision (it must wrap the chain).
FLX_API void check_chain_member(const OptRule& r);
}  // namespace detail

struct FLX_API OptimiserChain : OptRule {
  std::vector<std::shared_ptr<OptRule>> rules;
  template <class... R>
    requires(std::is_base_of_v<OptRule, R> && ...)
  explicit OptimiserChain(const R&... rs) : rules{rs.clone()...} {
    for (const auto& r : rules) detail::check_chain_member(*r);
  }
  void set_eta(double e) override {
    for (auto& r : rules) r->set_eta(e);
  }
  bool may_refuse() const override {
    return std::any_of(rules.begin(), rules.end(), [](const auto& r) { return r->may_refuse(); });
  }
  // The first rule's; a later rule with one is an error (it would change
  // gradients the earlier rules have already used).
  bool transforms_gradients() const override { return !rules.empty() && rules[0]->transforms_gradients(); }
  std::shared_ptr<GradientTransform> gradient_transform(const std::vector<Tensor>& params) const override;
  FLX_RULE_METHODS(OptimiserChain)
};

// Optimisers.jl's MixedPrecision(T, rule), for models in low precision
// (bf16(model), f16(model)): the state holds a copy of each parameter in
// `dtype` (Float32 by default) and the inner rule's state for that copy.
// A step converts the gradient to `dtype`, applies the inner rule to the
// copy, and writes the copy back into the parameter rounded to its type, so
// steps far below the parameter's resolution (half a BFloat16 ulp is 2^-9 of
// the value) still add up. Wrap whole chains, never the reverse:
// MixedPrecision(Float32, OptimiserChain(ClipGrad(1.0), Adam())); a chain
// holding a MixedPrecision is an ArgumentError, as in Optimisers.jl.
// Prints as Optimisers.jl prints it, type parameters first:
// MixedPrecision{Float32, Adam}(Adam(0.001, (0.9, 0.999), 1e-08)).
struct FLX_API MixedPrecision : OptRule {
  DType dtype;
  std::shared_ptr<OptRule> rule;
  template <class R>
    requires std::is_base_of_v<OptRule, R>
  MixedPrecision(DType dtype, const R& inner) : dtype(dtype), rule(inner.clone()) {
    check();
  }
  template <class R>
    requires std::is_base_of_v<OptRule, R>
  explicit MixedPrecision(const R& inner) : MixedPrecision(DType::Float32, inner) {}
  // Copies own their inner rule (adjust() on a state's copy leaves the rule
  // it was set up with alone).
  MixedPrecision(const MixedPrecision& o) : OptRule(o), dtype(o.dtype), rule(o.rule->clone()) {}
  MixedPrecision& operator=(const MixedPrecision& o) {
    dtype = o.dtype;
    rule = o.rule->clone();
    return *this;
  }
  bool apply_in_place(RuleState& st, const Tensor& x, const Tensor& dx) const override;
  bool steps_in_place() const override { return true; }
  bool may_refuse() const override { return rule->may_refuse(); }
  void set_eta(double e) override { rule->set_eta(e); }
  bool transforms_gradients() const override { return rule->transforms_gradients(); }
  std::shared_ptr<GradientTransform> gradient_transform(const std::vector<Tensor>& params) const override {
    return rule->gradient_transform(params);
  }
  DType gradient_dtype(const Tensor&) const override { return dtype; }
  FLX_RULE_METHODS(MixedPrecision)

 private:
  void check() const;
};
#undef FLX_RULE_METHODS
#undef FLX_RULE_ETA
#undef FLX_RULE_IN_PLACE

// The optimiser state of a model: one entry per distinct trainable tensor.
class FLX_API OptState {
 public:
  struct Leaf {
    std::string path;  // "layers.0.weight"
    Tensor param;
    RuleState state;
    bool frozen = false;  // freeze(state, path): update() leaves it (and its state) alone
  };
  OptState(std::shared_ptr<const OptRule> rule, const std::vector<std::pair<std::string, Tensor>>& params);
  const OptRule& rule() const { return *rule_; }
  // The rule's transform of whole steps (null for most rules).
  const std::shared_ptr<GradientTransform>& gradient_transform() const { return transform_; }
  const std::vector<Leaf>& entries() const { return leaves_; }
  std::vector<Leaf>& entries() { return leaves_; }
  // One step from (parameter, gradient) pairs in walk order. All or nothing:
  // every gradient is checked (shape, element type, device) and, for rules
  // that may refuse one, every step computed before the first write.
  void step(const std::vector<std::pair<Tensor, Tensor>>& param_grads);
  // A new learning rate for every rule that has one; the moments are kept.
  void adjust(double eta);

 private:
  std::vector<Tensor> checked_gradients(const std::vector<std::pair<Tensor, Tensor>>& param_grads) const;

  std::shared_ptr<const OptRule> rule_;
  std::vector<Leaf> leaves_;
  std::shared_ptr<GradientTransform> transform_;
};

template <class R, class M>
  requires std::is_base_of_v<OptRule, R>
OptState setup(const R& rule, const M& model) {
  std::vector<std::pair<std::string, Tensor>> params;
  auto visit = [&](const std::string& path, const Tensor& t) { params.emplace_back(path, t); };
  detail::walk<true>(visit, "", model);
  return OptState(rule.clone(), params);
}

// Optimisers.adjust!: change the learning rate of a state tree in place.
// (Any other field: adjust<Rule>(state, f) in flx/optimiser_utils.hpp.)
inline void adjust(OptState& state, double eta) { state.adjust(eta); }

// Optimisers.freeze! / thaw!: stop (and resume) updating the leaves at a
// dotted path as the state names them ("layers.0" for a layer's every
// tensor, "layers.0.weight" for one; "" for all). A frozen leaf keeps its
// parameter and its state as they are. Returns how many leaves it changed;
// a path that names no leaf is an ArgumentError listing the leaves. The
// flags are part of the state's checkpoint (save(path, state)): loadmodel
// sets them as they were saved.
FLX_API size_t freeze(OptState& state, const std::string& path = "");
FLX_API size_t thaw(OptState& state, const std::string& path = "");

template <class M>
void update(OptState& state, const M& model, const M& grads) {
  std::vector<std::pair<Tensor, Tensor>> pairs;
  auto visit = [&](const std::string&, const Tensor& p, const Tensor& g) { pairs.emplace_back(p, g); };
  detail::walk<true>(visit, "", model, grads);
  state.step(pairs);
}

}  // namespace flx

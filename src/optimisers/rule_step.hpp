// The stateful optimiser rules' steps: each rule computes its host scalars
// (βᵗ, bias corrections) as the parameters of its element update in
// include/flx/backend_rules.h, and run_rule has the tensor's backend run
// that update (the compute table's rule_step). Not installed.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "flx/backend.h"
#include "flx/tensor.hpp"

namespace flx::detail {

struct RuleStep {
  flx_rule rule;
  const char* what;  // "NAdam's step", for messages
  std::array<double, FLX_RULE_MAX_PARAMS> param{};
  bool reads_x = false;  // the body reads the parameter (AdamW)
  // The rules that predate rule_step (ABI 2.12) keep, for plugins built
  // before it, the composition of ops they ran then: the step from
  // (states, x, gradient), the states updated. Empty for the later rules,
  // which such a plugin cannot run (NotImplemented).
  std::function<Tensor(std::vector<Tensor>& states, const Tensor& x, const Tensor& g)> before_2_12 = {};
};

// v rounded to the type a backend computes t in (float, but for Float64):
// host scalars that the CPU has always computed in that type (Adam's bias
// corrections) keep their bits.
double in_compute_type(DType t, double v);

// Runs r on the states' device: updates `states` (the rule's, in order) and
// returns the step to subtract from x, or, when in_place, subtracts it from
// x and returns an undefined tensor. The gradient is converted to the
// states' type first.
Tensor run_rule(const RuleStep& r, std::vector<Tensor>& states, const Tensor& x, const Tensor& dx, bool in_place);

}  // namespace flx::detail

// Each rule's next_step gives the parameters of its body for this step (and
// advances the host scalars); FLX_FUSED_RULE runs it, as a step or in place.
#define FLX_FUSED_RULE(R)                                                                    \
  Tensor R::apply(RuleState& st, const Tensor& x, const Tensor& dx) const {                  \
    return detail::run_rule(next_step(*this, st, x), st.tensors, x, dx, false);              \
  }                                                                                          \
  bool R::apply_in_place(RuleState& st, const Tensor& x, const Tensor& dx) const {           \
    detail::run_rule(next_step(*this, st, x), st.tensors, x, dx, true);                      \
    return true;                                                                             \
  }

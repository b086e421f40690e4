// Minor 0's fused Adam (optim_step, flx_optim_desc) as the rule_step of
// minor 12 (flx_rule_desc): a backend implements rule_step and answers
// optim_step through it, so Adam has one body (backend_rules.h). The bias
// corrections 1/(1 - βᵗ) are computed in the compute type (float, but for
// Float64), as libflx computes them for rule_step.
#pragma once

#include "flx/backend.h"

namespace flx::backend_common {

inline flx_rule_desc adam_as_rule(const flx_optim_desc& d) {
  flx_rule_desc r{};
  r.struct_size = sizeof r;
  r.rule = FLX_RULE_ADAM;
  r.dtype = d.dtype;
  r.n = d.n;
  r.grad = d.grad;
  r.x = d.x;
  r.dx = d.dx;
  r.state[0] = d.m;
  r.state[1] = d.v;
  const bool wide = d.dtype == FLX_F64;
  auto inverse = [wide](double pow) { return wide ? 1 / (1 - pow) : double(1.0f / float(1 - pow)); };
  const double param[] = {d.eta, d.beta1, d.beta2, d.eps, inverse(d.beta1_pow), inverse(d.beta2_pow)};
  for (int k = 0; k < 6; ++k) r.param[k] = param[k];
  return r;
}

}  // namespace flx::backend_common

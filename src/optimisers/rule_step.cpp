// run_rule: one flx_rule_desc per parameter, on its backend.
#include "optimisers/rule_step.hpp"

#include "backend_common/rule_info.hpp"
#include "flx/error.hpp"
#include "flx/ops.hpp"
#include "ops/ops_internal.hpp"
#include "tensor_impl.hpp"

namespace flx::detail {

double in_compute_type(DType t, double v) { return t == Float64 ? v : double(float(v)); }

Tensor run_rule(const RuleStep& r, std::vector<Tensor>& states, const Tensor& x, const Tensor& dx, bool in_place) {
  FLX_CHECK(int(states.size()) == rules::states(r.rule), ArgumentError, r.what, ": ", states.size(),
            " state tensors for a rule that keeps ", rules::states(r.rule));
  const Tensor g = dx.dtype() == states[0].dtype() ? dx : dx.to(states[0].dtype());
  const Backend& b = be(g);
  if (!b.has_rule_step() && r.before_2_12) {
    Tensor step = r.before_2_12(states, x, g);
    if (!in_place) return step;
    const Tensor stepped = x - step;
    ops::raw_map_into(x, FLX_OP_COPY, x.dtype(), {{&stepped}});
    return {};
  }
  Tensor out = in_place ? Tensor{} : empty(g.dtype(), g.shape(), g.device());
  flx_rule_desc d{};
  d.struct_size = sizeof d;
  d.rule = r.rule;
  d.dtype = int32_t(g.dtype());
  d.n = g.numel();
  d.grad = mem(g);
  if (in_place || r.reads_x) d.x = mem(x);
  if (!in_place) d.dx = mem(out);
  for (size_t k = 0; k < states.size(); ++k) d.state[k] = mem(states[k]);
  for (size_t k = 0; k < r.param.size(); ++k) d.param[k] = r.param[k];
  if (d.n) b.rule_step(dev(g), d, r.what);  // NotImplemented on a backend without it
  return out;
}

}  // namespace flx::detail

// Optimisers.jl's utilities (include/flx/optimiser_utils.hpp): what is not
// a template.
#include "flx/optimiser_utils.hpp"

namespace flx::detail {

// Whether two rule states hold the same parts: tensors of one shape and
// type, as many scalars, children alike (adjust's check that a changed rule
// keeps the state it had).
bool same_structure(const RuleState& a, const RuleState& b) {
  if (a.tensors.size() != b.tensors.size() || a.scalars.size() != b.scalars.size() ||
      a.children.size() != b.children.size())
    return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i], &y = b.tensors[i];
    if (x.defined() != y.defined()) return false;
    if (x.defined() && (x.shape() != y.shape() || x.dtype() != y.dtype())) return false;
  }
  for (size_t j = 0; j < a.children.size(); ++j)
    if (!same_structure(a.children[j], b.children[j])) return false;
  return true;
}

bool same_variants(const OptRule& before, const OptRule& after) {
  if (auto* a = dynamic_cast<const RMSProp*>(&before))
    if (auto* b = dynamic_cast<const RMSProp*>(&after)) return a->centred == b->centred;
  auto* ca = dynamic_cast<const OptimiserChain*>(&before);
  auto* cb = dynamic_cast<const OptimiserChain*>(&after);
  if (ca && cb) {
    if (ca->rules.size() != cb->rules.size()) return false;
    for (size_t i = 0; i < ca->rules.size(); ++i)
      if (!same_variants(*ca->rules[i], *cb->rules[i])) return false;
    return true;
  }
  auto* ma = dynamic_cast<const MixedPrecision*>(&before);
  auto* mb = dynamic_cast<const MixedPrecision*>(&after);
  if (ma && mb) return ma->dtype == mb->dtype && same_variants(*ma->rule, *mb->rule);
  return true;
}

}  // namespace flx::detail

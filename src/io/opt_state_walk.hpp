// Every part of an optimiser state's rule states, named after the
// parameter, for checkpoints and for distributed::synchronize. Not
// installed.
#pragma once

#include <string>

#include "flx/optimisers.hpp"

namespace flx::detail {

// <path>.state.t<i> for each leaf's tensors, <path>.state.scalars for its
// host numbers (the vector itself, so a caller can write it back),
// <path>.state.child<j>. for sub-rules. Opt is OptState, const or not.
template <class Opt, class OnTensor, class OnScalars>
void walk_opt_state(Opt& opt, OnTensor on_tensor, OnScalars on_scalars) {
  auto walk = [&](auto& self, auto& st, const std::string& prefix) -> void {
    for (size_t i = 0; i < st.tensors.size(); ++i)
      if (st.tensors[i].defined()) on_tensor(prefix + "t" + std::to_string(i), st.tensors[i]);
    if (!st.scalars.empty()) on_scalars(prefix + "scalars", st.scalars);
    for (size_t j = 0; j < st.children.size(); ++j)
      self(self, st.children[j], prefix + "child" + std::to_string(j) + ".");
  };
  for (auto& leaf : opt.entries()) walk(walk, leaf.state, (leaf.path.empty() ? "tensor" : leaf.path) + ".state.");
}

}  // namespace flx::detail

#include "precision.hpp"

using flx::State;

namespace flx_train {

flx::DType precision_dtype(const std::string& precision) {
  if (precision == "bf16") return flx::BFloat16;
  if (precision == "f16") return flx::Float16;
  return flx::Float32;
}

bool is_mixed(const flx::OptState& opt) {
  return dynamic_cast<const flx::MixedPrecision*>(&opt.rule().state_rule()) != nullptr;
}

bool is_mixed(const State& saved_optimiser) {
  // The rule as the optimiser state's metadata names it ("flx.rule", as
  // state(opt) writes it): MixedPrecision{Float32, Adam}(Adam(...)).
  auto it = saved_optimiser.metadata().find("flx.rule");
  return it != saved_optimiser.metadata().end() && it->second.starts_with("MixedPrecision");
}

RestorableStates across_precisions(const State& model, const State& optimiser, bool saved_mixed,
                                   const flx::OptState& opt) {
  const bool mixed = is_mixed(opt);
  if (mixed == saved_mixed) return {model, optimiser};
  RestorableStates out;
  out.optimiser.metadata() = flx::state(opt).metadata();  // names this run's rule
  // Each leaf's names, "layers.0.weight.state." (a bare tensor: "tensor.state.").
  std::vector<std::pair<std::string, std::string>> leaves;  // (parameter, its state's prefix)
  for (const auto& leaf : opt.entries())
    leaves.emplace_back(leaf.path, (leaf.path.empty() ? "tensor" : leaf.path) + ".state.");
  auto leaf_of = [&](const std::string& name) -> const std::pair<std::string, std::string>* {
    for (const auto& l : leaves)
      if (name.starts_with(l.second)) return &l;
    return nullptr;
  };
  if (mixed) {  // f32 -> bf16/f16: the copy from the parameter, Adam's state inside
    for (const auto& [param, prefix] : leaves) out.optimiser.insert(prefix + "t0", model.at(param));
    for (const auto& [name, t] : optimiser) {
      const auto* l = leaf_of(name);
      // A name of no leaf of this model is passed on: loadmodel names it.
      out.optimiser.insert(l ? l->second + "child0." + name.substr(l->second.size()) : name, t);
    }
    out.model = model;
    return out;
  }
  // bf16/f16 -> f32: the Float32 copies become the parameters, Adam's state moves out.
  std::map<std::string, flx::Tensor> copies;
  for (const auto& [name, t] : optimiser) {
    const auto* l = leaf_of(name);
    const std::string rest = l ? name.substr(l->second.size()) : "";
    if (l && rest == "t0") copies.emplace(l->first, t);
    else if (l && rest.starts_with("child0.")) out.optimiser.insert(l->second + rest.substr(7), t);
    else out.optimiser.insert(name, t);
  }
  for (const auto& [name, t] : model) {
    auto it = copies.find(name);
    out.model.insert(name, it == copies.end() ? t : it->second);
  }
  out.model.metadata() = model.metadata();
  return out;
}

}  // namespace flx_train

// Optimisers.jl's utilities, and Flux's train!:
//
//   std::vector<Tensor> ps = trainables(model);      // each trainable tensor once
//   auto [flat, re] = destructure(model);            // one vector, and back
//   Model m2 = re(flat * 0.5);                       // differentiable in flat
//   adjust<Adam>(state, [](Adam& r) { r.beta = {0.8, 0.99}; });  // any field
//   train([](const Model& m, const Tensor& x, const Tensor& y) { return mse(m(x), y); },
//         model, loader, state);                     // one update per batch
#pragma once

#include "flx/export.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flx/arrays.hpp"
#include "flx/autodiff.hpp"
#include "flx/error.hpp"
#include "flx/functor.hpp"
#include "flx/ops.hpp"
#include "flx/optimiser_rules.hpp"
#include "flx/optimisers.hpp"

namespace flx {

// Optimisers.trainables: every trainable tensor of the model (those setup()
// gives a state; a tied tensor once), in walk order.
template <class M>
std::vector<Tensor> trainables(const M& model) {
  return leaves(model, true);
}

// What destructure returns beside the flat vector: re(flat) rebuilds the
// model with its trainable tensors taken from flat (in walk order, each
// column-major, converted back to its own element type; tied tensors stay
// tied), every other leaf shared with the original. Differentiable in flat.
template <class M>
class Restructure {
 public:
  Restructure(M model, std::vector<std::pair<const void*, int64_t>> offsets, int64_t length)
      : model_(std::move(model)), offsets_(std::move(offsets)), length_(length) {}
  M operator()(const Tensor& flat) const {
    FLX_CHECK(flat.defined() && flat.ndims() == 1 && flat.numel() == length_, DimensionMismatch,
              "destructure: the model has ", length_, " trainable numbers, so re(flat) needs a vector of ", length_,
              "; got ", flat.defined() ? flat.shape().str() : std::string("an undefined tensor"));
    std::unordered_map<const void*, int64_t> at(offsets_.begin(), offsets_.end());
    return fmap(
        [&](const Tensor& t) -> Tensor {
          auto it = at.find(t.id());
          if (it == at.end()) return t;  // not trainable: shared
          const int64_t o = it->second;
          return reshape(slice(flat, 0, o, o + t.numel()), t.shape()).to(t.dtype());
        },
        model_);
  }
  int64_t length() const { return length_; }

 private:
  M model_;
  std::vector<std::pair<const void*, int64_t>> offsets_;  // a trainable tensor's id, its start in flat
  int64_t length_;
};

// Optimisers.destructure: `auto [flat, re] = destructure(model)`. flat is a
// vector of the trainable tensors (trainables(model)) one after another,
// each column-major, in the widest of their element types (promoted as
// two tensors are, docs/dtypes.md: Float16 with Float32 gives Float32,
// Float16 with BFloat16 gives Float32; Float32 for a model without any), as
// Optimisers.jl's vcat promotes, so that re(flat) gives every leaf back
// exactly; on the model's device.
template <class M>
std::pair<Tensor, Restructure<M>> destructure(const M& model) {
  const std::vector<Tensor> ps = trainables(model);
  std::vector<std::pair<const void*, int64_t>> offsets;
  std::vector<Tensor> parts;
  DType widest = ps.empty() ? DType::Float32 : ps[0].dtype();
  for (const Tensor& p : ps) widest = promote_types(widest, p.dtype());
  int64_t n = 0;
  for (const Tensor& p : ps) {
    offsets.emplace_back(p.id(), n);
    n += p.numel();
    parts.push_back(reshape(p, Shape{p.numel()}).to(widest));
  }
  Tensor flat = parts.empty() ? zeros(0) : parts.size() == 1 ? parts[0].detach() : vcat(parts).detach();
  return {flat, Restructure<M>(model, std::move(offsets), n)};
}

namespace detail {
// Each rule of type R in the tree under r (r itself, a chain's members, a
// MixedPrecision's rule), f applied to it; how many.
template <class R, class F>
int adjust_rules(OptRule& r, F& f) {
  int n = 0;
  if (auto* mine = dynamic_cast<R*>(&r)) {
    f(*mine);
    ++n;
  }
  if (auto* chain = dynamic_cast<OptimiserChain*>(&r))
    for (auto& sub : chain->rules) n += adjust_rules<R>(*sub, f);
  if (auto* mp = dynamic_cast<MixedPrecision*>(&r)) n += adjust_rules<R>(*mp->rule, f);
  return n;
}
FLX_API bool same_structure(const RuleState& a, const RuleState& b);
// Whether `after` (a changed copy of `before`) keeps the variants that
// Optimisers.jl's adjust refuses to change (RMSProp's centred).
FLX_API bool same_variants(const OptRule& before, const OptRule& after);
}  // namespace detail

// Optimisers.adjust!(state; field = value), typed: f changes any field of
// each rule of type R in the state's rule (also within chains and
// MixedPrecision); the moments are kept. ArgumentError when the rule has no
// R, or when the change would need another state (RMSProp's centred, as in
// Optimisers.jl; AccumGrad's n is fine):
//   adjust<Adam>(state, [](Adam& r) { r.beta = {0.8, 0.99}; r.epsilon = 1e-6; });
//   adjust<WeightDecay>(state, [](WeightDecay& r) { r.lambda = 0; });
template <class R, class F>
  requires std::is_base_of_v<OptRule, R> && std::is_invocable_v<F&, R&>
void adjust(OptState& state, F&& f) {
  std::shared_ptr<OptRule> rule = state.rule().clone();
  const int found = detail::adjust_rules<R>(*rule, f);
  std::ostringstream shown;
  shown << state.rule();
  FLX_CHECK(found > 0, ArgumentError, "adjust: the optimiser ", shown.str(), " has no rule of the type asked for");
  FLX_CHECK(detail::same_variants(state.rule(), *rule), ArgumentError, "adjust: RMSProp's centred cannot change, "
            "as the variants keep different states (as in Optimisers.jl); setup() the rule anew instead");
  std::vector<std::pair<std::string, Tensor>> params;
  for (const auto& leaf : state.entries()) params.emplace_back(leaf.path, leaf.param);
  OptState adjusted(rule, params);  // the new rule's fresh states: their structure
  auto& fresh = adjusted.entries();
  for (size_t i = 0; i < fresh.size(); ++i) {
    FLX_CHECK(detail::same_structure(fresh[i].state, state.entries()[i].state), ArgumentError, "adjust: after the "
              "change, ", *rule, " keeps another state than ", shown.str(), " (RMSProp's centred, say); setup() it "
              "anew instead");
    fresh[i].state = state.entries()[i].state;
    fresh[i].frozen = state.entries()[i].frozen;
  }
  state = std::move(adjusted);
}

namespace detail {
template <class T>
concept TrainTuple = requires { std::tuple_size<std::remove_cvref_t<T>>::value; };
}  // namespace detail

// Flux's train!(loss, model, data, state): for each element d of data, the
// gradient of loss(model, d...) (d a tuple or pair: its parts as
// arguments; otherwise d itself) and update(state, model, grad). A loss
// that is not finite throws flx::Error (Flux: DomainError) naming the step, before that step's
// update, as Flux's. Returns the losses, one per step.
template <class L, class M, class D>
std::vector<double> train(L&& loss, M& model, const D& data, OptState& state) {
  std::vector<double> losses;
  int64_t step = 0;
  for (const auto& d : data) {
    auto f = [&](const M& m) {
      if constexpr (detail::TrainTuple<decltype(d)>)
        return std::apply([&](const auto&... parts) { return loss(m, parts...); }, d);
      else
        return loss(m, d);
    };
    auto [val, grads] = withgradient(f, model);
    const double l = val.template item<double>();
    FLX_CHECK(std::isfinite(l), Error, "train: the loss is ", l, " at step ", step + 1,
              "; stopping before its update (check the data and the learning rate)");
    update(state, model, std::get<0>(grads));
    losses.push_back(l);
    ++step;
  }
  return losses;
}

}  // namespace flx

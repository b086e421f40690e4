// WeightNorm (Flux's, in normalise.jl there; Salimans & Kingma 2016): a
// layer whose weight is reparametrised as w = g ⊙ v / ‖v‖, the direction v
// (the layer's own field) and the magnitude g trained apart.
//
//   auto wd = WeightNorm(Dense(2, 3));       // WeightNorm(Dense(2 => 3), :weight; dims=1)  # 12 parameters
//   Tensor y = wd(x);                         // Dense(g .* v ./ norm(v; dims), bias)(x)
//   Dense d = reparametrize(wd);              // the plain layer, its weight w
//   auto plain = remove_weight_norms(model);  // every WeightNorm in a Chain replaced so
//
// The norm runs over `dims` (0-based; Flux's `dims`): by default the last dim
// of the weight (Flux's dims = -1), which for a Dense (out, in) weight is one
// norm per output row, PyTorch's weight_norm(linear); g has the weight's
// shape with those dims 1. At construction g = sqrt(sum(v², dims) + eps), so
// the layer computes what it did (to eps, the weight's element type's
// epsilon), as Flux's. The fields are `layer` and `g`: checkpoints hold
// "layer.weight" (v), the layer's other arrays and "g", Flux's names.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flx/functor.hpp"
#include "flx/layers/basic.hpp"
#include "flx/layers/outputsize.hpp"
#include "flx/layers/show.hpp"

namespace flx {

struct FLX_API WeightNormOptions {
  // The dims of the weight the norm runs over, 0-based, negative counting
  // from the end: {-1} (the default) is the last (Flux's dims = -1); an empty
  // list is every dim (Flux's dims = :).
  std::vector<int> dims = {-1};
};

namespace detail {
// The names of a layer's tensor fields, for messages.
template <class L>
std::string tensor_field_names() {
  std::string out;
  std::apply(
      [&](const auto&... f) {
        auto one = [&](const auto& fld) {
          if constexpr (std::is_same_v<std::decay_t<decltype(std::declval<L&>().*(fld.ptr))>, Tensor>)
            out += (out.empty() ? "" : ", ") + std::string(fld.name);
        };
        (one(f), ...);
      },
      fields_of<L, false>());
  return out;
}
// The tensor field `which` of l (declared with FLX_FUNCTOR), or nullptr.
template <class L>
auto tensor_field(L& l, const std::string& which) {
  using Base = std::remove_const_t<L>;
  std::conditional_t<std::is_const_v<L>, const Tensor*, Tensor*> found = nullptr;
  std::apply(
      [&](const auto&... f) {
        auto one = [&](const auto& fld) {
          if constexpr (std::is_same_v<std::decay_t<decltype(l.*(fld.ptr))>, Tensor>)
            if (!found && which == fld.name) found = &(l.*(fld.ptr));
        };
        (one(f), ...);
      },
      fields_of<Base, false>());
  return found;
}
// The checked field of `layer` and its dims resolved (sorted, 0-based):
// ArgumentError naming the layer for a field it lacks, an undefined or
// all-zero one, or dims outside the weight's.
FLX_API std::vector<int> weight_norm_dims(const std::string& layer, const std::string& which, const std::string& fields,
                                  const Tensor* v, const std::vector<int>& dims);
// sqrt(sum(v², dims) + eps): g at construction.
FLX_API Tensor weight_norm_magnitude(const Tensor& v, const std::vector<int>& dims);
// g ⊙ v / sqrt(sum(v², dims) + eps), differentiable in g and v.
FLX_API Tensor weight_norm_weight(const std::string& layer, const Tensor& g, const Tensor& v, const std::vector<int>& dims);
FLX_API void show_weight_norm(std::ostream& os, const std::string& layer, const std::string& which,
                      const std::vector<int>& dims, int ndims);
}  // namespace detail

template <class L>
struct WeightNorm {
  L layer;
  Tensor g;
  std::string which = "weight";
  std::vector<int> dims;  // resolved: 0-based, sorted

  explicit WeightNorm(L l, const std::string& which_field = "weight", const WeightNormOptions& o = {})
      : layer(std::move(l)), which(which_field) {
    const Tensor* v = detail::tensor_field(layer, which);
    dims = detail::weight_norm_dims(detail::layer_string(layer), which, detail::tensor_field_names<L>(), v, o.dims);
    g = detail::weight_norm_magnitude(*v, dims);
  }
  // The layer with its weight reparametrised, called as the layer is.
  template <class... X>
  auto operator()(const X&... x) const;
};
template <class L>
auto flx_functor_fields(detail::tag<WeightNorm<L>>) {
  using W = WeightNorm<L>;
  return std::make_tuple(detail::Field<W, L>{"layer", &W::layer}, detail::Field<W, Tensor>{"g", &W::g});
}

// Flux's reparametrize: the plain layer, its field `which` set to g ⊙ v / ‖v‖.
template <class L>
L reparametrize(const WeightNorm<L>& w) {
  L out = w.layer;
  Tensor* v = detail::tensor_field(out, w.which);
  std::ostringstream name;
  show_compact(name, w);
  *v = detail::weight_norm_weight(name.str(), w.g, *v, w.dims);
  return out;
}

template <class L>
template <class... X>
auto WeightNorm<L>::operator()(const X&... x) const {
  return reparametrize(*this)(x...);
}

// WeightNorm(Dense(2 => 3), :weight; dims=1), Flux's form with flx's 0-based
// dims (dims=: for every dim).
template <class L>
void show_compact(std::ostream& os, const WeightNorm<L>& w) {
  detail::show_weight_norm(os, detail::layer_string(w.layer), w.which, w.dims,
                           detail::tensor_field(w.layer, w.which)->ndims());
}
// The layer's own shape rule (the weight's shape does not change).
template <class L, class... S>
auto outputsize(const WeightNorm<L>& w, const S&... s) {
  return outputsize(w.layer, s...);
}

// ---- remove_weight_norms --------------------------------------------------------

namespace detail {
template <class T>
struct has_weight_norm;
template <class Fields>
struct fields_have_weight_norm;
template <class... T, class... M>
struct fields_have_weight_norm<std::tuple<Field<T, M>...>> : std::bool_constant<(has_weight_norm<M>::value || ...)> {};
template <class T>
constexpr bool has_weight_norm_of() {
  if constexpr (DeclaredFunctor<T>) return fields_have_weight_norm<decltype(flx_functor_fields(tag<T>{}))>::value;
  else return false;
}
template <class T>
struct has_weight_norm : std::bool_constant<has_weight_norm_of<T>()> {};
template <class L>
struct has_weight_norm<WeightNorm<L>> : std::true_type {};
template <class... A>
struct has_weight_norm<std::tuple<A...>> : std::bool_constant<(has_weight_norm<A>::value || ...)> {};
template <class A, class B>
struct has_weight_norm<std::pair<A, B>> : std::bool_constant<has_weight_norm<A>::value || has_weight_norm<B>::value> {};
template <class A, class Al>
struct has_weight_norm<std::vector<A, Al>> : has_weight_norm<A> {};
template <class A>
struct has_weight_norm<std::optional<A>> : has_weight_norm<A> {};
}  // namespace detail

// Flux's remove_weight_norms: the model with each WeightNorm replaced by its
// reparametrised layer (reparametrize), a type without them. It looks into
// Chains (tuple and run-time) and WeightNorms; a model that holds a
// WeightNorm inside another container does not compile (rebuild that
// container from reparametrize(...) of its parts).
template <class T>
auto remove_weight_norms(const T& x);

namespace detail {
template <class T>
struct is_weight_norm : std::false_type {};
template <class L>
struct is_weight_norm<WeightNorm<L>> : std::true_type {};
template <class T>
struct is_chain : std::false_type {};
template <class... L>
struct is_chain<Chain<L...>> : std::true_type {};
template <class>
inline constexpr bool no_weight_norm_walk_v = false;
}  // namespace detail

template <class T>
auto remove_weight_norms(const T& x) {
  if constexpr (detail::is_weight_norm<T>::value) {
    return reparametrize(x);
  } else if constexpr (detail::is_chain<T>::value) {
    if constexpr (detail::is_std_vector<std::decay_t<decltype(x.layers)>>::value) {
      using E = std::decay_t<decltype(remove_weight_norms(x.layers.front()))>;
      std::vector<E> out;
      out.reserve(x.layers.size());
      for (const auto& l : x.layers) out.push_back(remove_weight_norms(l));
      return Chain<std::vector<E>>(std::move(out));
    } else {
      return std::apply([](const auto&... l) { return Chain(remove_weight_norms(l)...); }, x.layers);
    }
  } else {
    static_assert(!detail::has_weight_norm<T>::value || detail::no_weight_norm_walk_v<T>,
                  "flx::remove_weight_norms looks into Chains only: this model holds a WeightNorm inside another "
                  "container; rebuild that container from reparametrize(...) of its parts");
    return x;
  }
}

}  // namespace flx

// Basic layers (Flux's basic.jl): Dense and Chain. Both are plain structs of
// tensors, callable on a batch (features × observations), and print as Flux
// prints them.
#pragma once

#include <ostream>
#include <sstream>
#include <tuple>

#include "flx/activations.hpp"
#include "flx/functor.hpp"

namespace flx {

// y = act.(weight * x .+ bias); weight is (out, in), bias is (out).
struct Dense {
  Tensor weight;
  Tensor bias;
  Activation act;

  Dense(int64_t in, int64_t out, Activation act = {});  // Glorot-uniform weight, zero bias
  Dense(Tensor weight, Tensor bias, Activation act = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(Dense, weight, bias)
std::ostream& operator<<(std::ostream& os, const Dense& d);

// Glorot (Xavier) uniform initialisation, as Flux.glorot_uniform.
Tensor glorot_uniform(int64_t out, int64_t in);

template <class... Layers>
struct Chain {
  std::tuple<Layers...> layers;

  explicit Chain(Layers... ls) : layers(std::move(ls)...) {}
  Tensor operator()(const Tensor& x) const {
    return std::apply([&](const auto&... l) {
      Tensor h = x;
      ((h = l(h)), ...);
      return h;
    }, layers);
  }
};
template <class... Layers>
Chain(Layers...) -> Chain<Layers...>;

template <class... Layers>
auto flx_functor_fields(detail::tag<Chain<Layers...>>) {
  return std::make_tuple(detail::Field<Chain<Layers...>, std::tuple<Layers...>>{"layers", &Chain<Layers...>::layers});
}

namespace detail {
void show_parameter_count(std::ostream& os, int64_t n);
void show_compact(std::ostream& os, const Dense& d);
template <class... Layers>
void show_compact(std::ostream& os, const Chain<Layers...>& c);

// The compact one-line form of a layer, without the parameter summary.
template <class L>
void show_layer(std::ostream& os, const L& l) {
  if constexpr (requires { show_compact(os, l); }) show_compact(os, l);
  else if constexpr (requires { L::name(); }) os << L::name();
  else if constexpr (requires { os << l; }) os << l;
  else os << "#layer";
}

template <class... Layers>
void show_compact(std::ostream& os, const Chain<Layers...>& c) {
  os << "Chain(";
  std::apply([&](const auto&... l) {
    int i = 0;
    ((os << (i++ ? ", " : ""), show_layer(os, l)), ...);
  }, c.layers);
  os << ")";
}
}  // namespace detail

// Chain(Dense(10 => 5, σ), Dense(5 => 2), softmax)  # 67 parameters
template <class... Layers>
std::ostream& operator<<(std::ostream& os, const Chain<Layers...>& c) {
  detail::show_compact(os, c);
  int64_t n = 0;
  for (const auto& t : leaves(c)) n += t.numel();
  detail::show_parameter_count(os, n);
  return os;
}

}  // namespace flx

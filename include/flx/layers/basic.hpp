// Basic layers (Flux's basic.jl): Dense, Chain, Scale and Bilinear, and
// Flux.activations. Each is a plain struct of tensors, callable on a batch
// (features × observations), printed as Flux prints it (show.hpp). The
// containers that combine layers otherwise (SkipConnection, Parallel,
// PairwiseFusion, Maxout) are in containers.hpp.
#pragma once

#include "flx/export.hpp"

#include <cstddef>
#include <ostream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flx/activations.hpp"
#include "flx/functor.hpp"
#include "flx/initialisers.hpp"
#include "flx/layers/outputsize.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// Dense's options, Flux's keywords: the weight's initialiser, called with
// its dims (out, in) (empty: glorot_uniform), and whether there is a bias.
struct FLX_API DenseOptions {
  InitFn init = {};
  bool bias = true;
};

// y = act.(weight * x .+ bias); weight is (out, in), bias is (out).
struct FLX_API Dense {
  Tensor weight;
  Tensor bias;
  Activation act;

  // Glorot-uniform weight (or .init's), zero bias (or none: .bias = false).
  Dense(int64_t in, int64_t out, Activation act = {}, const DenseOptions& o = {});
  Dense(int64_t in, int64_t out, const DenseOptions& o) : Dense(in, out, {}, o) {}
  Dense(Tensor weight, Tensor bias, Activation act = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(Dense, weight, bias)
FLX_API void show_compact(std::ostream& os, const Dense& d);  // Dense(10 => 5, σ)
FLX_API Shape outputsize(const Dense& d, const Shape& x);      // (out, x's other dims...)

// ---- Chain -----------------------------------------------------------------

namespace detail {
// h = layers[I](h), then the next: a value may change type on the way (a
// tuple out of PairwiseFusion into Parallel), as in Flux.
template <size_t I, class Tuple, class X>
auto apply_chain(const Tuple& layers, const X& x) {
  if constexpr (I == std::tuple_size_v<Tuple>) return x;
  else return apply_chain<I + 1>(layers, std::get<I>(layers)(x));
}
FLX_API void check_chain_index(size_t i, size_t n);
}  // namespace detail

// Layers applied in order: Chain(Dense(10, 5, relu), Dense(5, 2), softmax).
// Called with several inputs, the first layer gets them as one std::tuple
// (Flux's Chain(x, ys...)). The layers are the std::tuple `layers`:
// std::get<1>(m.layers) is the second.
template <class... Layers>
struct Chain {
  std::tuple<Layers...> layers;

  explicit Chain(Layers... ls) : layers(std::move(ls)...) {}
  template <class X>
  auto operator()(const X& x) const {
    return detail::apply_chain<0>(layers, x);
  }
  template <class X, class Y, class... Ys>
  auto operator()(const X& x, const Y& y, const Ys&... ys) const {
    return (*this)(std::make_tuple(x, y, ys...));
  }
  static constexpr size_t size() { return sizeof...(Layers); }
  FLX_LAYER_TEMPLATE(Chain, layers)
};
template <class... Layers>
Chain(Layers...) -> Chain<Layers...>;

// A Chain of run-time length, of layers of one type (Flux's
// Chain([layer1, layer2, ...])): a transformer of `depth` blocks,
//   std::vector<Block> blocks; for (...) blocks.emplace_back(dim);
//   auto trunk = Chain(std::move(blocks));   // trunk[0], trunk.size()
// `layers` is the std::vector; checkpoint names are "layers.0.weight", ...,
// as a tuple Chain's.
template <class L, class A>
struct Chain<std::vector<L, A>> {
  std::vector<L, A> layers;

  explicit Chain(std::vector<L, A> ls) : layers(std::move(ls)) {}
  template <class X>
  X operator()(const X& x) const {
    X h = x;
    for (const L& l : layers) h = l(h);
    return h;
  }
  // The layer at 0-based index i; an ArgumentError past the end.
  const L& operator[](size_t i) const {
    detail::check_chain_index(i, layers.size());
    return layers[i];
  }
  L& operator[](size_t i) {
    detail::check_chain_index(i, layers.size());
    return layers[i];
  }
  size_t size() const { return layers.size(); }
  auto begin() const { return layers.begin(); }
  auto end() const { return layers.end(); }
  // Shows its list as Flux does: Chain([Dense(2 => 3), Dense(3 => 4)]).
  FLX_LAYER_TEMPLATE(Chain, layers)
};

namespace detail {
template <size_t I, class Tuple, class S>
auto chain_shape(const Tuple& layers, const S& s) {
  if constexpr (I == std::tuple_size_v<Tuple>) return s;
  else return chain_shape<I + 1>(layers, outputsize(std::get<I>(layers), s));
}
}  // namespace detail
// Each layer's shape rule in turn (outputsize.hpp); several shapes go to the
// first layer as one std::tuple, as a Chain passes several inputs.
template <class... Layers, class S>
auto outputsize(const Chain<Layers...>& c, const S& x) {
  if constexpr (detail::is_std_vector<std::decay_t<decltype(c.layers)>>::value) {
    S h = x;
    for (const auto& l : c.layers) h = outputsize(l, h);
    return h;
  } else {
    return detail::chain_shape<0>(c.layers, x);
  }
}
template <class... Layers, class X, class Y, class... Ys>
auto outputsize(const Chain<Layers...>& c, const X& x, const Y& y, const Ys&... ys) {
  return outputsize(c, std::make_tuple(x, y, ys...));
}

// Flux.activations: the output of every layer of a Chain, in order (the last
// is the Chain's output). Each layer must return a Tensor.
template <class... Layers>
std::vector<Tensor> activations(const Chain<Layers...>& c, const Tensor& x) {
  std::vector<Tensor> out;
  if constexpr (detail::is_std_vector<std::decay_t<decltype(c.layers)>>::value) {
    Tensor h = x;
    for (const auto& l : c.layers) out.push_back(h = l(h));
  } else {
    Tensor h = x;
    auto one = [&](const auto& l) {
      static_assert(std::is_convertible_v<decltype(l(h)), Tensor>,
                    "flx::activations: every layer of the Chain must return a Tensor");
      out.push_back(h = l(h));
    };
    std::apply([&](const auto&... l) { (one(l), ...); }, c.layers);
  }
  return out;
}

// ---- Scale -----------------------------------------------------------------

namespace detail {
// Scale's arguments: sizes, then an optional activation.
template <class... A>
struct ScaleArgs;
// The sizes Scale(4, 3) was given, unchecked (a Shape would refuse a
// negative one in its own words, not naming Scale).
struct FLX_API ScaleDims {
  std::vector<int64_t> dims;
};
}  // namespace detail

// y = act.(scale .* x .+ bias), elementwise with broadcasting (Flux's Scale;
// LayerNorm's affine part): scale and bias have the layer's size, which
// lines up with x's leading dims. Scale(2), Scale(4, 3), Scale(5, relu):
// scale ones, bias zeros. Scale(scale, bias[, act]) takes the arrays (an
// undefined bias for none: Flux's bias=false).
struct FLX_API Scale {
  Tensor scale;
  Tensor bias;
  Activation act;

  template <class... A>
    requires(sizeof...(A) >= 1 && detail::ScaleArgs<A...>::ok)
  explicit Scale(const A&... args) : Scale(detail::ScaleArgs<A...>::size(args...), detail::ScaleArgs<A...>::act(args...)) {}
  Scale(const Shape& size, Activation act);
  Scale(detail::ScaleDims size, Activation act);
  Scale(Tensor scale, Tensor bias, Activation act = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(Scale, scale, bias)
FLX_API void show_compact(std::ostream& os, const Scale& l);  // Scale(4, 3, relu; bias=false)
FLX_API Shape outputsize(const Scale& l, const Shape& x);      // broadcast of the layer's size with x's

namespace detail {
template <class... A>
struct ScaleArgs {
  static constexpr size_t n = sizeof...(A);
  using Last = std::tuple_element_t<n - 1, std::tuple<A...>>;
  static constexpr bool last_is_size = std::is_integral_v<Last>;
  template <size_t... I>
  static constexpr bool sizes_integral(std::index_sequence<I...>) {
    return (std::is_integral_v<std::tuple_element_t<I, std::tuple<A...>>> && ...);
  }
  static constexpr bool ok = sizes_integral(std::make_index_sequence<last_is_size ? n : n - 1>{}) &&
                             (last_is_size || std::is_constructible_v<Activation, const Last&>) &&
                             (last_is_size || n >= 2);
  static ScaleDims size(const A&... args) {
    ScaleDims s;
    size_t i = 0;
    auto one = [&](const auto& a) {
      if constexpr (std::is_integral_v<std::decay_t<decltype(a)>>) {
        if (last_is_size || i + 1 < n) s.dims.push_back(int64_t(a));
      }
      ++i;
    };
    (one(args), ...);
    return s;
  }
  static Activation act(const A&... args) {
    if constexpr (last_is_size) return {};
    else return Activation(std::get<n - 1>(std::tie(args...)));
  }
};
}  // namespace detail

// ---- Bilinear --------------------------------------------------------------

// z = act.(x' W[o, :, :] y .+ bias[o]) for each output o (Flux's Bilinear):
// weight (out, in1, in2), bias (out). b(x, y) takes x (in1, batch...) and y
// (in2, batch...) with the same batch dims, or vectors (in1), (in2); b(x) is
// b(x, x), and b(std::tuple{x, y}) is b(x, y) (what a Chain or Parallel
// passes on). Bilinear(in1, in2, out[, act]) draws a Glorot-uniform weight
// and a zero bias; Bilinear(in, out[, act]) is Bilinear(in, in, out).
struct FLX_API Bilinear {
  Tensor weight;
  Tensor bias;
  Activation act;

  Bilinear(int64_t in1, int64_t in2, int64_t out, Activation act = {});
  Bilinear(int64_t in, int64_t out, Activation act = {}) : Bilinear(in, in, out, std::move(act)) {}
  Bilinear(Tensor weight, Tensor bias, Activation act = {});  // bias may be undefined
  Tensor operator()(const Tensor& x, const Tensor& y) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, x); }
  Tensor operator()(const std::tuple<Tensor, Tensor>& xy) const { return (*this)(std::get<0>(xy), std::get<1>(xy)); }
};
FLX_FUNCTOR(Bilinear, weight, bias)
FLX_API void show_compact(std::ostream& os, const Bilinear& l);  // Bilinear(5 => 7), Bilinear((5, 4) => 3, tanh)
FLX_API Shape outputsize(const Bilinear& l, const Shape& x, const Shape& y);
inline Shape outputsize(const Bilinear& l, const Shape& x) { return outputsize(l, x, x); }
inline Shape outputsize(const Bilinear& l, const std::tuple<Shape, Shape>& xy) {
  return outputsize(l, std::get<0>(xy), std::get<1>(xy));
}

}  // namespace flx

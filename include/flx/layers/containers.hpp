// Containers (Flux's basic.jl): layers that combine layers otherwise than
// one after another (Chain, in basic.hpp).
//
//   SkipConnection(block, std::plus<>{})          // block(x) + x: a residual
//   Parallel(std::plus<>{}, a, b)                 // a(x) + b(x), or a(x) + b(y) for p(x, y)
//   PairwiseFusion(std::plus<>{}, a, b, c)        // (y1, y2, y3), each fed the last
//   Maxout(a, b)                                  // max.(a(x), b(x))
//
// A connection is any callable that holds no tensors: std::plus<>{}, a
// captureless lambda (`[](const Tensor& a, const Tensor& b) { return
// cat({a, b}, 2); }`), a function, or a layer such as Bilinear (whose
// parameters then train with the rest, under the name `connection`). A
// binary connection given more than two outputs folds them from the left,
// as Julia's + does: connection(connection(y1, y2), y3). Every container
// moves with gpu/fmap, trains through gradient/setup/update, saves as
// "layers.0.weight", ..., prints as Flux prints it (show.hpp) and has a
// shape rule (outputsize.hpp): the forward pass and outputsize run the same
// code below, once on tensors (detail::Forward), once on shapes
// (detail::Shapes).
#pragma once

#include "flx/export.hpp"

#include <cstddef>
#include <functional>
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

// Maxout's connection: the elementwise maximum (NaN propagates, as Julia's max).
struct FLX_API MaxFn {
  Tensor operator()(const Tensor& a, const Tensor& b) const { return maximum(a, b); }
  static const char* name() { return "max"; }
};

namespace detail {

// A connection's children must be visible to fmap: a lambda capturing a
// tensor (or anything else) would be left behind by gpu and never trained.
template <class C>
constexpr void require_connection() {
  static_assert(is_walkable_v<C>,
                "flx: a container's connection must hold no tensors that fmap cannot see: use std::plus<>{}, a "
                "captureless lambda, a function, a layer declared with FLX_FUNCTOR (Bilinear), or a struct of no "
                "tensors marked FLX_LEAF; a capturing lambda cannot be walked, so what it captured would stay behind "
                "on gpu() and never train");
}

template <class T>
concept TupleLike = requires { std::tuple_size<T>::value; };

// "2×5" for a tensor or a shape, the shapes of a tuple's, "a value" otherwise
// (for messages).
template <class T>
std::string shape_text(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return v.defined() ? v.shape().str() : std::string("undefined");
  } else if constexpr (std::is_same_v<T, Shape>) {
    return v.str();
  } else if constexpr (TupleLike<T>) {
    std::string s = "(";
    std::apply([&](const auto&... e) {
      size_t i = 0;
      ((s += (i++ ? ", " : "") + shape_text(e)), ...);
    }, v);
    return s + ")";
  } else {
    return "a value";
  }
}
template <class... T>
std::string shapes_text(const T&... v) {
  std::string s;
  size_t i = 0;
  ((s += (i++ ? ", " : "") + shape_text(v)), ...);
  return s;
}

// Wrong number of inputs (Flux's ArgumentError).
FLX_API [[noreturn]] void arity_error(const std::string& container, size_t layers, size_t inputs, const std::string& shapes);
// A connection (or Maxout's max) that threw DimensionMismatch, again with the
// container and the shapes it was combining.
FLX_API [[noreturn]] void connection_error(const std::string& container, const std::string& connection,
                                   const std::string& shapes, const char* what);
FLX_API void check_maxout_size(size_t n);

// connection(connection(a, b), rest...): a binary connection over more.
template <class C, class A, class B, class... Rest>
auto fold_left(const C& c, const A& a, const B& b, const Rest&... rest) {
  static_assert(std::is_invocable_v<const C&, const A&, const B&>,
                "flx: the connection takes neither all the outputs at once nor two of them");
  if constexpr (sizeof...(Rest) == 0) return c(a, b);
  else return fold_left(c, c(a, b), rest...);
}
// connection(ys...) when it takes them all; else, for one output, the
// output itself (Julia's +(y) == y); else a left fold of a binary one.
template <class C, class Y, class... Ys>
auto combine(const C& c, const Y& y, const Ys&... ys) {
  if constexpr (std::is_invocable_v<const C&, const Y&, const Ys&...>) return c(y, ys...);
  else if constexpr (sizeof...(Ys) == 0) return y;
  else return fold_left(c, y, ys...);
}

// The two ways a container runs: on tensors (its forward pass), and on
// shapes (its outputsize), with the same steps.
struct FLX_API Forward {
  template <class L, class X>
  auto apply(const L& l, const X& x) const {
    return l(x);
  }
  template <class M, class C, class... Ys>
  auto connect(const M& m, const C& c, const Ys&... ys) const {
    try {
      return combine(c, ys...);
    } catch (const DimensionMismatch& e) {
      connection_error(layer_string(m), layer_string(c), shapes_text(ys...), e.what());
    }
  }
};
struct FLX_API Shapes {
  template <class L, class X>
  auto apply(const L& l, const X& x) const {
    return outputsize(l, x);
  }
  template <class M, class C, class... S>
  auto connect(const M& m, const C& c, const S&... s) const {
    try {
      return outputsize(c, s...);
    } catch (const DimensionMismatch& e) {
      connection_error(layer_string(m), layer_string(c), shapes_text(s...), e.what());
    }
  }
};

// Parallel: one input for every layer, or one input each.
template <class E, class P, class... Xs>
auto parallel_many(const E& e, const P& p, const Xs&... xs);
template <class E, class P, class X>
auto parallel_one(const E& e, const P& p, const X& x) {
  if constexpr (TupleLike<X>) {  // a tuple is always splatted
    return std::apply([&](const auto&... xs) { return parallel_many(e, p, xs...); }, x);
  } else {
    return std::apply([&](const auto&... l) { return e.connect(p, p.connection, e.apply(l, x)...); }, p.layers);
  }
}
template <class E, class P, class... Xs>
auto parallel_many(const E& e, const P& p, const Xs&... xs) {
  constexpr size_t nl = P::size(), nx = sizeof...(Xs);
  if constexpr (nx == 1) {
    return parallel_one(e, p, xs...);
  } else if constexpr (nl == 1) {  // one layer takes every input
    const auto& l = std::get<0>(p.layers);
    return e.connect(p, p.connection, e.apply(l, xs)...);
  } else if constexpr (nl == nx) {
    return std::apply([&](const auto&... l) { return e.connect(p, p.connection, e.apply(l, xs)...); }, p.layers);
  } else {
    arity_error(layer_string(p), nl, nx, shapes_text(xs...));
  }
}

// PairwiseFusion: layer I on h (its input, already fused), the outputs so
// far in ys; input(I) is the I-th input.
template <size_t I, class E, class P, class In, class Ys, class H>
auto pairwise_fuse(const E& e, const P& p, const In& input, const Ys& ys, const H& h) {
  auto y = e.apply(std::get<I>(p.layers), h);
  auto all = std::tuple_cat(ys, std::make_tuple(y));
  if constexpr (I + 1 == P::size()) {
    return all;
  } else {
    const auto& next = input(std::integral_constant<size_t, I + 1>{});
    return pairwise_fuse<I + 1>(e, p, input, all, e.connect(p, p.connection, y, next));
  }
}
template <class E, class P, class... Xs>
auto pairwise_many(const E& e, const P& p, const Xs&... xs);
template <class E, class P, class X>
auto pairwise_one(const E& e, const P& p, const X& x) {
  if constexpr (TupleLike<X>) {
    return std::apply([&](const auto&... xs) { return pairwise_many(e, p, xs...); }, x);
  } else {
    return pairwise_fuse<0>(e, p, [&](auto) -> const X& { return x; }, std::tuple<>{}, x);
  }
}
template <class E, class P, class... Xs>
auto pairwise_many(const E& e, const P& p, const Xs&... xs) {
  constexpr size_t nl = P::size(), nx = sizeof...(Xs);
  if constexpr (nx == 1) {
    return pairwise_one(e, p, xs...);
  } else if constexpr (nl == nx) {
    const auto in = std::tie(xs...);
    auto input = [&]<size_t I>(std::integral_constant<size_t, I>) -> const auto& { return std::get<I>(in); };
    return pairwise_fuse<0>(e, p, input, std::tuple<>{}, std::get<0>(in));
  } else {
    arity_error(layer_string(p), nl, nx, shapes_text(xs...));
  }
}

// Maxout: the elementwise max of every layer's output.
template <class E, class M, class X>
auto maxout_eval(const E& e, const M& m, const X& x) {
  if constexpr (is_std_vector<std::decay_t<decltype(m.layers)>>::value) {
    auto y = e.apply(m.layers[0], x);
    for (size_t i = 1; i < m.layers.size(); ++i) y = e.connect(m, MaxFn{}, y, e.apply(m.layers[i], x));
    return y;
  } else {
    return std::apply([&](const auto&... l) { return e.connect(m, MaxFn{}, e.apply(l, x)...); }, m.layers);
  }
}

}  // namespace detail

// ---- SkipConnection ----------------------------------------------------------

// connection(layers(x), x) (Flux's SkipConnection): a residual block with
// std::plus<>{}; with a layer as the connection (Bilinear), its parameters
// train too.
template <class L, class C>
struct SkipConnection {
  L layers;
  C connection;

  SkipConnection(L layer, C conn) : layers(std::move(layer)), connection(std::move(conn)) {
    detail::require_connection<C>();
  }
  template <class X>
  auto operator()(const X& x) const {
    return eval(detail::Forward{}, *this, x);
  }
  template <class E, class X>
  static auto eval(const E& e, const SkipConnection& s, const X& x) {
    return e.connect(s, s.connection, e.apply(s.layers, x), x);
  }
  FLX_LAYER_TEMPLATE(SkipConnection, layers, connection)
};
template <class L, class C, class X>
auto outputsize(const SkipConnection<L, C>& s, const X& x) {
  return SkipConnection<L, C>::eval(detail::Shapes{}, s, x);
}

// ---- Parallel ------------------------------------------------------------------

// Flux's Parallel: p(x) is connection(l1(x), l2(x), ...); p(x1, x2, ...)
// gives each layer its own input, connection(l1(x1), l2(x2), ...), or, with
// one layer, that layer every input; p(std::tuple{x1, x2}) is p(x1, x2).
// Any other number of inputs is an ArgumentError naming the Parallel and the
// shapes. The layers are the std::tuple `layers` (std::get<0>(p.layers)).
template <class C, class... Layers>
struct Parallel {
  static_assert(sizeof...(Layers) >= 1, "flx::Parallel needs at least one layer, as Flux's");
  C connection;
  std::tuple<Layers...> layers;

  explicit Parallel(C conn, Layers... ls) : connection(std::move(conn)), layers(std::move(ls)...) {
    detail::require_connection<C>();
  }
  template <class X, class... Xs>
  auto operator()(const X& x, const Xs&... xs) const {
    return detail::parallel_many(detail::Forward{}, *this, x, xs...);
  }
  static constexpr size_t size() { return sizeof...(Layers); }
  FLX_LAYER_TEMPLATE(Parallel, connection, layers)
};
template <class C, class... Layers, class X, class... Xs>
auto outputsize(const Parallel<C, Layers...>& p, const X& x, const Xs&... xs) {
  return detail::parallel_many(detail::Shapes{}, p, x, xs...);
}

// ---- PairwiseFusion --------------------------------------------------------------

// Flux's PairwiseFusion: with inputs x1, ..., xN (one per layer, or a
// std::tuple of them), y1 = l1(x1) and y_i = l_i(connection(y_{i-1}, x_i));
// with one input x, each x_i is x. Returns the std::tuple (y1, ..., yN).
// (Flux's docstring draws the one-input case as connection(l_i(y_{i-1}), x);
// its code, followed here, computes l_i(connection(y_{i-1}, x)).) Other
// numbers of inputs: an ArgumentError naming it and the shapes.
template <class C, class... Layers>
struct PairwiseFusion {
  static_assert(sizeof...(Layers) >= 1, "flx::PairwiseFusion needs at least one layer");
  C connection;
  std::tuple<Layers...> layers;

  explicit PairwiseFusion(C conn, Layers... ls) : connection(std::move(conn)), layers(std::move(ls)...) {
    detail::require_connection<C>();
  }
  template <class X, class... Xs>
  auto operator()(const X& x, const Xs&... xs) const {
    return detail::pairwise_many(detail::Forward{}, *this, x, xs...);
  }
  static constexpr size_t size() { return sizeof...(Layers); }
  FLX_LAYER_TEMPLATE(PairwiseFusion, connection, layers)
};
template <class C, class... Layers, class X, class... Xs>
auto outputsize(const PairwiseFusion<C, Layers...>& p, const X& x, const Xs&... xs) {
  return detail::pairwise_many(detail::Shapes{}, p, x, xs...);
}

// ---- Maxout --------------------------------------------------------------------

// The elementwise maximum of its layers' outputs, each given the same input
// (Flux's Maxout). Maxout(a, b, c) keeps them in the std::tuple `layers`;
// Maxout(make, n) calls make() n times for a run-time number of alike layers
// (a std::vector), as Flux's Maxout(f, n).
template <class... Layers>
struct Maxout {
  static_assert(sizeof...(Layers) >= 1, "flx::Maxout needs at least one layer");
  std::tuple<Layers...> layers;

  explicit Maxout(Layers... ls) : layers(std::move(ls)...) {}
  Tensor operator()(const Tensor& x) const { return detail::maxout_eval(detail::Forward{}, *this, x); }
  FLX_LAYER_TEMPLATE(Maxout, layers)
};
template <class L, class A>
struct Maxout<std::vector<L, A>> {
  std::vector<L, A> layers;

  explicit Maxout(std::vector<L, A> ls) : layers(std::move(ls)) { detail::check_maxout_size(layers.size()); }
  template <class F>
    requires std::is_invocable_r_v<L, F&>
  Maxout(F make, size_t n) {
    layers.reserve(n);
    for (size_t i = 0; i < n; ++i) layers.push_back(make());
    detail::check_maxout_size(layers.size());
  }
  Tensor operator()(const Tensor& x) const { return detail::maxout_eval(detail::Forward{}, *this, x); }
  // As FLX_LAYER_TEMPLATE's, but the list's layers are the children, one by
  // one, as Flux's Maxout(f, n) shows them.
  friend auto flx_functor_fields(detail::tag<Maxout>) {
    return std::make_tuple(detail::Field<Maxout, std::vector<L, A>>{"layers", &Maxout::layers});
  }
  friend const char* flx_show_name(const Maxout&) { return "Maxout"; }
  template <class F>
  friend void flx_for_each_child(const Maxout& m, F&& f) {
    for (const auto& l : m.layers) f(l);
  }
};
template <class... Layers>
Maxout(Layers...) -> Maxout<Layers...>;
template <class F, class N>
  requires(std::is_invocable_v<F&> && std::is_integral_v<N>)
Maxout(F, N) -> Maxout<std::vector<std::decay_t<std::invoke_result_t<F&>>>>;

template <class... Layers, class X>
auto outputsize(const Maxout<Layers...>& m, const X& x) {
  return detail::maxout_eval(detail::Shapes{}, m, x);
}

}  // namespace flx

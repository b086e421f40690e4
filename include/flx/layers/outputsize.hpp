// outputsize(model, Shape): the shape of model(x) for an x of that shape,
// as Flux's outputsize, without computing anything:
//
//   auto m = Chain(Conv({3, 3}, 3, 16), Conv({3, 3}, 16, 32), flatten);
//   outputsize(m, Shape{10, 10, 3, 64});             // (1152, 64)
//   outputsize(Parallel(vcat_fn, a, b), Shape{5, 64}, Shape{7, 64});
//
// How: every layer has a shape rule, an overload found by argument lookup,
//
//   Shape outputsize(const MyLayer& l, const Shape& x);
//
// that checks x as the layer's forward pass does (the same typed error, the
// same words: the forward pass calls it, or both call one function of the
// op, as the convolutions' and pools' do) and returns the output's shape.
// Containers combine their children's rules; a connection or a layer of
// several inputs has a rule of several shapes (Bilinear: x's and y's), and a
// value that is a std::tuple of tensors has a std::tuple of shapes. No
// tensor is made, no kernel runs, no device is touched, so a model on any
// device, of any size, answers at once (Flux runs the model on arrays of a
// number type `Nil` instead; C++ layers compute on tensors, so the rules
// are written out). Built in: every flx layer, flatten, the activations
// (shapes unchanged; glu halves dim 0), each declared beside its type,
// and std::plus<>, std::minus<>, std::multiplies<>, std::divides<> and
// Maxout's max (shapes broadcast), here. A lambda or a plain function has no
// rule: in a model that outputsize must see through, write it as a struct
// with one (docs/layers.md).
// outputsize(model, s1, s2, ...) passes the shapes as Flux does: to a
// Parallel or Bilinear as several inputs, to a Chain as one std::tuple.
#pragma once

#include "flx/export.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>

#include "flx/activations.hpp"
#include "flx/layers/show.hpp"
#include "flx/shape.hpp"

namespace flx {

struct MaxFn;  // Maxout's elementwise max (containers.hpp)

namespace detail {

// The elementwise operators that broadcast (Julia's .+, .-, .*, ./, max.).
template <class T>
inline constexpr bool broadcasts_v = std::is_same_v<T, std::plus<>> || std::is_same_v<T, std::minus<>> ||
                                     std::is_same_v<T, std::multiplies<>> || std::is_same_v<T, std::divides<>> ||
                                     std::is_same_v<T, MaxFn>;

// Julia's broadcast of two shapes (leading dims aligned, each pair equal
// or one of them 1); DimensionMismatch naming `op` and both.
FLX_API Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

template <class>
inline constexpr bool no_rule_v = false;

template <class T>
const char* name_of() {
  if constexpr (std::is_same_v<T, MaxFn>) return "maximum";  // the op's own name, as the forward pass says it
  else return operator_name<T>();
}

}  // namespace detail

// The rule of what has no rule of its own: the elementwise operators
// broadcast; anything else does not compile. (The activations, flatten and
// every layer declare their own rules beside them.)
template <class M, class... S>
auto outputsize(const M&, const S&... s) {
  constexpr bool shapes = (std::is_same_v<S, Shape> && ...);
  if constexpr (detail::broadcasts_v<M> && sizeof...(S) >= 1 && shapes) {
    const Shape all[] = {s...};
    Shape out = all[0];
    for (size_t i = 1; i < sizeof...(S); ++i) out = detail::broadcast_shapes(out, all[i], detail::name_of<M>());
    return out;
  } else {
    static_assert(detail::no_rule_v<M>,
                  "flx::outputsize: the layer or connection M of `no_rule_v<M>` in the note below has no shape rule "
                  "for these inputs. Declare `flx::Shape outputsize(const M&, const flx::Shape&)` beside M "
                  "(docs/layers.md); a lambda or a plain function cannot have one: write it as a struct that does");
  }
}

}  // namespace flx

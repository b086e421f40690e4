// Precision converters, as Flux's f16, bf16, f32 and f64:
//
//   auto m = bf16(Chain(Dense(784, 256, relu), Dense(256, 10)));   // BFloat16 weights
//   auto opt = setup(MixedPrecision(Float32, Adam(1e-3)), m);      // Float32 copies in the state
//
// Each returns the model's own type with every floating tensor converted to
// the precision (through fmap: a tied tensor stays tied) and every integer
// and Bool tensor as it was. A tensor already of the precision is kept as
// it is (shared, not copied), as Flux's f32 keeps Float32 arrays.
//
// One exception, for the layers whose op needs it: BatchNorm's scale, bias
// and running statistics stay Float32 in a Float16 or BFloat16 model, since
// batch normalisation of half data takes Float32 statistics and parameters
// (backend.h's param_dtype: cuDNN's rule; PyTorch's autocast keeps them
// Float32 too). f32 and f64 convert them with the rest. docs/precision.md
// has the whole story.
#pragma once

#include <type_traits>
#include <unordered_set>

#include "flx/dtype.hpp"
#include "flx/functor.hpp"
#include "flx/layers/normalise.hpp"
#include "flx/tensor.hpp"

namespace flx {

// Layers whose tensors stay Float32 when a model goes to Float16 or
// BFloat16 (their op computes half data with Float32 parameters).
// Specialise it for a layer of your own that needs the same.
template <class T>
struct keeps_float32_in_halves : std::false_type {};
template <>
struct keeps_float32_in_halves<BatchNorm> : std::true_type {};

namespace detail {

// Calls f(node) for x and every struct and container below it (declared
// fields, all of them), parents first.
template <class F, class T>
void for_each_node(F& f, const T& x) {
  f(x);
  if constexpr (DeclaredFunctor<T>) {
    std::apply([&](const auto&... fld) { (for_each_node(f, x.*(fld.ptr)), ...); }, fields_of<T, false>());
  } else if constexpr (is_std_container<T>::value) {
    if constexpr (requires { std::tuple_size<T>::value; } && !requires { x.size(); }) {
      std::apply([&](const auto&... e) { (for_each_node(f, e), ...); }, x);
    } else if constexpr (requires { x.has_value(); }) {
      if (x) for_each_node(f, *x);
    } else if constexpr (requires { x.index(); }) {
      std::visit([&](const auto& v) { for_each_node(f, v); }, x);
    } else if constexpr (requires { x.begin()->first; }) {
      for (const auto& [k, v] : x) for_each_node(f, v);
    } else {
      for (const auto& e : x) for_each_node(f, e);
    }
  }
}

// The element type a tensor of a layer that keeps_float32_in_halves takes
// in a model of precision `to`.
inline DType kept_float32_dtype(DType to) { return to == Float16 || to == BFloat16 ? Float32 : to; }

template <class M>
M convert_floating(const M& model, DType to) {
  // The tensors of layers that keep Float32 parameters in halves.
  std::unordered_set<const void*> kept;
  auto find = [&](const auto& node) {
    using N = std::decay_t<decltype(node)>;
    if constexpr (keeps_float32_in_halves<N>::value)
      for (const Tensor& t : leaves(node)) kept.insert(t.id());
  };
  for_each_node(find, model);
  return fmap(
      [&](const Tensor& t) {
        if (!is_floating(t.dtype())) return t;  // Int32, Int64, UInt8, Bool: as they are
        return t.to(kept.count(t.id()) ? kept_float32_dtype(to) : to);
      },
      model);
}

}  // namespace detail

// The model with its floating tensors in Float16, BFloat16, Float32 or
// Float64 (BatchNorm's in Float32 for the halves; see above).
template <class M>
M f16(const M& model) {
  return detail::convert_floating(model, Float16);
}
template <class M>
M bf16(const M& model) {
  return detail::convert_floating(model, BFloat16);
}
template <class M>
M f32(const M& model) {
  return detail::convert_floating(model, Float32);
}
template <class M>
M f64(const M& model) {
  return detail::convert_floating(model, Float64);
}
// The same for a precision chosen at run time (Float16, BFloat16, Float32
// or Float64; any other type is an ArgumentError).
template <class M>
M to_precision(const M& model, DType to) {
  FLX_CHECK(is_floating(to), ArgumentError, "to_precision: expected Float16, BFloat16, Float32 or Float64; got ", to);
  return detail::convert_floating(model, to);
}

}  // namespace flx

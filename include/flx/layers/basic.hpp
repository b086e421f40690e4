// Basic layers (Flux's basic.jl): Dense and Chain. Both are plain structs of
// tensors, callable on a batch (features × observations), and print as Flux
// prints them.
#pragma once

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>
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
std::string underscored(int64_t n);         // 200_960, as Flux prints counts
std::string format_bytes(int64_t bytes);    // 744 bytes, 3.004 KiB: Julia's Base.format_bytes
size_t display_width(const std::string& s);  // in characters (UTF-8: σ is one)
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

namespace detail {
inline int64_t count_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}
template <class L>
bool has_arrays(const L& l) {
  return !leaves(l).empty();
}
template <class L>
struct is_chain : std::false_type {};
template <class... Layers>
struct is_chain<Chain<Layers...>> : std::true_type {};
// How many layers below c hold arrays: two or more make Chain print big.
template <class... Layers>
int layers_with_arrays(const Chain<Layers...>& c);
template <class L>
int arrays_in(const L& l) {
  if constexpr (is_chain<L>::value) return layers_with_arrays(l);
  else return has_arrays(l) ? 1 : 0;
}
template <class... Layers>
int layers_with_arrays(const Chain<Layers...>& c) {
  return std::apply([](const auto&... l) { return (0 + ... + arrays_in(l)); }, c.layers);
}

// One layer of a big Chain (Flux's _layer_show): its one-line form and, for
// a layer with arrays, its count at column 40 (`, plus N` for arrays that
// do not train, such as BatchNorm's statistics).
template <class L>
void show_layer_line(std::ostream& os, const L& l, int indent) {
  std::ostringstream one;
  show_layer(one, l);
  const std::string str = one.str();
  os << std::string(size_t(indent), ' ') << str << ",";
  const auto all = leaves(l);
  if (!all.empty()) {
    const int64_t trainable = count_of(leaves(l, true)), total = count_of(all);
    const int pad = std::max(2, 39 - indent - int(display_width(str)));
    os << std::string(size_t(pad), ' ') << "# " << underscored(trainable) << " parameters";
    if (total > trainable) os << ", plus " << underscored(total - trainable);
  }
  os << "\n";
}
template <class... Layers>
void show_big(std::ostream& os, const Chain<Layers...>& c, int indent) {
  os << std::string(size_t(indent), ' ') << "Chain(\n";
  std::apply([&](const auto&... l) {
    auto one = [&](const auto& layer) {
      using T = std::decay_t<decltype(layer)>;
      if constexpr (is_chain<T>::value) {
        if (layers_with_arrays(layer) > 0) {
          show_big(os, layer, indent + 2);
          return;
        }
      }
      show_layer_line(os, layer, indent + 2);
    };
    (one(l), ...);
  }, c.layers);
  if (indent > 0) os << std::string(size_t(indent), ' ') << "),\n";
}
// Flux's _big_finale: the totals, with the arrays that do not train apart.
void show_totals(std::ostream& os, int64_t trainable_arrays, int64_t trainable, int64_t other_arrays, int64_t other,
                 int64_t bytes);
}  // namespace detail

// Chain(Dense(10 => 5, σ), softmax)  # 55 parameters
// and, with two or more layers holding arrays, as Flux displays a model:
// Chain(
//   Dense(1 => 256, tanh),                # 512 parameters
//   Dense(256 => 1),                      # 257 parameters
// )                   # Total: 4 arrays, 769 parameters, 3.004 KiB.
// The same on every device (bytes: the tensors' own).
template <class... Layers>
std::ostream& operator<<(std::ostream& os, const Chain<Layers...>& c) {
  const auto all = leaves(c), trainable = leaves(c, true);
  if (detail::layers_with_arrays(c) < 2) {
    detail::show_compact(os, c);
    detail::show_parameter_count(os, detail::count_of(all));
    return os;
  }
  detail::show_big(os, c, 0);
  os << ")";
  int64_t bytes = 0;
  for (const auto& t : all) bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  const int64_t n_train = detail::count_of(trainable);
  detail::show_totals(os, int64_t(trainable.size()), n_train, int64_t(all.size() - trainable.size()),
                      detail::count_of(all) - n_train, bytes);
  return os;
}

}  // namespace flx

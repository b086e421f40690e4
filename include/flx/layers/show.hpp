// How layers print, written once (Flux's src/layers/show.jl). A layer needs
// only its one-line form,
//
//   void show_compact(std::ostream& os, const MyLayer& l);   // MyLayer(3 => 4)
//
// declared in its own namespace; `os << layer` then prints it as Flux's REPL
// shows it: the one-line form, then its parameter count at column 20
//
//   Dense(10 => 5)      # 55 parameters
//   BatchNorm(16)       # 32 parameters, plus 32 non-trainable
//
// and a container (Chain, SkipConnection, Parallel, PairwiseFusion, Maxout)
// holding two or more layers with arrays one line a child, each count at
// column 40, with Flux's totals (`# Total:` for more than two arrays):
//
//   Chain(
//     Dense(1 => 256, tanh),                # 512 parameters
//     Dense(256 => 1),                      # 257 parameters
//   )                   # Total: 4 arrays, 769 parameters, 3.004 KiB.
//
// A container makes itself known with two functions found by argument
// lookup: flx_show_name(c) (its name) and flx_for_each_child(c, f) (f on
// each child, in Flux's display order: the fields as declared, tuples
// flattened); see containers.hpp. A layer declared outside namespace flx
// prints through `using flx::operator<<;` in its own namespace (or inside a
// Chain, which needs nothing more). Bytes are the tensors' own, on any device.
#pragma once

#include "flx/export.hpp"

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "flx/functor.hpp"

namespace flx {

// Julia's Base.format_bytes: "1 byte", "744 bytes", "1024 bytes", "3.004 KiB",
// "1.500 MiB" (1024 bytes a KiB; a unit is used once the count passes the
// previous one's 1024).
FLX_API std::string format_bytes(int64_t bytes);

// A container, for printing: named by flx_show_name(c), its children visited
// by flx_for_each_child(c, f).
namespace detail {
template <class T>
concept ShownContainer = requires(const T& c) {
  { flx_show_name(c) } -> std::convertible_to<const char*>;
  flx_for_each_child(c, [](const auto&) {});
};
}  // namespace detail

// A container's one-line form: Name(child, child, ...), each child in its
// own one-line form (Flux's _show_layers).
template <class C>
  requires detail::ShownContainer<C>
void show_compact(std::ostream& os, const C& c);

namespace detail {

FLX_API std::string underscored(int64_t n);          // 200_960, as Flux prints counts (underscorise)
FLX_API size_t display_width(const std::string& s);  // in characters (UTF-8: σ is one)
FLX_API int64_t count_of(const std::vector<Tensor>& ts);  // elements
FLX_API int64_t bytes_of(const std::vector<Tensor>& ts);  // their storage, in their element types

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

// The name of a connection that is one of the standard function objects
// (Julia's +, -, *, /), or nullptr.
template <class T>
constexpr const char* operator_name() {
  if constexpr (requires { typename T::is_transparent; }) {  // std::plus<>, ...
    if constexpr (std::is_same_v<T, std::plus<>>) return "+";
    else if constexpr (std::is_same_v<T, std::minus<>>) return "-";
    else if constexpr (std::is_same_v<T, std::multiplies<>>) return "*";
    else if constexpr (std::is_same_v<T, std::divides<>>) return "/";
    else return nullptr;
  } else {
    return nullptr;
  }
}

// The one-line form of anything a container holds: a layer's show_compact,
// an activation's or function object's name, `[a, b]` for a run-time list of
// layers, a tensor's summary, a number, `#callable` for a lambda (Julia
// prints `#3`).
template <class L>
void show_layer(std::ostream& os, const L& l) {
  if constexpr (std::is_same_v<L, Tensor>) {
    os << tensor_summary(l);
  } else if constexpr (std::is_arithmetic_v<L>) {
    os << l;
  } else if constexpr (is_std_vector<L>::value) {
    os << "[";
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) os << ", ";
      show_layer(os, l[i]);
    }
    os << "]";
  } else if constexpr (requires { show_compact(os, l); }) {
    show_compact(os, l);
  } else if constexpr (operator_name<L>() != nullptr) {
    os << operator_name<L>();
  } else if constexpr (requires { L::name(); }) {
    os << L::name();
  } else if constexpr (std::is_class_v<L> && !std::is_empty_v<L> && requires { os << l; }) {
    os << l;  // (a lambda or a function would print as a pointer: `1`)
  } else {
    os << "#callable";
  }
}
template <class L>
std::string layer_string(const L& l) {
  std::ostringstream os;
  show_layer(os, l);
  return os.str();
}

// How many layers below x hold arrays: a container with two or more prints
// one line a child (flx's rule for "small": one line while at most one
// layer has parameters).
template <class T>
int layers_with_arrays(const T& x) {
  if constexpr (ShownContainer<T>) {
    int n = 0;
    flx_for_each_child(x, [&](const auto& c) { n += layers_with_arrays(c); });
    return n;
  } else if constexpr (is_std_vector<T>::value) {
    int n = 0;
    for (const auto& e : x) n += layers_with_arrays(e);
    return n;
  } else if constexpr (std::is_same_v<T, Tensor>) {
    return 0;  // an array is leaf-like (Flux's _show_leaflike): it opens no level
  } else {
    return leaves(x).empty() ? 0 : 1;
  }
}

// "# 512 parameters" and, for arrays that do not train (BatchNorm's
// statistics), ", plus 32" (top level: ", plus 32 non-trainable"), after
// `pad` spaces; nothing for a layer without trainable arrays (Flux's
// _layer_show).
FLX_API void show_count(std::ostream& os, int pad, int64_t trainable, int64_t others, bool top_level);
template <class L>
void show_count_of(std::ostream& os, const L& l, int column, int indent, size_t width, bool top_level) {
  const auto trainable = leaves(l, true);
  if (trainable.empty()) return;
  const int64_t n = count_of(trainable);
  show_count(os, std::max(2, column - indent - int(width)), n, count_of(leaves(l)) - n, top_level);
}

// One child of a multi-line display (Flux's _layer_show): its one-line form
// and a comma, then its count at column 40.
template <class L>
void show_layer_line(std::ostream& os, const L& l, int indent) {
  const std::string str = layer_string(l);
  os << std::string(size_t(indent), ' ') << str << ",";
  show_count_of(os, l, 39, indent, display_width(str), false);
  os << "\n";
}

// Flux's _big_show below the top: a container (or a run-time list) whose
// layers hold arrays opens a level; anything else is one line.
template <class T>
void show_big(std::ostream& os, const T& x, int indent) {
  const bool list = is_std_vector<T>::value;
  const char* open = "[";
  if constexpr (ShownContainer<T>) open = flx_show_name(x);
  os << std::string(size_t(indent), ' ') << open << (list ? "\n" : "(\n");
  auto child = [&](const auto& c) {
    using C = std::decay_t<decltype(c)>;
    if constexpr (ShownContainer<C> || is_std_vector<C>::value) {
      if (layers_with_arrays(c) > 0) {
        show_big(os, c, indent + 2);
        return;
      }
    }
    show_layer_line(os, c, indent + 2);
  };
  if constexpr (ShownContainer<T>) flx_for_each_child(x, child);
  else for (const auto& e : x) child(e);
  if (indent > 0) os << std::string(size_t(indent), ' ') << (list ? "]" : ")") << ",\n";
}

// Flux's _big_finale: the totals, with the arrays that do not train apart;
// nothing for two arrays or fewer.
FLX_API void show_totals(std::ostream& os, const std::vector<Tensor>& trainable, const std::vector<Tensor>& all);

// What `os << layer` prints (see the top of this file).
template <class L>
void show_model(std::ostream& os, const L& l) {
  if constexpr (ShownContainer<L>) {
    if (layers_with_arrays(l) >= 2) {
      show_big(os, l, 0);
      os << ")";
      show_totals(os, leaves(l, true), leaves(l));
      return;
    }
  }
  const std::string str = layer_string(l);
  os << str;
  show_count_of(os, l, 20, 0, display_width(str), true);
}

// FLX_LAYER's children: the trainable fields (every declared field where
// no FLX_TRAINABLE narrows them), a std::tuple field's members one by one
// (Flux's _flat_children of trainable(x)).
template <class T, class F>
void for_each_layer_child(const T& x, F& f) {
  auto flat = [&](const auto& v) {
    if constexpr (requires { std::tuple_size<std::decay_t<decltype(v)>>::value; })
      std::apply([&](const auto&... e) { (f(e), ...); }, v);
    else f(v);
  };
  std::apply([&](const auto&... field) { (flat(x.*(field.ptr)), ...); }, fields_of<T, true>());
}

// Julia's nameof: a type's name without its namespaces ("ns::Model" is "Model").
constexpr const char* unqualified(const char* name) {
  const char* last = name;
  for (const char* p = name; *p; ++p)
    if (p[0] == ':' && p[1] == ':') last = p + 2;
  return last;
}

}  // namespace detail

template <class C>
  requires detail::ShownContainer<C>
void show_compact(std::ostream& os, const C& c) {
  os << flx_show_name(c) << "(";
  bool first = true;
  flx_for_each_child(c, [&](const auto& child) {
    if (!first) os << ", ";
    first = false;
    detail::show_layer(os, child);
  });
  os << ")";
}

// Every layer with a show_compact prints as Flux displays it.
template <class L>
  requires requires(std::ostream& os, const L& l) { show_compact(os, l); }
std::ostream& operator<<(std::ostream& os, const L& l) {
  detail::show_model(os, l);
  return os;
}

}  // namespace flx

// FLX_LAYER(T, fields...): Flux's @layer, in one line after the struct, at
// namespace scope (global or the struct's own namespace):
//
//   struct Model { Chain<Dense, Dense> body; Dense head; };
//   FLX_LAYER(Model, body, head)
//
// gives T its children (FLX_FUNCTOR: fmap, gpu, gradient, setup and
// checkpoints see the fields, by these names), its display name (T's name
// without namespaces) and its display: `os << model` prints as Flux prints
// an @layer struct, the children one a line and then the totals,
//
//   Model(
//     Chain(
//       Dense(2 => 3),                      # 9 parameters
//       Dense(3 => 4),                      # 16 parameters
//     ),
//     Dense(4 => 5),                        # 25 parameters
//   )                   # Total: 6 arrays, 50 parameters, 200 bytes.
//
// or on one line while at most one child holds arrays. Trainable: every
// field, unless FLX_TRAINABLE(T, fields...) names fewer (Flux's
// trainable=(...)); the display shows the trainable ones, as Flux's.
#define FLX_LAYER(T, ...)                                                                     \
  FLX_FUNCTOR(T, __VA_ARGS__)                                                                 \
  [[maybe_unused]] inline const char* flx_show_name(const T&) { return ::flx::detail::unqualified(#T); } \
  template <class F>                                                                          \
  void flx_for_each_child(const T& x, F&& f) {                                                \
    ::flx::detail::for_each_layer_child(x, f);                                                \
  }                                                                                           \
  [[maybe_unused]] inline std::ostream& operator<<(std::ostream& os, const T& x) {            \
    ::flx::detail::show_model(os, x);                                                         \
    return os;                                                                                \
  }

// FLX_LAYER_TEMPLATE(Name, fields...): FLX_LAYER for a class template,
// written inside its body, since its specialisations cannot be named after
// it (inside the body, Name names the specialisation). The same fields,
// name and display, as hidden friends that argument lookup finds:
//
//   template <class L, class C>
//   struct SkipConnection {
//     L layers;
//     C connection;
//     FLX_LAYER_TEMPLATE(SkipConnection, layers, connection)
//   };
#define FLX_LAYER_TEMPLATE(T, ...)                                                             \
  friend auto flx_functor_fields(::flx::detail::tag<T>) {                                      \
    return std::make_tuple(FLX_DETAIL_FOR_EACH(FLX_DETAIL_FIELD, T, __VA_ARGS__));             \
  }                                                                                            \
  friend const char* flx_show_name(const T&) { return ::flx::detail::unqualified(#T); }        \
  template <class F>                                                                           \
  friend void flx_for_each_child(const T& x, F&& f) {                                          \
    ::flx::detail::for_each_layer_child(x, f);                                                 \
  }                                                                                            \
  friend std::ostream& operator<<(std::ostream& os, const T& x) {                              \
    ::flx::detail::show_model(os, x);                                                          \
    return os;                                                                                 \
  }

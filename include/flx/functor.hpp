// Functors: declaring a struct's children (FLX_FUNCTOR), and fmap, which
// rebuilds a tree with a function applied to every tensor leaf.
//
//   struct ActorCritic { Tensor actor; Tensor critic; };
//   FLX_FUNCTOR(ActorCritic, actor, critic)
//   auto m2 = fmap([](const Tensor& t) { return t.to(dev); }, m);
//
// Walked: Tensor; declared structs; std::tuple, pair, vector, array,
// optional, variant, map<string, T>. Leaves copied unchanged: arithmetic
// types, enums, strings, std::function, empty classes (stateless lambdas,
// activation objects) and types marked FLX_LEAF. Any other class type is a
// compile-time error naming FLX_FUNCTOR, so a model can never silently stay
// behind on the CPU.
#pragma once

#include "flx/export.hpp"

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "flx/error.hpp"
#include "flx/tensor.hpp"

namespace flx::detail {

template <class T>
struct tag {};

template <class T, class M>
struct Field {
  const char* name;
  M T::*ptr;
};

// Found by ordinary lookup so that ADL on tag<T> is always attempted.
void flx_functor_fields() = delete;
void flx_trainable_fields() = delete;
void flx_is_leaf() = delete;

template <class T>
concept DeclaredFunctor = requires { flx_functor_fields(tag<T>{}); };
template <class T>
concept DeclaredTrainable = requires { flx_trainable_fields(tag<T>{}); };
template <class T>
concept DeclaredLeaf = requires { flx_is_leaf(tag<T>{}); };

template <class T>
struct is_std_container : std::false_type {};
template <class... A>
struct is_std_container<std::tuple<A...>> : std::true_type {};
template <class A, class B>
struct is_std_container<std::pair<A, B>> : std::true_type {};
template <class A, class Al>
struct is_std_container<std::vector<A, Al>> : std::true_type {};
template <class A, size_t N>
struct is_std_container<std::array<A, N>> : std::true_type {};
template <class A>
struct is_std_container<std::optional<A>> : std::true_type {};
template <class... A>
struct is_std_container<std::variant<A...>> : std::true_type {};
template <class V, class C, class Al>
struct is_std_container<std::map<std::string, V, C, Al>> : std::true_type {};

template <class T>
struct is_std_function : std::false_type {};
template <class S>
struct is_std_function<std::function<S>> : std::true_type {};

// A leaf: copied unchanged by fmap, ignored by walks.
template <class T>
constexpr bool is_leaf_v = !std::is_class_v<T> || std::is_same_v<T, std::string> || is_std_function<T>::value ||
                           DeclaredLeaf<T> || (std::is_empty_v<T> && !DeclaredFunctor<T>);

template <class T>
constexpr bool is_walkable_v = std::is_same_v<T, Tensor> || is_leaf_v<T> || DeclaredFunctor<T> ||
                               is_std_container<T>::value;

template <class T>
constexpr void require_walkable() {
  static_assert(is_walkable_v<T>,
                "flx: this struct's fields are not declared, so fmap/gpu/cpu/gradient cannot see its tensors. "
                "Declare them after the struct with FLX_FUNCTOR(Type, field1, field2, ...), or mark a type "
                "that holds no tensors with FLX_LEAF(Type).");
}

template <class T, bool Trainable>
auto fields_of() {
  if constexpr (Trainable && DeclaredTrainable<T>) return flx_trainable_fields(tag<T>{});
  else return flx_functor_fields(tag<T>{});
}

// ---- zipped walks: every tree must be shaped like the first -------------------
// fmap(f, x, ys...) and walk(visit, path, x, ys...) visit the trees together;
// where they differ (a vector's length, a map's keys, a variant's
// alternative, an optional's presence) the error names the dotted path.

inline std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
inline std::string join_path(const std::string& path, size_t index) { return join_path(path, std::to_string(index)); }
inline std::string shown_path(const std::string& path) { return path.empty() ? "(root)" : path; }

inline constexpr const char* kZipHint =
    ". fmap(f, x, ys...) and update(state, model, grads) walk their trees together, so the trees need the same "
    "structure (for update: the gradient that gradient() returned for this model)";

// Lengths of vectors/arrays: DimensionMismatch.
template <class... Ys>
void check_zip_sizes(const std::string& path, const char* kind, size_t n, const Ys&... ys) {
  size_t tree = 1;
  auto one = [&](size_t m) {
    ++tree;
    FLX_CHECK(m == n, DimensionMismatch, "zipped trees differ at ", shown_path(path), ": tree 1 has a ", kind, " of ",
              n, " elements, tree ", tree, " has ", m, kZipHint);
  };
  (one(ys.size()), ...);
}
// Keys of std::maps: ArgumentError naming the first key that only one has.
template <class M, class... Ys>
void check_zip_keys(const std::string& path, const M& x, const Ys&... ys) {
  size_t tree = 1;
  auto one = [&](const auto& y) {
    ++tree;
    for (const auto& kv : x)
      FLX_CHECK(y.count(kv.first), ArgumentError, "zipped trees differ at ", join_path(path, kv.first),
                ": tree 1 has this key in its std::map, tree ", tree, " has no such key", kZipHint);
    if (y.size() != x.size())
      for (const auto& kv : y)
        FLX_CHECK(x.count(kv.first), ArgumentError, "zipped trees differ at ", join_path(path, kv.first), ": tree ",
                  tree, " has this key in its std::map, tree 1 has no such key", kZipHint);
  };
  (one(ys), ...);
}
// Alternatives of std::variants: ArgumentError.
template <class... Ys>
void check_zip_alternatives(const std::string& path, size_t index, const Ys&... ys) {
  size_t tree = 1;
  auto one = [&](size_t i) {
    ++tree;
    FLX_CHECK(i == index, ArgumentError, "zipped trees differ at ", shown_path(path),
              ": tree 1 holds alternative ", index, " of its std::variant, tree ", tree, " alternative ", i, kZipHint);
  };
  (one(ys.index()), ...);
}
// Presence in std::optionals: ArgumentError.
template <class... Ys>
void check_zip_presence(const std::string& path, bool engaged, const Ys&... ys) {
  size_t tree = 1;
  auto one = [&](bool e) {
    ++tree;
    FLX_CHECK(e == engaged, ArgumentError, "zipped trees differ at ", shown_path(path), ": tree 1's std::optional ",
              engaged ? "holds a value" : "is empty", ", tree ", tree, "'s ", e ? "holds a value" : "is empty",
              kZipHint);
  };
  (one(ys.has_value()), ...);
}
// Tuples and pairs differ in type, so at compile time.
template <class T, class... Ys>
constexpr void check_zip_tuple_sizes() {
  static_assert(((std::tuple_size_v<Ys> == std::tuple_size_v<T>) && ...),
                "flx: zipped trees differ: tuples of different sizes at the same place");
}

// fmap names paths only when it zips trees (a path names the place in an error).
template <class... Ys, class K>
std::string zip_path(const std::string& path, const K& key) {
  if constexpr (sizeof...(Ys) == 0) return {};
  else return join_path(path, key);
}

// A struct (not an alias) so that ADL finds fmap_container in this namespace.
struct FLX_API FmapCache {
  std::unordered_map<const void*, Tensor> map;
};

// fmap with an explicit identity cache: a tensor reached twice maps once.
// path is where x sits, kept only when zipping (ys non-empty).
template <class F, class T, class... Ys>
T fmap_cached(F& f, FmapCache& cache, const std::string& path, const T& x, const Ys&... ys) {
  require_walkable<T>();
  if constexpr (std::is_same_v<T, Tensor>) {
    if (!x.defined()) return x;
    if (auto it = cache.map.find(x.id()); it != cache.map.end()) return it->second;
    Tensor r = f(x, ys...);
    cache.map.emplace(x.id(), r);
    return r;
  } else if constexpr (is_leaf_v<T>) {
    return x;
  } else if constexpr (DeclaredFunctor<T>) {
    T out = x;
    auto one = [&](const auto& fld) {
      out.*(fld.ptr) = fmap_cached(f, cache, zip_path<Ys...>(path, fld.name), x.*(fld.ptr), ys.*(fld.ptr)...);
    };
    std::apply([&](const auto&... fld) { (one(fld), ...); }, fields_of<T, false>());
    return out;
  } else {
    return fmap_container(f, cache, path, x, ys...);
  }
}

template <class F, class... A, class... Ys>
std::tuple<A...> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::tuple<A...>& x,
                                const Ys&... ys) {
  check_zip_tuple_sizes<std::tuple<A...>, Ys...>();
  auto one = [&]<size_t I>(std::integral_constant<size_t, I>) {
    return fmap_cached(f, cache, zip_path<Ys...>(path, I), std::get<I>(x), std::get<I>(ys)...);
  };
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return std::tuple<A...>{one(std::integral_constant<size_t, I>{})...};
  }(std::index_sequence_for<A...>{});
}
template <class F, class A, class B, class... Ys>
std::pair<A, B> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::pair<A, B>& x,
                               const Ys&... ys) {
  check_zip_tuple_sizes<std::pair<A, B>, Ys...>();
  return {fmap_cached(f, cache, zip_path<Ys...>(path, size_t(0)), x.first, ys.first...),
          fmap_cached(f, cache, zip_path<Ys...>(path, size_t(1)), x.second, ys.second...)};
}
template <class F, class A, class Al, class... Ys>
std::vector<A, Al> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::vector<A, Al>& x,
                                  const Ys&... ys) {
  check_zip_sizes(path, "std::vector", x.size(), ys...);
  std::vector<A, Al> out;
  out.reserve(x.size());
  for (size_t i = 0; i < x.size(); ++i) out.push_back(fmap_cached(f, cache, zip_path<Ys...>(path, i), x[i], ys[i]...));
  return out;
}
template <class F, class A, size_t N, class... Ys>
std::array<A, N> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::array<A, N>& x,
                                const Ys&... ys) {
  check_zip_sizes(path, "std::array", N, ys...);
  std::array<A, N> out = x;
  for (size_t i = 0; i < N; ++i) out[i] = fmap_cached(f, cache, zip_path<Ys...>(path, i), x[i], ys[i]...);
  return out;
}
template <class F, class A, class... Ys>
std::optional<A> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::optional<A>& x,
                                const Ys&... ys) {
  check_zip_presence(path, x.has_value(), ys...);
  if (!x) return x;
  return fmap_cached(f, cache, path, *x, *ys...);
}
template <class F, class... A, class... Ys>
std::variant<A...> fmap_container(F& f, FmapCache& cache, const std::string& path, const std::variant<A...>& x,
                                  const Ys&... ys) {
  check_zip_alternatives(path, x.index(), ys...);
  return std::visit(
      [&](const auto& v) -> std::variant<A...> {
        using V = std::decay_t<decltype(v)>;
        return fmap_cached(f, cache, path, v, std::get<V>(ys)...);
      },
      x);
}
template <class F, class V, class C, class Al, class... Ys>
std::map<std::string, V, C, Al> fmap_container(F& f, FmapCache& cache, const std::string& path,
                                               const std::map<std::string, V, C, Al>& x, const Ys&... ys) {
  check_zip_keys(path, x, ys...);
  std::map<std::string, V, C, Al> out;
  for (const auto& [k, v] : x) out.emplace(k, fmap_cached(f, cache, zip_path<Ys...>(path, k), v, ys.at(k)...));
  return out;
}

// Visit every tensor leaf with its dotted path ("layers.0.weight"), zipped
// with the matching leaves of ys. Trainable = only FLX_TRAINABLE fields.
template <bool Trainable, class V, class T, class... Ys>
void walk(V& visit, const std::string& path, const T& x, const Ys&... ys) {
  require_walkable<T>();
  if constexpr (std::is_same_v<T, Tensor>) {
    visit(path, x, ys...);
  } else if constexpr (is_leaf_v<T>) {
  } else if constexpr (DeclaredFunctor<T>) {
    auto one = [&](const auto& fld) {
      walk<Trainable>(visit, join_path(path, fld.name), x.*(fld.ptr), ys.*(fld.ptr)...);
    };
    std::apply([&](const auto&... fld) { (one(fld), ...); }, fields_of<T, Trainable>());
  } else if constexpr (is_std_container<T>::value) {
    if constexpr (requires { std::tuple_size<T>::value; } && !requires { x.size(); }) {
      check_zip_tuple_sizes<T, Ys...>();
      auto one = [&]<size_t I>(std::integral_constant<size_t, I>) {
        walk<Trainable>(visit, join_path(path, I), std::get<I>(x), std::get<I>(ys)...);
      };
      [&]<size_t... I>(std::index_sequence<I...>) {
        (one(std::integral_constant<size_t, I>{}), ...);
      }(std::make_index_sequence<std::tuple_size_v<T>>{});
    } else if constexpr (requires { x.has_value(); }) {
      check_zip_presence(path, x.has_value(), ys...);
      if (x) walk<Trainable>(visit, path, *x, *ys...);
    } else if constexpr (requires { x.index(); }) {
      check_zip_alternatives(path, x.index(), ys...);
      std::visit([&](const auto& v) { walk<Trainable>(visit, path, v, std::get<std::decay_t<decltype(v)>>(ys)...); }, x);
    } else if constexpr (requires { x.begin()->first; }) {
      check_zip_keys(path, x, ys...);
      for (const auto& [k, v] : x) walk<Trainable>(visit, join_path(path, k), v, ys.at(k)...);
    } else {
      check_zip_sizes(path, requires { x.capacity(); } ? "std::vector" : "std::array", x.size(), ys...);
      for (size_t i = 0; i < x.size(); ++i) walk<Trainable>(visit, join_path(path, i), x[i], ys[i]...);
    }
  }
}

}  // namespace flx::detail

namespace flx {

// fmap(f, x): x rebuilt with f applied to each (defined) tensor leaf.
// fmap(f, x, ys...): f(leaf, matching leaves of ys...), ys shaped like x
// (where they are not: DimensionMismatch for lengths, ArgumentError for map
// keys, variant alternatives and optionals, naming the path).
template <class F, class T, class... Ys>
T fmap(F&& f, const T& x, const Ys&... ys) {
  detail::FmapCache cache;
  return detail::fmap_cached(f, cache, "", x, ys...);
}

// Every tensor leaf of x (each shared tensor once), in walk order.
template <class T>
std::vector<Tensor> leaves(const T& x, bool trainable_only = false) {
  std::vector<Tensor> out;
  std::unordered_map<const void*, bool> seen;
  auto visit = [&](const std::string&, const Tensor& t) {
    if (t.defined() && seen.emplace(t.id(), true).second) out.push_back(t);
  };
  if (trainable_only) detail::walk<true>(visit, "", x);
  else detail::walk<false>(visit, "", x);
  return out;
}

}  // namespace flx

// ---- declaration macros ----------------------------------------------------
#define FLX_DETAIL_PARENS ()
#define FLX_DETAIL_EXPAND(...) FLX_DETAIL_EXPAND3(FLX_DETAIL_EXPAND3(FLX_DETAIL_EXPAND3(__VA_ARGS__)))
#define FLX_DETAIL_EXPAND3(...) FLX_DETAIL_EXPAND2(FLX_DETAIL_EXPAND2(FLX_DETAIL_EXPAND2(__VA_ARGS__)))
#define FLX_DETAIL_EXPAND2(...) FLX_DETAIL_EXPAND1(FLX_DETAIL_EXPAND1(FLX_DETAIL_EXPAND1(__VA_ARGS__)))
#define FLX_DETAIL_EXPAND1(...) __VA_ARGS__
#define FLX_DETAIL_FOR_EACH(m, T, ...) __VA_OPT__(FLX_DETAIL_EXPAND(FLX_DETAIL_FOR_EACH_H(m, T, __VA_ARGS__)))
#define FLX_DETAIL_FOR_EACH_H(m, T, a, ...) m(T, a) __VA_OPT__(, FLX_DETAIL_FOR_EACH_A FLX_DETAIL_PARENS(m, T, __VA_ARGS__))
#define FLX_DETAIL_FOR_EACH_A() FLX_DETAIL_FOR_EACH_H
#define FLX_DETAIL_FIELD(T, f) ::flx::detail::Field<T, decltype(T::f)>{#f, &T::f}

// FLX_FUNCTOR(T, fields...): the children of T (and their names in
// checkpoints). Write it after the struct, at namespace scope (global or the
// struct's own namespace). Fields not listed are copied unchanged.
#define FLX_FUNCTOR(T, ...)                                                  \
  [[maybe_unused]] inline auto flx_functor_fields(::flx::detail::tag<T>) {   \
    return std::make_tuple(FLX_DETAIL_FOR_EACH(FLX_DETAIL_FIELD, T, __VA_ARGS__)); \
  }
// FLX_TRAINABLE(T, fields...): the subset of children optimisers update.
#define FLX_TRAINABLE(T, ...)                                                \
  [[maybe_unused]] inline auto flx_trainable_fields(::flx::detail::tag<T>) { \
    return std::make_tuple(FLX_DETAIL_FOR_EACH(FLX_DETAIL_FIELD, T, __VA_ARGS__)); \
  }
// FLX_LEAF(T): T holds no tensors; fmap copies it unchanged.
#define FLX_LEAF(T) \
  [[maybe_unused]] inline std::true_type flx_is_leaf(::flx::detail::tag<T>) { return {}; }

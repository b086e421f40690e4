// Reverse-mode automatic differentiation, Zygote style:
//
//   auto [g] = gradient([](const Tensor& x) { return sum(square(x)); }, x);
//   auto [loss, grads] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
//   // std::get<0>(grads) is shaped like model: a Dense whose weight is dL/dW
//
// The graph is recorded only while f runs inside gradient/withgradient, so
// ordinary calls pay nothing. Tensors reached twice (tied weights) are one
// leaf; leaves no gradient reached hold an undefined Tensor. Calls nest, as
// in Zygote: f may itself call gradient, and the outer call differentiates
// through the inner one's value and gradients (second derivatives).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {
namespace detail {

// Enables recording for its lifetime (nestable).
class FLX_API RecordScope {
 public:
  RecordScope();
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;
};

FLX_API bool is_recording();

// One gradient call: its leaves (the tracked arguments) and, after
// backward(), their gradients. Calls nest: an inner call's backward pass
// reaches only its own leaves, and is itself recorded when an outer call is
// recording, so the outer call differentiates through the inner one.
class FLX_API Tape {
 public:
  Tape();
  Tensor track(const Tensor& t);             // a new leaf of this tape on t's storage
  void backward(const Tensor& out);          // out must hold one element
  Tensor grad(const Tensor& tracked) const;  // a leaf's gradient (undefined if none reached it)

 private:
  uint64_t id_;
  std::unordered_map<const void*, Tensor> grads_;  // by leaf node
};

}  // namespace detail

// What withgradient returns; unpacks as `auto [val, grad] = ...`.
template <class... Grads>
struct WithGradient {
  Tensor val;
  std::tuple<Grads...> grad;
};

template <class F, class... Args>
WithGradient<Args...> withgradient(F&& f, const Args&... args) {
  detail::Tape tape;
  detail::FmapCache cache;  // one cache: a tensor passed twice is one leaf
  auto track = [&](const Tensor& t) { return tape.track(t); };
  std::tuple<Args...> tracked{detail::fmap_cached(track, cache, "", args)...};
  Tensor val;
  {
    detail::RecordScope scope;
    val = std::apply(f, tracked);
  }
  FLX_CHECK(val.defined() && val.numel() == 1, ArgumentError,
            "gradient: the function must return a tensor with one element (a scalar loss); got ",
            val.defined() ? val.shape().str() : std::string("an undefined tensor"),
            ". Reduce it first, e.g. with sum() or mean()");
  tape.backward(val);
  auto grad_of = [&](const Tensor& t) { return tape.grad(t); };
  auto grads = std::apply([&](const auto&... tr) { return std::tuple<Args...>{fmap(grad_of, tr)...}; }, tracked);
  // Inside an enclosing gradient call the value keeps its graph, so that
  // call differentiates through it; otherwise the graph is dropped.
  return {detail::is_recording() ? val : val.detach(), std::move(grads)};
}

template <class F, class... Args>
std::tuple<Args...> gradient(F&& f, const Args&... args) {
  return withgradient(std::forward<F>(f), args...).grad;
}

}  // namespace flx

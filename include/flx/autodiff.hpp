// Reverse-mode automatic differentiation, Zygote style:
//
//   auto [g] = gradient([](const Tensor& x) { return sum(square(x)); }, x);
//   auto [loss, grads] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
//   // std::get<0>(grads) is shaped like model: a Dense whose weight is dL/dW
//
// The graph is recorded only while f runs inside gradient/withgradient, so
// ordinary calls pay nothing. Tensors reached twice (tied weights) are one
// leaf; leaves no gradient reached hold an undefined Tensor.
#pragma once

#include <tuple>
#include <utility>

#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {
namespace detail {

// Enables recording for its lifetime (nestable).
class RecordScope {
 public:
  RecordScope();
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;
};

bool is_recording();
Tensor track(const Tensor& t);           // a new leaf handle on t's storage
Tensor leaf_grad(const Tensor& tracked);  // its accumulated gradient (or undefined)
void backward(const Tensor& out);        // out must hold one element

}  // namespace detail

// What withgradient returns; unpacks as `auto [val, grad] = ...`.
template <class... Grads>
struct WithGradient {
  Tensor val;
  std::tuple<Grads...> grad;
};

template <class F, class... Args>
WithGradient<Args...> withgradient(F&& f, const Args&... args) {
  detail::FmapCache cache;  // one cache: a tensor passed twice is one leaf
  auto track = [](const Tensor& t) { return detail::track(t); };
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
  detail::backward(val);
  auto grad_of = [](const Tensor& t) { return detail::leaf_grad(t); };
  auto grads = std::apply([&](const auto&... tr) { return std::tuple<Args...>{fmap(grad_of, tr)...}; }, tracked);
  return {val.detach(), std::move(grads)};
}

template <class F, class... Args>
std::tuple<Args...> gradient(F&& f, const Args&... args) {
  return withgradient(std::forward<F>(f), args...).grad;
}

}  // namespace flx

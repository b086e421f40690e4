// The autodiff graph: each op run while recording attaches a Node to its
// output holding only what its backward rule needs. Not installed.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "flx/autodiff.hpp"
#include "tensor_impl.hpp"

namespace flx::autograd {

struct Node {
  std::vector<std::shared_ptr<Node>> inputs;  // null where an input is not tracked
  Tensor grad;                                // accumulated during backward
  virtual ~Node() = default;
  // Write the gradient for input i into out[i] where needs[i].
  virtual void backward(const Tensor& g, const bool* needs, Tensor* out) = 0;
  virtual bool is_leaf() const { return false; }
};

struct Leaf final : Node {
  void backward(const Tensor&, const bool*, Tensor*) override {}
  bool is_leaf() const override { return true; }
};

template <class F>
struct FnNode final : Node {
  F fn;
  explicit FnNode(F f) : fn(std::move(f)) {}
  void backward(const Tensor& g, const bool* needs, Tensor* out) override { fn(g, needs, out); }
};

inline bool tracked(const Tensor& t) { return t.defined() && t.impl()->node != nullptr; }

// Attach a node computing input gradients with fn(g, needs, out) to `out`
// when recording and some input is tracked. The rule captures by value only
// what it needs.
template <class F>
void record(const Tensor& out, std::initializer_list<Tensor> ins, F fn) {
  if (!detail::is_recording()) return;
  bool any = false;
  for (const auto& t : ins) any |= tracked(t);
  if (!any) return;
  auto n = std::make_shared<FnNode<F>>(std::move(fn));
  n->inputs.reserve(ins.size());
  for (const auto& t : ins) n->inputs.push_back(tracked(t) ? t.impl()->node : nullptr);
  out.impl()->node = std::move(n);
}

// Runs its scope with recording off (backward rules, optimiser steps).
class PauseScope {
 public:
  PauseScope();
  ~PauseScope();

 private:
  int saved_;
};

}  // namespace flx::autograd

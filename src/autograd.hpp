// The autodiff graph: each op run while recording attaches a Node to its
// output holding only what its backward rule needs. Not installed.
//
// Gradient calls nest (Zygote does): each call is a tape that owns its leaves
// and collects their gradients itself, never in a node, so an inner call's
// backward pass cannot touch an outer call's leaves. An inner backward pass
// run while an outer call records is itself recorded, so the outer call
// differentiates through the inner call's gradients: a rule declared
// Order::Higher is built from recorded ops; an Order::FirstOnly rule's
// gradients there carry a node that refuses to be differentiated (an error,
// never a silently wrong number).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "flx/autodiff.hpp"
#include "internal/gradient_observer.hpp"
#include "tensor_impl.hpp"

namespace flx::autograd {

// Whether a backward rule can itself be differentiated.
//   Higher: it computes with recorded ops on captures that keep their graph
//     (inputs as they are, its own output through saved_output()).
//   FirstOnly: it uses fused kernels or values detached from the graph.
enum class Order { FirstOnly, Higher };

// Node ids grow with creation, so a node can only reach older ones; a tape
// takes an id when it starts, and nodes older than it cannot reach its leaves.
uint64_t next_id();

// How many gradient calls are recording on this thread (nested calls: 2 or
// more). An op with a fused FirstOnly rule and a composed Higher one takes
// the composed one from 2 up, where a second derivative may be asked for.
int recording_depth();

struct Node : std::enable_shared_from_this<Node> {
  std::vector<std::shared_ptr<Node>> inputs;  // null where an input is not tracked
  uint64_t id = next_id();
  uint64_t tape = 0;  // for a leaf: the gradient call that tracked it
  const char* op = "op";
  Order order = Order::FirstOnly;
  virtual ~Node() = default;
  // Write the gradient for input i into out[i] where needs[i].
  virtual void backward(const Tensor& g, const bool* needs, Tensor* out) = 0;
};

// A tracked argument of one gradient call. Its tape collects the gradient
// here; for an enclosing call it is the identity from its source (inputs[0],
// when the argument was itself tracked by that call).
struct Leaf final : Node {
  const void* source;  // the tracked tensor's id (Tensor::id), for observers
  Leaf(uint64_t tape_id, const void* src) : source(src) {
    tape = tape_id;
    op = "argument";
    order = Order::Higher;
  }
  void backward(const Tensor& g, const bool* needs, Tensor* out) override {
    if (needs[0]) out[0] = g;
  }
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
// what it needs; op names it in errors.
template <class F>
void record(const char* op, Order order, const Tensor& out, const Tensor* ins, size_t nins, F fn) {
  if (!detail::is_recording()) return;
  bool any = false;
  for (size_t i = 0; i < nins; ++i) any |= tracked(ins[i]);
  if (!any) return;
  auto n = std::make_shared<FnNode<F>>(std::move(fn));
  n->op = op;
  n->order = order;
  n->inputs.reserve(nins);
  for (size_t i = 0; i < nins; ++i) n->inputs.push_back(tracked(ins[i]) ? ins[i].impl()->node : nullptr);
  out.impl()->node = std::move(n);
}
template <class F>
void record(const char* op, Order order, const Tensor& out, std::initializer_list<Tensor> ins, F fn) {
  record(op, order, out, ins.begin(), ins.size(), std::move(fn));
}
// The same for an op of any number of inputs (stacking a sequence's steps).
template <class F>
void record(const char* op, Order order, const Tensor& out, const std::vector<Tensor>& ins, F fn) {
  record(op, order, out, ins.data(), ins.size(), std::move(fn));
}

// A rule's own output, saved detached (a node holding its output would be a
// cycle). While a backward pass is recorded it comes back attached to the
// rule's node, so a Higher rule that uses it differentiates through it.
Tensor saved_output(const Tensor& y);

// Watches backward passes (internal/gradient_observer.hpp; flx::distributed
// registers one).
using internal::GradientObserver;
void add_gradient_observer(const std::shared_ptr<GradientObserver>& o);

// Runs its scope with recording off (optimiser steps, checkpoints).
class PauseScope {
 public:
  PauseScope();
  ~PauseScope();

 private:
  int saved_;
};

}  // namespace flx::autograd

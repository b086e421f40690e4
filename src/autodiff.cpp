// The backward pass: an iterative topological sort from the output, then
// gradients flow in reverse order, accumulated per node.
#include <unordered_set>

#include "autograd.hpp"
#include "flx/ops.hpp"

namespace flx {
namespace {
thread_local int t_recording = 0;
}

namespace detail {

RecordScope::RecordScope() { ++t_recording; }
RecordScope::~RecordScope() { --t_recording; }
bool is_recording() { return t_recording > 0; }

Tensor track(const Tensor& t) {
  Tensor r = share(t, t.shape(), t.impl()->offset);
  r.impl()->node = std::make_shared<autograd::Leaf>();
  return r;
}

Tensor leaf_grad(const Tensor& tracked) {
  auto& node = tracked.impl()->node;
  return node ? node->grad : Tensor{};
}

void backward(const Tensor& out) {
  autograd::PauseScope pause;
  if (!autograd::tracked(out)) return;  // nothing tracked reached the output
  using autograd::Node;
  // Post-order DFS with an explicit stack: no recursion depth limit.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack{{out.impl()->node.get(), 0}};
  seen.insert(stack.back().first);
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->inputs.size()) {
      Node* c = n->inputs[i++].get();
      if (c && seen.insert(c).second) stack.push_back({c, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  out.impl()->node->grad = ones(out.dtype(), out.shape()).to(out.device());
  std::vector<Tensor> gin;
  std::vector<char> needs;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (n->is_leaf() || !n->grad.defined()) continue;
    size_t k = n->inputs.size();
    gin.assign(k, Tensor{});
    needs.assign(k, 0);
    for (size_t j = 0; j < k; ++j) needs[j] = n->inputs[j] != nullptr;
    n->backward(n->grad, reinterpret_cast<const bool*>(needs.data()), gin.data());
    n->grad = Tensor{};  // free as soon as it has been used
    for (size_t j = 0; j < k; ++j) {
      Node* c = n->inputs[j].get();
      if (!c || !gin[j].defined()) continue;
      c->grad = c->grad.defined() ? c->grad + gin[j] : gin[j];
    }
  }
}

}  // namespace detail

namespace autograd {
PauseScope::PauseScope() : saved_(t_recording) { t_recording = 0; }
PauseScope::~PauseScope() { t_recording = saved_; }
}  // namespace autograd

}  // namespace flx

// The backward pass of one gradient call (a tape): an iterative topological
// sort from the output down to the tape's own leaves, then gradients flow in
// reverse order, kept in the pass itself (never in the nodes, which an
// enclosing call's pass may visit as well).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "autograd.hpp"
#include "flx/ops.hpp"

namespace flx {
namespace {
thread_local int t_recording = 0;
// The node whose backward rule is running (for saved_output).
thread_local autograd::Node* t_current = nullptr;
std::atomic<uint64_t> g_next_id{1};

struct CurrentNode {
  autograd::Node* saved = t_current;
  explicit CurrentNode(autograd::Node* n) { t_current = n; }
  ~CurrentNode() { t_current = saved; }
  CurrentNode(const CurrentNode&) = delete;
  CurrentNode& operator=(const CurrentNode&) = delete;
};

// Stands in for a gradient that a first-order-only rule computed while the
// pass was recorded: differentiating through it is an error.
struct Refusal final : autograd::Node {
  const char* rule;
  explicit Refusal(const char* r) : rule(r) { op = "first-order gradient"; }
  void backward(const Tensor&, const bool*, Tensor*) override {
    FLX_THROW(ArgumentError, "gradient of a gradient: the backward rule of ", rule,
              " is first order only (a fused kernel), so an enclosing gradient call cannot differentiate "
              "through the gradient that the inner call computed with it; keep ", rule,
              " out of the inner function, or make the outer result independent of that gradient");
  }
};

// gin, computed by n's first-order rule from g, as a tracked tensor that
// refuses a second derivative; it depends on n's inputs and on g.
Tensor refuse_second_order(const Tensor& gin, autograd::Node* n, const Tensor& g) {
  auto r = std::make_shared<Refusal>(n->op);
  for (const auto& in : n->inputs)
    if (in) r->inputs.push_back(in);
  if (autograd::tracked(g)) r->inputs.push_back(g.impl()->node);
  if (r->inputs.empty()) return gin;  // depends on nothing tracked: a constant
  Tensor out = detail::share(gin, gin.shape(), gin.impl()->offset);
  out.impl()->node = std::move(r);
  return out;
}
}  // namespace

namespace autograd {
namespace {
// The registered observers. `g_observing` lets a pass skip the lock while
// there are none (almost always).
std::atomic<bool> g_observing{false};
std::mutex g_observers_mu;
std::vector<std::weak_ptr<GradientObserver>>& observers() {
  static auto* v = new std::vector<std::weak_ptr<GradientObserver>>;  // never destroyed: passes may run at exit
  return *v;
}
// The live observers, the expired ones dropped.
std::vector<std::shared_ptr<GradientObserver>> live_observers() {
  std::vector<std::shared_ptr<GradientObserver>> out;
  if (!g_observing.load(std::memory_order_relaxed)) return out;
  std::lock_guard lock(g_observers_mu);
  auto& v = observers();
  std::erase_if(v, [&](const std::weak_ptr<GradientObserver>& w) {
    auto s = w.lock();
    if (!s) return true;
    out.push_back(std::move(s));
    return false;
  });
  g_observing.store(!v.empty(), std::memory_order_relaxed);
  return out;
}
}  // namespace

void add_gradient_observer(const std::shared_ptr<GradientObserver>& o) {
  std::lock_guard lock(g_observers_mu);
  observers().push_back(o);
  g_observing.store(true, std::memory_order_relaxed);
}

uint64_t next_id() { return g_next_id.fetch_add(1, std::memory_order_relaxed); }

Tensor saved_output(const Tensor& y) {
  if (!y.defined() || !detail::is_recording() || !t_current) return y;
  Tensor r = detail::share(y, y.shape(), y.impl()->offset);
  r.impl()->node = t_current->shared_from_this();
  return r;
}

int recording_depth() { return t_recording; }

PauseScope::PauseScope() : saved_(t_recording) { t_recording = 0; }
PauseScope::~PauseScope() { t_recording = saved_; }
}  // namespace autograd

namespace detail {

RecordScope::RecordScope() { ++t_recording; }
RecordScope::~RecordScope() { --t_recording; }
bool is_recording() { return t_recording > 0; }

Tape::Tape() : id_(autograd::next_id()) {}

Tensor Tape::track(const Tensor& t) {
  Tensor r = share(t, t.shape(), t.impl()->offset);
  auto leaf = std::make_shared<autograd::Leaf>(id_, t.id());
  if (autograd::tracked(t)) leaf->inputs.push_back(t.impl()->node);  // an enclosing call's tensor
  r.impl()->node = std::move(leaf);
  return r;
}

Tensor Tape::grad(const Tensor& tracked) const {
  auto it = grads_.find(tracked.impl()->node.get());
  return it == grads_.end() ? Tensor{} : it->second;
}

void Tape::backward(const Tensor& out) {
  using autograd::Node;
  if (!autograd::tracked(out)) return;  // nothing tracked reached the output
  auto mine = [&](const Node* n) { return n->tape == id_; };
  // Nodes made before this tape cannot reach its leaves: not visited.
  auto eligible = [&](const Node* n) { return n && n->id > id_; };
  Node* root = out.impl()->node.get();
  if (!eligible(root)) return;

  // Post-order DFS with an explicit stack (no recursion depth limit), not
  // past this tape's leaves; reaches[k]: order[k] has a path to one of them.
  constexpr size_t kOpen = SIZE_MAX;
  std::unordered_map<const Node*, size_t> pos{{root, kOpen}};
  std::vector<Node*> order;
  std::vector<char> reaches;
  auto reach = [&](const Node* c) {
    if (!eligible(c)) return false;
    auto it = pos.find(c);
    return it != pos.end() && it->second != kOpen && reaches[it->second];
  };
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (!mine(n) && i < n->inputs.size()) {
      Node* c = n->inputs[i++].get();
      if (eligible(c) && pos.emplace(c, kOpen).second) stack.push_back({c, 0});
      continue;
    }
    bool r = mine(n);
    for (size_t j = 0; !r && j < n->inputs.size(); ++j) r = reach(n->inputs[j].get());
    pos[n] = order.size();
    order.push_back(n);
    reaches.push_back(r);
    stack.pop_back();
  }
  if (!reaches.back()) return;  // the root is last: no path to a leaf

  // Each node's consumers still to run (edges from nodes that pass a
  // gradient on): a leaf of this tape is final once its count reaches 0,
  // which is reported to observers at once, not at the leaf's turn in the
  // order (a first layer's weight comes last in it, its last consumer early).
  std::vector<uint32_t> pending(order.size(), 0);
  for (size_t k = 0; k < order.size(); ++k)
    if (reaches[k] && !mine(order[k]))
      for (const auto& in : order[k]->inputs)
        if (reach(in.get())) ++pending[pos[in.get()]];

  const auto watchers = autograd::live_observers();
  if (!watchers.empty()) {
    std::vector<const void*> sources;
    for (const Node* n : order)
      if (mine(n)) sources.push_back(static_cast<const autograd::Leaf*>(n)->source);
    for (const auto& w : watchers) w->pass_begins(sources);
  }
  std::vector<Tensor> grad(order.size());
  std::vector<char> done(order.size(), 0);
  // A leaf of this tape whose gradient is final: keep it, tell observers.
  auto finish_leaf = [&](size_t k) {
    done[k] = 1;
    Tensor g = std::move(grad[k]);
    if (!g.defined()) return;
    grads_[order[k]] = g;
    for (const auto& w : watchers) w->gradient_ready(static_cast<const autograd::Leaf*>(order[k])->source, g);
  };

  // An enclosing call records this pass: its rules' ops are recorded too.
  const bool recorded = is_recording();
  grad.back() = ones(out.dtype(), out.shape()).to(out.device());
  std::vector<Tensor> gin;
  std::vector<char> needs;
  for (size_t k = order.size(); k-- > 0;) {  // reverse post-order: consumers first
    Node* n = order[k];
    if (mine(n)) {
      if (!done[k]) finish_leaf(k);  // the output itself, or a leaf no consumer reached
      continue;
    }
    if (!reaches[k]) continue;
    Tensor g = std::move(grad[k]);  // freed as soon as it has been used
    size_t m = n->inputs.size();
    needs.assign(m, 0);
    for (size_t j = 0; j < m; ++j) needs[j] = reach(n->inputs[j].get());
    if (g.defined()) {
      gin.assign(m, Tensor{});
      {
        CurrentNode current(n);
        n->backward(g, reinterpret_cast<const bool*>(needs.data()), gin.data());
      }
      for (size_t j = 0; j < m; ++j) {
        if (!needs[j] || !gin[j].defined()) continue;
        if (recorded && n->order == autograd::Order::FirstOnly) gin[j] = refuse_second_order(gin[j], n, g);
        Tensor& acc = grad[pos[n->inputs[j].get()]];
        acc = acc.defined() ? acc + gin[j] : gin[j];
      }
    }
    for (size_t j = 0; j < m; ++j) {
      if (!needs[j]) continue;
      const size_t i = pos[n->inputs[j].get()];
      if (--pending[i] == 0 && mine(order[i]) && !done[i]) finish_leaf(i);
    }
  }
  for (const auto& w : watchers) w->pass_ends();
}

}  // namespace detail
}  // namespace flx

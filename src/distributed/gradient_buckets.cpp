// DistributedOptimizer's gradient averaging, as PyTorch DDP's reducer does
// it: the parameters are cut into flat buckets (25 MiB, the first 1 MiB,
// filled in reverse order of the parameters, one element type and device
// each), and each bucket is one allreduce. The buckets watch the backward
// pass (flx::internal::GradientObserver): a gradient is copied into its bucket
// the moment it is final, and a bucket whose gradients are all in starts
// its allreduce at once (in bucket order, so every rank starts the same
// collectives in the same order), while the pass computes the rest. update()
// then waits only for what is still in flight, and gives the rule views of
// the averaged buckets.
//
// Each bucket also carries one presence flag per parameter (1 where this
// rank has a gradient): after the sum, a parameter no rank had a gradient
// for is skipped, as in one process, and one some ranks lack counts as zero
// there. update() checks that the gradients it is given are the very
// tensors the pass produced (the same on every rank of an SPMD program);
// where they are not (the user changed or summed them), the bucket is sent
// again with the given ones.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "internal/distributed_interface.hpp"
#include "distributed/communicator.hpp"
#include "flx/distributed.hpp"
#include "flx/layers/show.hpp"  // format_bytes

namespace flx::distributed {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class GradientBuckets final : public GradientTransform, public flx::internal::GradientObserver {
 public:
  GradientBuckets(std::shared_ptr<Communicator> comm, const DistributedOptions& o, const std::vector<Tensor>& params)
      : comm_(std::move(comm)), opts_(o), params_(params) {
    assign_buckets();
  }

  void pass_begins(const std::vector<const void*>& sources) override {
    std::lock_guard lock(mu_);
    bool mine = false;
    for (const void* s : sources) mine |= where_.count(s) > 0;
    if (!mine) return;  // a pass over other tensors
    new_round();
    in_pass_ = true;
  }

  void gradient_ready(const void* source, const Tensor& g) override {
    std::lock_guard lock(mu_);
    if (!in_pass_) return;
    auto it = where_.find(source);
    if (it == where_.end()) return;
    auto [bi, k] = it->second;
    Bucket& b = buckets_[bi];
    if (b.work || b.packed[k] || !pack(b, k, g)) return;
    if (++b.filled == b.params.size() && opts_.overlap) launch_ready();
  }

  void pass_ends() override {
    std::lock_guard lock(mu_);
    if (!in_pass_) return;
    in_pass_ = false;
    pass_end_ = Clock::now();
    pass_ended_ = true;
    // The gradients this pass did not reach are zeros (or absent) here:
    // send what remains now rather than in update().
    if (opts_.overlap)
      while (next_ < buckets_.size()) launch(next_++);
  }

  void transform(std::vector<Tensor>& grads) override {
    std::lock_guard lock(mu_);
    const auto t0 = Clock::now();
    StepStats st;
    st.buckets = int64_t(buckets_.size());
    st.backward_end_to_update = pass_ended_ ? seconds(t0 - pass_end_) : 0;
    if (!round_open_) new_round();  // no pass seen: everything from grads
    // Buckets sent with other gradients than these are sent again.
    for (size_t i = 0; i < buckets_.size(); ++i) {
      Bucket& b = buckets_[i];
      bool same = true;
      for (size_t k = 0; k < b.params.size(); ++k) {
        const Tensor& g = grads[b.params[k]];
        same &= b.packed[k] == (g.defined() ? g.id() : nullptr);
      }
      if (!same) {
        if (b.work) b.work->wait();  // started everywhere: finish it, then redo
        b.work.reset();
        fresh_buffer(b);
        for (size_t k = 0; k < b.params.size(); ++k)
          if (grads[b.params[k]].defined()) pack(b, k, grads[b.params[k]]);
      }
    }
    for (size_t i = 0; i < buckets_.size(); ++i)
      if (!buckets_[i].work) launch(i);
    for (auto& b : buckets_) {
      const auto w0 = Clock::now();
      b.work->wait();
      st.wait_seconds += seconds(Clock::now() - w0);
      unpack(b, grads);
      st.started_before_backward_end.push_back(pass_ended_ ? seconds(pass_end_ - b.launched_at) : 0);
      st.overlapped += b.launched_in_pass ? 1 : 0;
      b.work.reset();
    }
    st.allreduces = sent_;
    sent_ = 0;
    round_open_ = false;  // the views handed out keep this round's buffers
    pass_ended_ = false;
    last_ = st;
  }

  StepStats stats() const {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  struct Bucket {
    DType dtype = DType::Float32;
    Device device;
    std::vector<size_t> params;    // indices into params_, in the order they fill
    std::vector<int64_t> offsets;  // of each gradient, in elements; presence flags follow
    int64_t grad_numel = 0;
    // This round:
    Tensor flat;
    std::vector<const void*> packed;  // the gradient packed per parameter (null: none)
    size_t filled = 0;
    std::unique_ptr<Work> work;
    Clock::time_point launched_at{};
    bool launched_in_pass = false;
  };

  void assign_buckets() {
    constexpr double kMiB = 1024.0 * 1024.0;
    std::map<std::pair<int, std::string>, size_t> open;  // (dtype, device) -> the bucket being filled
    std::map<std::pair<int, std::string>, int> closed;
    for (size_t i = params_.size(); i-- > 0;) {  // reverse order: roughly when the pass finishes them
      const Tensor& p = params_[i];
      const auto key = std::make_pair(int(p.dtype()), p.device().str());
      auto it = open.find(key);
      if (it == open.end()) {
        buckets_.emplace_back();
        buckets_.back().dtype = p.dtype();
        buckets_.back().device = p.device();
        it = open.emplace(key, buckets_.size() - 1).first;
      }
      Bucket& b = buckets_[it->second];
      where_[p.id()] = {it->second, b.params.size()};
      b.params.push_back(i);
      b.offsets.push_back(b.grad_numel);
      b.grad_numel += p.numel();
      const double cap = (closed[key] == 0 ? opts_.first_bucket_mib : opts_.bucket_mib) * kMiB;
      if (double(b.grad_numel) * double(dtype_size(b.dtype)) >= cap) {
        open.erase(it);
        ++closed[key];
      }
    }
  }

  // Fresh buffers for a round (the previous round's views stay valid).
  void new_round() {
    for (auto& b : buckets_) {
      if (b.work) b.work->wait();  // a round whose update never came
      b.work.reset();
      fresh_buffer(b);
    }
    next_ = 0;
    sent_ = 0;
    round_open_ = true;
    pass_ended_ = false;
  }

  // A new flat buffer for b (gradients, then presence flags), nothing packed.
  static void fresh_buffer(Bucket& b) {
    b.flat = empty(b.dtype, Shape{b.grad_numel + int64_t(b.params.size())}, b.device);
    b.packed.assign(b.params.size(), nullptr);
    b.filled = 0;
    b.launched_in_pass = false;
  }

  flx_mem at(const Bucket& b, int64_t element) const {
    flx_mem m = flx::internal::mem(b.flat);
    m.offset += uint64_t(element) * dtype_size(b.dtype);
    return m;
  }

  // g into its place in the bucket (converted to the bucket's type); false
  // when it cannot go there (another shape or device: update() will say so).
  bool pack(Bucket& b, size_t k, const Tensor& g) {
    const Tensor& p = params_[b.params[k]];
    if (g.shape() != p.shape() || g.device() != b.device || !is_floating(g.dtype())) return false;
    const auto be = flx::internal::BackendCalls::of(g);
    const int dev = g.device().ordinal();
    if (g.dtype() == b.dtype)
      be.copy_d2d(dev, at(b, b.offsets[k]), flx::internal::mem(g), size_t(g.numel()) * dtype_size(b.dtype));
    else
      be.cast(dev, at(b, b.offsets[k]), b.dtype, flx::internal::mem(g), g.dtype(), size_t(g.numel()));
    b.packed[k] = g.id();
    return true;
  }

  void launch_ready() {
    while (next_ < buckets_.size() && buckets_[next_].filled == buckets_[next_].params.size()) launch(next_++);
  }

  // Zeros where this rank has no gradient, the presence flags, then the
  // allreduce.
  void launch(size_t i) {
    Bucket& b = buckets_[i];
    const auto be = flx::internal::BackendCalls::of(b.flat);
    const int dev = b.flat.device().ordinal();
    const int64_t n = int64_t(b.params.size());
    std::vector<double> presence(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      presence[size_t(k)] = b.packed[size_t(k)] ? 1 : 0;
      if (!b.packed[size_t(k)]) be.fill(dev, at(b, b.offsets[size_t(k)]), b.dtype, size_t(params_[b.params[size_t(k)]].numel()), 0.0);
    }
    // Converted on the host: a device need not have Float64.
    const Tensor flags = tensor(presence).to(b.dtype).to(b.device);
    be.copy_d2d(dev, at(b, b.grad_numel), flx::internal::mem(flags), size_t(n) * dtype_size(b.dtype));
    std::ostringstream what;
    what << "allreduce of gradient bucket " << i + 1 << " of " << buckets_.size() << " (" << b.grad_numel << " "
         << b.dtype << " values, " << format_bytes(b.grad_numel * int64_t(dtype_size(b.dtype))) << ", on "
         << b.device << ")";
    b.launched_at = Clock::now();
    b.launched_in_pass = in_pass_;
    b.work = comm_->start(Collective::Allreduce, b.flat, opts_.op, 0, what.str());
    ++sent_;
  }

  // The combined gradients as views of the bucket; a parameter that no
  // rank had a gradient for stays undefined.
  void unpack(const Bucket& b, std::vector<Tensor>& grads) const {
    std::vector<double> presence;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const size_t p = b.params[k];
      if (!grads[p].defined()) {  // absent here: present elsewhere?
        if (presence.empty())
          presence = flx::internal::share(b.flat, Shape{int64_t(b.params.size())},
                                          uint64_t(b.grad_numel) * dtype_size(b.dtype))
                         .to_vector<double>();
        if (presence[k] == 0) continue;
      }
      grads[p] = flx::internal::share(b.flat, params_[p].shape(),
                                      uint64_t(b.offsets[k]) * dtype_size(b.dtype));
    }
  }

  std::shared_ptr<Communicator> comm_;
  DistributedOptions opts_;
  std::vector<Tensor> params_;
  std::unordered_map<const void*, std::pair<size_t, size_t>> where_;  // parameter -> (bucket, index in it)
  std::vector<Bucket> buckets_;
  size_t next_ = 0;          // the next bucket to launch this round
  int64_t sent_ = 0;         // allreduces started this round
  bool round_open_ = false;  // this round's buffers exist
  bool in_pass_ = false;     // a backward pass over these parameters runs
  bool pass_ended_ = false;
  Clock::time_point pass_end_{};
  StepStats last_;
  mutable std::mutex mu_;
};

}  // namespace
}  // namespace detail

void DistributedOptimizer::check() const {
  FLX_CHECK(backend_, DistributedError,
            "DistributedOptimizer: the distributed backend is not initialised (it was made by default, not by "
            "initialize); start one with distributed::initialize<distributed::MPIBackend>() (or "
            "<distributed::NCCLBackend>), and use what it returns");
  FLX_CHECK(opts_.bucket_mib > 0 && opts_.first_bucket_mib > 0, ArgumentError,
            "DistributedOptimizer: bucket sizes ", opts_.first_bucket_mib, " and ", opts_.bucket_mib,
            " MiB; expected positive sizes");
  FLX_CHECK(opts_.op == ReduceOp::Avg || opts_.op == ReduceOp::Sum, ArgumentError,
            "DistributedOptimizer: gradients combine with Avg or Sum, not ", opts_.op);
  FLX_CHECK(!rule_->transforms_gradients(), ArgumentError, "DistributedOptimizer: its rule (", *rule_,
            ") already combines gradients across processes; wrap a rule only once");
}

void DistributedOptimizer::print(std::ostream& os) const {
  os << "DistributedOptimizer(" << backend_->name() << "(" << backend_->size << " workers), " << *rule_ << ")";
}

std::shared_ptr<OptRule> DistributedOptimizer::clone() const {
  auto c = std::make_shared<DistributedOptimizer>(*this);
  c->rule_ = rule_->clone();
  return c;
}

void DistributedOptimizer::set_eta(double e) { rule_->set_eta(e); }

std::shared_ptr<GradientTransform> DistributedOptimizer::gradient_transform(const std::vector<Tensor>& params) const {
  auto buckets = std::make_shared<detail::GradientBuckets>(backend_, opts_, params);
  if (opts_.overlap) flx::internal::add_gradient_observer(buckets);
  return buckets;
}

StepStats last_step_stats(const OptState& state) {
  auto* b = dynamic_cast<const detail::GradientBuckets*>(state.gradient_transform().get());
  FLX_CHECK(b, DistributedError,
            "last_step_stats: this optimiser state was not set up with a DistributedOptimizer");
  return b->stats();
}

}  // namespace flx::distributed

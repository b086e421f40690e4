// Distributed data-parallel training (Flux's DistributedUtils), on OpenMPI
// and NCCL. Its own library: link flx::distributed (programs that do not
// include this header neither link nor load MPI).
//
//   using namespace flx;
//   auto backend = distributed::initialize<distributed::MPIBackend>();  // or NCCLBackend
//   auto model = distributed::synchronize(backend, distributed::FluxDistributedModel(make_model()), 0);
//   auto opt = setup(distributed::DistributedOptimizer(backend, Adam(1e-3)), model);
//   opt = distributed::synchronize(backend, opt, 0);
//   DataLoader loader(distributed::DistributedDataContainer(backend, std::tuple{X, Y}), {.batchsize = 64});
//   for (auto [x, y] : loader) {                       // this rank's share of the data
//     auto [l, g] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
//     update(opt, model, std::get<0>(g));             // gradients averaged across ranks first
//   }
//
// Run under MPI: `mpiexec -n 4 ./train` (one process per GPU). Gradients are
// averaged in flat buckets (PyTorch DDP's sizes), each bucket's allreduce
// starting during the backward pass as soon as its last gradient is ready.
// Every collective has a deadline (InitOptions::timeout, default 10
// minutes, or $FLX_DISTRIBUTED_TIMEOUT in seconds): a rank that dies, stops
// or throws ends the whole job with a message naming the rank and the
// collective, never a hang. The guide: docs/gpu.md, "Distributed training".
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flx/data.hpp"
#include "flx/error.hpp"
#include "flx/functor.hpp"
#include "flx/optimisers.hpp"
#include "flx/tensor.hpp"

namespace flx::distributed {

// A collective failed or missed its deadline, or a backend could not start;
// the message names this rank, the collective and, where it can tell, the
// rank at fault. After one, the backend refuses further collectives and the
// process ends the job when it exits (MPI_Abort), so no rank is left waiting.
class FLX_API DistributedError : public Error {
 public:
  using Error::Error;
};

enum class ReduceOp { Sum, Avg, Max, Min };
FLX_API std::ostream& operator<<(std::ostream& os, ReduceOp op);

struct FLX_API InitOptions {
  // Deadline of every collective, in seconds; 0 takes $FLX_DISTRIBUTED_TIMEOUT,
  // else 600.
  double timeout = 0;
  // An uncaught exception on a rank ends the job on every rank (MPI_Abort
  // with its message) instead of leaving the others waiting.
  bool abort_on_uncaught = true;
};

namespace detail {
class Communicator;
}

// What MPIBackend and NCCLBackend share: a handle (copies share it) on this
// process's place among the workers. One made by default (MPIBackend b;)
// is not initialised: every use of it (rank(), a collective, a data share)
// raises DistributedError saying to call initialize<B>().
class FLX_API DistributedBackend {
 public:
  int rank() const;       // 0-based, in the job
  int size() const;       // number of processes
  int node_rank() const;  // among the processes on this machine (picks the GPU)
  int node_size() const;
  std::string name() const;  // "MPIBackend", "NCCLBackend"
  // Collectives this process has started (allreduce, bcast, reduce), for
  // tests and benchmarks.
  int64_t collectives_started() const;
  const std::shared_ptr<detail::Communicator>& communicator() const { return comm_; }

 protected:
  DistributedBackend() = default;
  explicit DistributedBackend(std::shared_ptr<detail::Communicator> c) : comm_(std::move(c)) {}
  std::shared_ptr<detail::Communicator> comm_;
};
FLX_API std::ostream& operator<<(std::ostream& os, const DistributedBackend& b);  // MPIBackend(rank 0 of 2)

// Collectives through MPI: host tensors directly; device tensors through
// pinned host buffers, or directly when MPI is CUDA-aware and you say so
// (LocalPreferences.toml: [Flux] FluxDistributedMPICUDAAware = true, or
// FLX_DISTRIBUTED_MPI_CUDA_AWARE=1).
class FLX_API MPIBackend : public DistributedBackend {
 public:
  MPIBackend() = default;  // not initialised: initialize<MPIBackend>() gives a working one
  explicit MPIBackend(std::shared_ptr<detail::Communicator> c) : DistributedBackend(std::move(c)) {}
  bool cuda_aware() const;
};

// Collectives on CUDA tensors through NCCL (bootstrapped over MPI), on the
// GPU node_rank() of this machine; tensors on other devices go through MPI.
class FLX_API NCCLBackend : public DistributedBackend {
 public:
  NCCLBackend() = default;  // not initialised: initialize<NCCLBackend>() gives a working one
  NCCLBackend(std::shared_ptr<detail::Communicator> c, MPIBackend mpi)
      : DistributedBackend(std::move(c)), mpi_(std::move(mpi)) {}
  const MPIBackend& mpi() const { return mpi_; }
  Device device() const;  // this rank's GPU

 private:
  MPIBackend mpi_;
};

template <class B>
concept Backend = std::is_same_v<B, MPIBackend> || std::is_same_v<B, NCCLBackend>;

// Start the backend (MPI first: MPI_Init_thread on a communication thread
// of flx's own). Once per process; a second call returns the same backend.
// DistributedError saying which and why when MPI or NCCL is unavailable.
template <Backend B>
B initialize(const InitOptions& opts = {});
// The backend initialize<B>() started; DistributedError before that.
template <Backend B>
B get_distributed_backend();
template <Backend B>
bool initialized();

template <>
FLX_API MPIBackend initialize<MPIBackend>(const InitOptions& opts);
template <>
FLX_API NCCLBackend initialize<NCCLBackend>(const InitOptions& opts);
template <>
FLX_API MPIBackend get_distributed_backend<MPIBackend>();
template <>
FLX_API NCCLBackend get_distributed_backend<NCCLBackend>();
template <>
FLX_API bool initialized<MPIBackend>();
template <>
FLX_API bool initialized<NCCLBackend>();

inline int total_workers(const DistributedBackend& b) { return b.size(); }
// The rank of this process in the job (Flux's local_rank: MPI's rank).
inline int local_rank(const DistributedBackend& b) { return b.rank(); }
// The rank of this process among those of its machine.
inline int node_rank(const DistributedBackend& b) { return b.node_rank(); }

// ---- collectives on tensors, in place (every rank calls them, in the same order)
// x becomes op over every rank's x; returns x.
FLX_API Tensor allreduce(const DistributedBackend& b, const Tensor& x, ReduceOp op = ReduceOp::Sum);
// x becomes root's x on every rank; returns x.
FLX_API Tensor bcast(const DistributedBackend& b, const Tensor& x, int root = 0);
// On root, x becomes op over every rank's x; elsewhere x is unchanged.
FLX_API Tensor reduce(const DistributedBackend& b, const Tensor& x, ReduceOp op = ReduceOp::Sum, int root = 0);
// The same on host numbers.
FLX_API double allreduce(const DistributedBackend& b, double v, ReduceOp op);
FLX_API double bcast(const DistributedBackend& b, double v, int root = 0);

// Ends the job on every rank (MPI_Abort) after writing message to stderr,
// with this rank's number. For a rank that cannot go on.
FLX_API [[noreturn]] void abort(const DistributedBackend& b, const std::string& message, int code = 1);

namespace detail {
// b's communicator; DistributedError naming `what` when b was made by
// default rather than by initialize<B>().
FLX_API Communicator& communicator_of(const DistributedBackend& b, const char* what);

// Broadcast from root every tensor of `tensors` in place and each host
// number of `numbers`, after checking that every rank holds the same
// layout (`signature`: names, shapes, dtypes), naming the first difference.
FLX_API void broadcast_tree(const DistributedBackend& b, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::vector<double*>& numbers, int root);

template <class T>
void collect_numbers(T& x, std::vector<double>& values) {
  if constexpr (std::is_arithmetic_v<T>) values.push_back(double(x));
}
}  // namespace detail

// ---- synchronize: every rank takes root's values -----------------------------
// A model (any tree fmap walks): its tensors are broadcast in place, so the
// result shares them with x (one bcast per element type and device, not one
// per tensor).
template <class T>
T synchronize(const DistributedBackend& b, const T& x, int root = 0) {
  static_assert(!std::is_same_v<T, OptState>,
                "synchronize of a const optimiser state: pass the state itself (a non-const OptState, or the "
                "temporary setup() returns); its moments and step counts are updated in place");
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(bcast(b, double(x), root));
  } else {
    std::vector<std::pair<std::string, Tensor>> tensors;
    auto visit = [&](const std::string& path, const Tensor& t) {
      if (t.defined()) tensors.emplace_back(path, t);
    };
    flx::detail::walk<false>(visit, "", x);
    detail::broadcast_tree(b, tensors, {}, root);
    return x;
  }
}
// An optimiser state: its moments and its step counts (host numbers), in
// place; returns it.
FLX_API OptState synchronize(const DistributedBackend& b, OptState& state, int root = 0);
// The same for the temporary setup() returns:
//   auto opt = synchronize(backend, setup(rule, model), 0);
inline OptState synchronize(const DistributedBackend& b, OptState&& state, int root = 0) {
  return synchronize(b, state, root);
}

// Marks a model for synchronize (Flux's FluxDistributedModel); synchronize
// returns the model itself.
template <class M>
struct FluxDistributedModel {
  M model;
  explicit FluxDistributedModel(M m) : model(std::move(m)) {}
};
template <class M>
M synchronize(const DistributedBackend& b, const FluxDistributedModel<M>& m, int root = 0) {
  return synchronize(b, m.model, root);
}

// ---- data: this rank's share ---------------------------------------------------
// The contiguous observations [start, stop) of `data` (a tensor, a tuple of
// them, mapobs data) that rank r of n gets: shares differ in size by at most
// one, cover every observation once, and none is empty (fewer observations
// than workers is an ArgumentError). Usable as DataLoader data.
FLX_API std::pair<int64_t, int64_t> share_of(int64_t nobs, int rank, int workers);

template <class D>
struct DistributedDataContainer {
  D data;
  int64_t start = 0, stop = 0;
  DistributedDataContainer(const DistributedBackend& b, D d) : data(std::move(d)) {
    (void)detail::communicator_of(b, "DistributedDataContainer");
    std::tie(start, stop) = share_of(flx::detail::numobs_of(data), b.rank(), b.size());
  }
};
template <class D>
int64_t numobs(const DistributedDataContainer<D>& d) {
  return d.stop - d.start;
}
template <class D>
auto getobs(const DistributedDataContainer<D>& d, int64_t start, int64_t stop) {
  return getobs(d.data, d.start + start, d.start + stop);
}
template <class D>
auto getobs(const DistributedDataContainer<D>& d, std::span<const int64_t> idx) {
  std::vector<int64_t> shifted(idx.begin(), idx.end());
  for (auto& i : shifted) i += d.start;
  return getobs(d.data, std::span<const int64_t>(shifted));
}

// ---- the optimiser -----------------------------------------------------------------
struct FLX_API DistributedOptions {
  // Gradients travel in flat buckets of this many MiB (PyTorch DDP's
  // bucket_cap_mb), the first one smaller so that communication starts
  // early; each bucket is one allreduce.
  double bucket_mib = 25;
  double first_bucket_mib = 1;
  // Start each bucket's allreduce during the backward pass, as soon as its
  // gradients are final; false: all of them in update().
  bool overlap = true;
  // How the ranks' gradients combine: Avg (the mean, as for a loss that is a
  // mean over each rank's equal share), or Sum (for a loss each rank scales
  // itself, e.g. by its share of the global batch).
  ReduceOp op = ReduceOp::Avg;
};

// Wraps any rule (a chain too): the gradients of a step are combined across
// ranks (averaged by default) before the rule sees them, so every rank
// makes the same update. A leaf no rank has a gradient for is skipped, as
// in one process; a tied weight is communicated once.
class FLX_API DistributedOptimizer : public OptRule {
 public:
  template <class R>
    requires std::is_base_of_v<OptRule, R>
  DistributedOptimizer(const DistributedBackend& b, const R& rule, DistributedOptions opts = {})
      : backend_(b.communicator()), rule_(rule.clone()), opts_(opts) {
    check();
  }
  const OptRule& rule() const { return *rule_; }
  const DistributedOptions& options() const { return opts_; }

  RuleState init(const Tensor& x) const override { return rule_->init(x); }
  Tensor apply(RuleState& st, const Tensor& x, const Tensor& dx) const override { return rule_->apply(st, x, dx); }
  bool apply_in_place(RuleState& st, const Tensor& x, const Tensor& dx) const override {
    return rule_->apply_in_place(st, x, dx);
  }
  bool steps_in_place() const override { return rule_->steps_in_place(); }
  bool may_refuse() const override { return rule_->may_refuse(); }
  void print(std::ostream& os) const override;
  std::shared_ptr<OptRule> clone() const override;
  void set_eta(double e) override;
  bool transforms_gradients() const override { return true; }
  const OptRule& state_rule() const override { return rule_->state_rule(); }
  DType gradient_dtype(const Tensor& param) const override { return rule_->gradient_dtype(param); }
  std::shared_ptr<GradientTransform> gradient_transform(const std::vector<Tensor>& params) const override;

 private:
  void check() const;
  std::shared_ptr<detail::Communicator> backend_;
  std::shared_ptr<OptRule> rule_;
  DistributedOptions opts_;
};

// What the last update() of a DistributedOptimizer state did with the
// gradients: for tests and benchmarks.
struct FLX_API StepStats {
  int64_t buckets = 0;       // how many the parameters fill
  int64_t allreduces = 0;    // collectives the step's gradients took
  int64_t overlapped = 0;    // buckets whose allreduce started during the backward pass
  // Per bucket: seconds from the start of its allreduce to the end of the
  // backward pass (positive: it started that long before the pass ended).
  std::vector<double> started_before_backward_end;
  double backward_end_to_update = 0;  // seconds from the end of the pass to update()
  double wait_seconds = 0;            // update()'s wait for gradients still in flight
};
// DistributedError when `state` was not set up with a DistributedOptimizer.
FLX_API StepStats last_step_stats(const OptState& state);

}  // namespace flx::distributed

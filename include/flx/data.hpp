// Data: DataLoader over a tensor or a tuple of tensors (observations along the
// last dimension), mapobs, and `loader | device`, which yields batches on a
// device while a background thread prepares the next ones.
//
//   DataLoader loader(std::tuple{X, Y}, {.batchsize = 64, .shuffle = true});
//   for (auto [x, y] : loader | gpu) { ... }     // batches on the GPU
//
// Without shuffling, batches are zero-copy views of the data; with it, they
// are gathered (on the data's device, so data moved to a GPU first stays
// there). Each epoch (each `for` over the loader) draws a new permutation from
// the loader's seed and the epoch number, so runs are reproducible.
//
// Also MLUtils' splitobs, shuffleobs and kfolds, and the loader's options
// .collate (how observations become a batch), .parallel (batches prepared on
// several threads, the same batches as a serial loader) and .buffer (reuse a
// gathered batch's memory once it is no longer held).
#pragma once

#include "flx/export.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "flx/arrays.hpp"
#include "flx/functor.hpp"
#include "flx/movement.hpp"
#include "flx/tensor.hpp"
#include "flx/threads.hpp"

namespace flx {

struct FLX_API DataLoaderOptions {
  int64_t batchsize = 1;
  bool shuffle = false;
  bool partial = true;          // keep the short last batch
  std::optional<uint64_t> seed;  // default: drawn from set_seed's generator
  // How a list of observations becomes a batch (MLUtils' collate). Unset:
  // the data's own getobs(data, indices) makes the batch. Set: the loader
  // takes the batch's observations one by one (getobs(data, i, i + 1) with
  // the observation dim dropped, as MLUtils' getobs(data, i)) and calls
  // collate once per tensor of the batch (each member of a tuple), with that
  // member's observations in batch order; it returns the batch tensor,
  // observations along its last dim. flx::batch is MLUtils' default (stack).
  std::function<Tensor(const std::vector<Tensor>&)> collate;
  // Prepare batches on num_threads() threads, ahead of the consumer (data
  // in host memory; data on a device is batched by one thread). The
  // batches are those of a serial loader with the same seed, bit for bit and
  // in the same order (each batch is a function of the epoch's plan and its
  // number; a mapobs transform must be deterministic and thread-safe).
  bool parallel = false;
  // Gather shuffled batches of host tensors into reused memory: a batch's
  // buffer is reused once nothing holds that batch any more (nor a view of
  // it), so a batch kept by the caller is never overwritten. In-order
  // batches are views already and need no buffer.
  bool buffer = false;
};

// MLUtils' batch: observations of one shape stacked along a new last dim.
FLX_API Tensor batch(const std::vector<Tensor>& observations);

namespace detail {
// Reused batch memory for DataLoaderOptions::buffer (thread-safe).
class FLX_API BufferPool {
 public:
  // A host tensor of x's dtype with x's shape but `count` observations,
  // reused when nothing else holds it.
  Tensor take(const Tensor& x, int64_t count);

 private:
  std::mutex mu_;
  std::vector<Tensor> kept_;
};
// getobs(x, idx) written into pool's memory (a plain getobs off the host).
FLX_API Tensor getobs_into(const Tensor& x, std::span<const int64_t> idx, BufferPool& pool);
// An observation batch of one observation with its last dim dropped.
FLX_API Tensor drop_obs_dim(const Tensor& x);
FLX_API [[noreturn]] void throw_collate(const std::string& what);
}  // namespace detail

namespace detail {
FLX_API uint64_t draw_seed();
// numobs(d) for any data, found by argument-dependent lookup too (data
// types of other namespaces, e.g. distributed::DistributedDataContainer).
template <class D>
int64_t numobs_of(const D& d) {
  return numobs(d);
}
template <class D>
auto getobs_idx_or_range(const D& d, int64_t start, int64_t stop) {
  return getobs(d, start, stop);
}
}  // namespace detail

// ---- data containers: numobs and getobs (MLUtils' names) ------------------
// A tensor holds numobs = size of its last dim observations.
FLX_API int64_t numobs(const Tensor& x);
// Observations [start, stop): a zero-copy view.
FLX_API Tensor getobs(const Tensor& x, int64_t start, int64_t stop);
// Observations idx (0-based): a gathered copy on x's device.
FLX_API Tensor getobs(const Tensor& x, std::span<const int64_t> idx);

namespace detail {
FLX_API [[noreturn]] void throw_obs_mismatch(const std::vector<std::pair<int64_t, std::string>>& counts);
FLX_API void collect_obs(const Tensor& x, std::vector<std::pair<int64_t, std::string>>& out);
template <class... T>
void collect_obs(const std::tuple<T...>& d, std::vector<std::pair<int64_t, std::string>>& out) {
  std::apply([&](const auto&... x) { (collect_obs(x, out), ...); }, d);
}
}  // namespace detail

// A tuple's members must agree on the number of observations.
template <class... T>
int64_t numobs(const std::tuple<T...>& d) {
  static_assert(sizeof...(T) > 0, "flx::DataLoader: an empty tuple holds no data");
  std::vector<std::pair<int64_t, std::string>> counts;
  detail::collect_obs(d, counts);
  for (const auto& c : counts)
    if (c.first != counts[0].first) detail::throw_obs_mismatch(counts);
  return counts[0].first;
}
template <class... T>
std::tuple<T...> getobs(const std::tuple<T...>& d, int64_t start, int64_t stop) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{getobs(x, start, stop)...}; }, d);
}
namespace detail {
template <class D>
auto getobs_idx(const D& d, std::span<const int64_t> idx);
}
template <class... T>
std::tuple<T...> getobs(const std::tuple<T...>& d, std::span<const int64_t> idx) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{detail::getobs_idx(x, idx)...}; }, d);
}

// mapobs(f, data): data whose batches are f(batch), computed lazily when the
// loader makes each batch (on the background thread of `loader | device`).
// f takes and returns a batch (observations along the last dim) and must
// keep the number of observations.
template <class F, class D>
struct MappedData {
  F f;
  D data;
};
template <class F, class D>
MappedData<F, D> mapobs(F f, D data) {
  return {std::move(f), std::move(data)};
}
template <class F, class D>
int64_t numobs(const MappedData<F, D>& d) {
  return numobs(d.data);
}
template <class F, class D>
auto getobs(const MappedData<F, D>& d, int64_t start, int64_t stop) {
  return d.f(getobs(d.data, start, stop));
}
template <class F, class D>
auto getobs(const MappedData<F, D>& d, std::span<const int64_t> idx) {
  return d.f(detail::getobs_idx(d.data, idx));
}

namespace detail {
// getobs(d, idx) where d has it; else (user types with only the range form)
// one observation at a time, concatenated along the last dim per tensor.
template <class D>
auto getobs_idx(const D& d, std::span<const int64_t> idx) {
  if constexpr (requires { getobs(d, idx); }) {
    return getobs(d, idx);
  } else {
    using B = decltype(getobs(d, int64_t{}, int64_t{}));
    if (idx.empty()) return getobs(d, 0, 0);
    std::vector<B> parts;
    parts.reserve(idx.size());
    for (int64_t i : idx) parts.push_back(getobs(d, i, i + 1));
    if (parts.size() == 1) return parts[0];
    std::vector<std::vector<Tensor>> cols;
    for (const B& p : parts) {
      std::vector<Tensor> ls = leaves(p);
      if (cols.empty()) cols.resize(ls.size());
      if (ls.size() != cols.size()) throw_collate("getobs: every observation must hold the same number of tensors");
      for (size_t j = 0; j < ls.size(); ++j) cols[j].push_back(ls[j]);
    }
    std::vector<Tensor> out;
    for (auto& c : cols) out.push_back(cat(c, int(c[0].ndims()) - 1));
    size_t j = 0;
    return fmap([&](const Tensor&) { return out[j++]; }, parts[0]);
  }
}
}  // namespace detail

// ---- subsets: splitobs, shuffleobs, kfolds (MLUtils) -----------------------
// ObsView: the observations `indices` (or, without indices, the range
// [start, start + count)) of `data`, read with numobs and getobs like any
// data; nothing is copied until getobs.
template <class D>
struct ObsView {
  D data;
  int64_t start = 0, count = 0;
  std::shared_ptr<const std::vector<int64_t>> indices;  // null: a range
  int64_t operator[](int64_t i) const { return indices ? (*indices)[size_t(i)] : start + i; }
};
namespace detail {
FLX_API void check_obs_range(const char* fn, int64_t n, int64_t start, int64_t stop);
FLX_API std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);
FLX_API int64_t split_point(int64_t n, double at);
}  // namespace detail
template <class D>
int64_t numobs(const ObsView<D>& v) {
  return v.count;
}
template <class D>
auto getobs(const ObsView<D>& v, int64_t start, int64_t stop) {
  detail::check_obs_range("getobs", v.count, start, stop);
  if (!v.indices) return detail::getobs_idx_or_range(v.data, v.start + start, v.start + stop);
  return detail::getobs_idx(v.data, std::span<const int64_t>(*v.indices).subspan(size_t(start), size_t(stop - start)));
}
template <class D>
auto getobs(const ObsView<D>& v, std::span<const int64_t> idx) {
  std::vector<int64_t> mapped;
  mapped.reserve(idx.size());
  for (int64_t i : idx) {
    detail::check_obs_range("getobs", v.count, i, i + 1);
    mapped.push_back(v[i]);
  }
  return detail::getobs_idx(v.data, std::span<const int64_t>(mapped));
}

struct FLX_API SplitObsOptions {
  double at = std::numeric_limits<double>::quiet_NaN();  // required: the first part's fraction, in [0, 1]
  bool shuffle = false;                                  // permute the observations before splitting
  std::optional<uint64_t> seed;                          // of that permutation; default: from set_seed's generator
};

// shuffleobs(data): the observations of data in a random order (a
// permutation drawn from `seed`, or from set_seed's generator).
template <class D>
ObsView<D> shuffleobs(D data, std::optional<uint64_t> seed = std::nullopt) {
  const int64_t n = detail::numobs_of(data);
  auto perm = std::make_shared<const std::vector<int64_t>>(detail::permutation(n, seed ? *seed : detail::draw_seed(), 0));
  return ObsView<D>{std::move(data), 0, n, std::move(perm)};
}

// splitobs(data, {.at = 0.7}): {the first round(at * n) observations, the
// rest}, in order (MLUtils' splitobs; .shuffle = true permutes first).
template <class D>
std::pair<ObsView<D>, ObsView<D>> splitobs(D data, const SplitObsOptions& o) {
  const int64_t n = detail::numobs_of(data);
  const int64_t n1 = detail::split_point(n, o.at);
  if (o.shuffle) {
    auto perm = detail::permutation(n, o.seed ? *o.seed : detail::draw_seed(), 0);
    auto a = std::make_shared<const std::vector<int64_t>>(perm.begin(), perm.begin() + n1);
    auto b = std::make_shared<const std::vector<int64_t>>(perm.begin() + n1, perm.end());
    return {ObsView<D>{data, 0, n1, std::move(a)}, ObsView<D>{std::move(data), 0, n - n1, std::move(b)}};
  }
  return {ObsView<D>{data, 0, n1, nullptr}, ObsView<D>{std::move(data), n1, n - n1, nullptr}};
}

// kfolds(n, k): {train index lists, validation index lists}, 0-based, as
// MLUtils: fold i validates a contiguous run; the first n % k folds hold
// one observation more.
FLX_API std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> kfolds(int64_t n, int64_t k = 5);


namespace detail {

// Which observations an epoch's batches hold.
struct FLX_API EpochPlan {
  int64_t n = 0, batchsize = 1, nbatches = 0;
  std::vector<int64_t> perm;  // empty: in order
  std::pair<int64_t, int64_t> range(int64_t k) const {
    int64_t a = k * batchsize;
    return {a, a + std::min(batchsize, n - a)};  // no a + batchsize past INT64_MAX
  }
};
FLX_API void check_options(const DataLoaderOptions& o);
FLX_API int64_t batches_per_epoch(int64_t n, const DataLoaderOptions& o);
FLX_API EpochPlan plan_epoch(int64_t n, const DataLoaderOptions& o, uint64_t seed, uint64_t epoch);
FLX_API uint64_t draw_seed();

// Whether every tensor of the data is in host memory (then a background
// thread can gather batches without touching a device).
FLX_API bool on_host(const Tensor& x);
template <class... T>
bool on_host(const std::tuple<T...>& d) {
  return std::apply([](const auto&... x) { return (on_host(x) && ...); }, d);
}
// Data that wraps other data in a member `data` (mapobs, a distributed
// share): where that lives.
template <class D>
  requires requires(const D& d) { d.data; }
bool on_host(const D& d) {
  return on_host(d.data);
}

}  // namespace detail

namespace detail {

// The gathered batch of observations idx, tensors written into pool memory
// (DataLoaderOptions::buffer); data other than tensors, tuples, mapobs and
// ObsViews gathers as getobs does.
inline Tensor gather(const Tensor& x, std::span<const int64_t> idx, BufferPool& pool) {
  return getobs_into(x, idx, pool);
}
template <class... T>
std::tuple<T...> gather(const std::tuple<T...>& d, std::span<const int64_t> idx, BufferPool& pool) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{gather(x, idx, pool)...}; }, d);
}
template <class F, class D>
auto gather(const MappedData<F, D>& d, std::span<const int64_t> idx, BufferPool& pool) {
  return d.f(gather(d.data, idx, pool));
}
template <class D>
auto gather(const ObsView<D>& v, std::span<const int64_t> idx, BufferPool& pool) {
  std::vector<int64_t> mapped;
  mapped.reserve(idx.size());
  for (int64_t i : idx) {
    check_obs_range("getobs", v.count, i, i + 1);
    mapped.push_back(v[i]);
  }
  return gather(v.data, std::span<const int64_t>(mapped), pool);
}
template <class D>
auto gather(const D& d, std::span<const int64_t> idx, BufferPool&) {
  return getobs_idx(d, idx);
}

// Runs make(0), make(1), ... on `threads` worker threads, up to 2 x threads
// batches ahead of the consumer, and hands them out in order: get(k) is
// make(k) (or rethrows make(k)'s error), whichever thread made it. Workers
// claim batches in order and stop claiming after an error, so the batches
// before a failing one all arrive, as from a serial loop.
template <class Batch>
class ParallelBatcher {
 public:
  ParallelBatcher(int64_t nbatches, std::function<Batch(int64_t)> make, int threads)
      : n_(nbatches), make_(std::move(make)) {
    const int64_t t = std::max<int64_t>(1, std::min<int64_t>(threads, n_));
    window_ = size_t(2 * t);
    slots_.resize(window_);
    for (int64_t i = 0; i < t; ++i) workers_.emplace_back([this] { run(); });
  }
  ~ParallelBatcher() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  ParallelBatcher(const ParallelBatcher&) = delete;
  ParallelBatcher& operator=(const ParallelBatcher&) = delete;

  // Batch k; k never decreases from one call to the next (skipped batches
  // are dropped).
  Batch get(int64_t k) {
    std::unique_lock lock(mu_);
    for (;;) {
      Slot& s = slots_[size_t(consumed_) % window_];
      cv_.wait(lock, [&] { return s.batch || s.error; });
      if (consumed_ == k) {
        if (s.error) std::rethrow_exception(s.error);
        Batch b = std::move(*s.batch);
        s.batch.reset();
        ++consumed_;
        cv_.notify_all();
        return b;
      }
      if (s.error) std::rethrow_exception(s.error);
      s.batch.reset();
      ++consumed_;
      cv_.notify_all();
    }
  }

 private:
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  void run() {
    for (;;) {
      int64_t k;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || failed_ || claimed_ >= n_ || claimed_ < consumed_ + int64_t(window_); });
        if (stop_ || failed_ || claimed_ >= n_) return;
        k = claimed_++;
      }
      std::optional<Batch> b;
      std::exception_ptr err;
      try {
        b.emplace(make_(k));
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lock(mu_);
      Slot& s = slots_[size_t(k) % window_];
      if (err) {
        s.error = err;
        failed_ = true;
      } else {
        s.batch = std::move(b);
      }
      cv_.notify_all();
    }
  }

  int64_t n_;
  std::function<Batch(int64_t)> make_;
  size_t window_ = 1;
  std::vector<Slot> slots_;
  int64_t claimed_ = 0, consumed_ = 0;
  bool stop_ = false, failed_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
};

}  // namespace detail

template <class D>
class DataLoader {
 public:
  using Batch = decltype(getobs(std::declval<const D&>(), int64_t{}, int64_t{}));

  DataLoader(D data, DataLoaderOptions opts = {})
      : data_(std::move(data)), opts_(opts), epoch_(std::make_shared<std::atomic<uint64_t>>(0)) {
    detail::check_options(opts_);
    n_ = detail::numobs_of(data_);
    seed_ = opts_.seed ? *opts_.seed : detail::draw_seed();
  }

  int64_t size() const { return detail::batches_per_epoch(n_, opts_); }  // batches per epoch
  int64_t numobs() const { return n_; }
  const D& data() const { return data_; }
  const DataLoaderOptions& options() const { return opts_; }

  // The plan of the next epoch (a new permutation when shuffling).
  detail::EpochPlan next_epoch() const { return detail::plan_epoch(n_, opts_, seed_, epoch_->fetch_add(1)); }
  Batch batch(const detail::EpochPlan& p, int64_t k) const {
    auto [a, b] = p.range(k);
    if (opts_.collate) return collated(p, a, b);
    if (p.perm.empty()) return getobs(data_, a, b);
    auto idx = std::span<const int64_t>(p.perm).subspan(size_t(a), size_t(b - a));
    if (opts_.buffer) return detail::gather(data_, idx, *pool_);
    return detail::getobs_idx(data_, idx);
  }

  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const DataLoader* l, std::shared_ptr<const detail::EpochPlan> p) : loader_(l), plan_(std::move(p)) {}
    iterator(const DataLoader* l, std::shared_ptr<const detail::EpochPlan> p,
             std::shared_ptr<detail::ParallelBatcher<Batch>> par)
        : loader_(l), plan_(std::move(p)), par_(std::move(par)) {}
    Batch operator*() const {
      if (!cur_) cur_ = par_ ? par_->get(k_) : loader_->batch(*plan_, k_);
      return *cur_;
    }
    iterator& operator++() {
      ++k_;
      cur_.reset();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return k_ >= plan_->nbatches; }

   private:
    const DataLoader* loader_ = nullptr;
    std::shared_ptr<const detail::EpochPlan> plan_;
    std::shared_ptr<detail::ParallelBatcher<Batch>> par_;
    int64_t k_ = 0;
    mutable std::optional<Batch> cur_;
  };
  iterator begin() const {
    auto plan = std::make_shared<const detail::EpochPlan>(next_epoch());
    return iterator(this, plan, parallel_batcher(plan));
  }
  // With .parallel: the batches of `plan`, prepared ahead on worker threads
  // (null without .parallel).
  std::shared_ptr<detail::ParallelBatcher<Batch>> parallel_batcher(
      std::shared_ptr<const detail::EpochPlan> plan) const {
    if (!opts_.parallel || plan->nbatches == 0) return nullptr;
    // Data on a device is batched there, by one thread.
    if constexpr (requires { detail::on_host(data_); })
      if (!detail::on_host(data_)) return nullptr;
    return std::make_shared<detail::ParallelBatcher<Batch>>(
        plan->nbatches, [self = *this, plan](int64_t k) { return self.batch(*plan, k); }, num_threads());
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  // .collate: the batch built observation by observation.
  Batch collated(const detail::EpochPlan& p, int64_t a, int64_t b) const {
    if constexpr (requires(const Batch& x) { leaves(x); fmap([](const Tensor& t) { return t; }, x); }) {
      std::vector<std::vector<Tensor>> cols;
      std::optional<Batch> first;
      for (int64_t i = a; i < b; ++i) {
        const int64_t j = p.perm.empty() ? i : p.perm[size_t(i)];
        Batch o = getobs(data_, j, j + 1);
        std::vector<Tensor> ls = leaves(o);
        if (!first) {
          first = o;
          cols.resize(ls.size());
        }
        if (ls.size() != cols.size())
          detail::throw_collate("DataLoader: every observation must hold the same number of tensors for .collate");
        for (size_t m = 0; m < ls.size(); ++m) cols[m].push_back(detail::drop_obs_dim(ls[m]));
      }
      std::vector<Tensor> out;
      for (auto& c : cols) {
        out.push_back(opts_.collate(c));
        if (!out.back().defined()) detail::throw_collate("DataLoader: .collate returned an undefined tensor");
      }
      size_t m = 0;
      return fmap([&](const Tensor&) { return out[m++]; }, *first);
    } else {
      detail::throw_collate("DataLoader: .collate needs batches made of tensors (a Tensor or a tuple of them)");
    }
  }

  D data_;
  DataLoaderOptions opts_;
  int64_t n_ = 0;
  uint64_t seed_ = 0;
  std::shared_ptr<std::atomic<uint64_t>> epoch_;  // shared by copies: one sequence of shuffles
  std::shared_ptr<detail::BufferPool> pool_ = std::make_shared<detail::BufferPool>();  // .buffer's memory
};

template <class D>
std::ostream& operator<<(std::ostream& os, const DataLoader<D>& l) {
  return os << l.size() << "-batch DataLoader(" << l.numobs() << " observations, batchsize=" << l.options().batchsize
            << (l.options().shuffle ? ", shuffle=true" : "") << (l.options().partial ? "" : ", partial=false") << ")";
}

namespace detail {

// Copies host tensors to a device through pinned staging memory on a copy
// stream of its own (a plain copy where the backend has no pinned memory),
// for the DataLoader's prefetch thread, while the consumer computes:
//   producer: start(k); move(t, k, 0), move(u, k, 1), ...; finish(k)
//   consumer: ready(k, tensors of batch k) before using batch k
// Batch k's staging buffers are ring entry k % ring (allocated once, reused
// when that entry's earlier copies are done); finish records an event on the
// copy stream that ready makes the consumer's stream wait for, so the copy
// overlaps the compute of earlier batches. `ring` must exceed how many
// batches the producer can run ahead of the consumer's ready() calls.
class FLX_API Stager {
 public:
  Stager(Device target, bool gpu_eltype, size_t ring);
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;
  void start(int64_t k);
  // t on the target device; `slot` numbers the tensors of one batch.
  Tensor move(const Tensor& t, int64_t k, size_t slot);
  void finish(int64_t k);
  void ready(int64_t k, const std::vector<Tensor>& batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The stager a DeviceLoader reuses across epochs: take() gives the kept one
// when no running epoch holds it, else a new one (then kept).
class FLX_API StagerCache {
 public:
  explicit StagerCache(size_t ring) : ring_(ring) {}
  std::shared_ptr<Stager> take(Device target, bool gpu_eltype) {
    std::lock_guard lock(mu_);
    if (!kept_ || kept_.use_count() > 1) kept_ = std::make_shared<Stager>(target, gpu_eltype, ring_);
    return kept_;
  }

 private:
  size_t ring_;
  std::mutex mu_;
  std::shared_ptr<Stager> kept_;
};

// Runs produce(0), produce(1), ... on a background thread, `depth` batches
// ahead of the consumer (or inline when not async). Errors in the producer
// are rethrown to the consumer by next().
template <class Batch>
class Prefetcher {
 public:
  Prefetcher(int64_t nbatches, std::function<Batch(int64_t)> produce, bool async, size_t depth = 2)
      : n_(nbatches), produce_(std::move(produce)), depth_(depth) {
    if (async && n_ > 0) thread_ = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch, or nothing at the end of the epoch.
  std::optional<Batch> next() {
    if (consumed_ >= n_) return std::nullopt;
    if (!thread_.joinable()) return produce_(consumed_++);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    ++consumed_;
    cv_.notify_all();
    return b;
  }

 private:
  void run() {
    try {
      for (int64_t k = 0; k < n_; ++k) {
        {
          std::unique_lock lock(mu_);
          cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
          if (stop_) return;
        }
        Batch b = produce_(k);
        std::lock_guard lock(mu_);
        queue_.push_back(std::move(b));
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  int64_t n_, consumed_ = 0;
  std::function<Batch(int64_t)> produce_;
  size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace detail

// A DataLoader whose batches arrive on a device: `loader | dev`, gpu(loader).
// Data in host memory is batched on a background thread and copied while the
// previous batch computes; data already on a device is batched there. Every
// batch is a tensor of its own: it stays valid as long as it is held.
template <class D>
class DeviceLoader {
 public:
  using Batch = typename DataLoader<D>::Batch;

  DeviceLoader(DataLoader<D> loader, Device d, bool gpu_eltype)
      : loader_(std::move(loader)), device_(d), gpu_eltype_(gpu_eltype) {}

  int64_t size() const { return loader_.size(); }
  Device device() const { return device_; }
  const DataLoader<D>& loader() const { return loader_; }

  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(std::shared_ptr<detail::Prefetcher<Batch>> p, std::function<void(int64_t, const Batch&)> ready)
        : p_(std::move(p)), ready_(std::move(ready)) {
      advance();
    }
    const Batch& operator*() const { return *cur_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !cur_.has_value(); }

   private:
    void advance() {
      cur_ = p_->next();
      if (cur_) ready_(k_++, *cur_);  // this thread's stream waits for the batch's copy
    }
    std::shared_ptr<detail::Prefetcher<Batch>> p_;
    std::function<void(int64_t, const Batch&)> ready_;
    std::optional<Batch> cur_;
    int64_t k_ = 0;
  };

  iterator begin() const {
    auto plan = std::make_shared<const detail::EpochPlan>(loader_.next_epoch());
    const bool async = detail::on_host(loader_.data());
    std::shared_ptr<detail::Stager> stager = stagers_->take(device_, gpu_eltype_);
    auto par = async ? loader_.parallel_batcher(plan) : nullptr;
    auto produce = [loader = loader_, plan, stager, par](int64_t k) {
      size_t slot = 0;
      Batch host = par ? par->get(k) : loader.batch(*plan, k);
      stager->start(k);
      Batch b = fmap([&](const Tensor& t) { return stager->move(t, k, slot++); }, host);
      stager->finish(k);
      return b;
    };
    auto ready = [stager](int64_t k, const Batch& b) { stager->ready(k, leaves(b)); };
    return iterator(std::make_shared<detail::Prefetcher<Batch>>(plan->nbatches, std::move(produce), async,
                                                                kPrefetchDepth),
                    std::move(ready));
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  // Batches the prefetch thread may produce ahead of the consumer, and the
  // staging ring that covers them (see Stager).
  static constexpr size_t kPrefetchDepth = 2;
  DataLoader<D> loader_;
  Device device_;
  bool gpu_eltype_;
  // The stager, with its pinned buffers and copy stream, is kept from one
  // epoch to the next (shared by copies of this loader; an epoch that
  // starts while another is still running gets a stager of its own).
  std::shared_ptr<detail::StagerCache> stagers_ = std::make_shared<detail::StagerCache>(kPrefetchDepth + 2);
};

template <class D>
std::ostream& operator<<(std::ostream& os, const DeviceLoader<D>& l) {
  return os << l.loader() << " on " << l.device();
}

// `loader | dev`, gpu(loader), cpu(loader): see movement.hpp.
template <class D>
DeviceLoader<D> move_to(const DataLoader<D>& l, Device d, bool gpu_eltype) {
  return DeviceLoader<D>(l, d, gpu_eltype);
}
template <class D>
DeviceLoader<D> move_to(const DeviceLoader<D>& l, Device d, bool gpu_eltype) {
  return DeviceLoader<D>(l.loader(), d, gpu_eltype);
}

}  // namespace flx

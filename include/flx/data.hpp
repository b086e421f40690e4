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
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
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

#include "flx/movement.hpp"
#include "flx/tensor.hpp"

namespace flx {

struct DataLoaderOptions {
  int64_t batchsize = 1;
  bool shuffle = false;
  bool partial = true;          // keep the short last batch
  std::optional<uint64_t> seed;  // default: drawn from set_seed's generator
};

// ---- data containers: numobs and getobs (MLUtils' names) ------------------
// A tensor holds numobs = size of its last dim observations.
int64_t numobs(const Tensor& x);
// Observations [start, stop): a zero-copy view.
Tensor getobs(const Tensor& x, int64_t start, int64_t stop);
// Observations idx (0-based): a gathered copy on x's device.
Tensor getobs(const Tensor& x, std::span<const int64_t> idx);

namespace detail {
[[noreturn]] void throw_obs_mismatch(const std::vector<std::pair<int64_t, std::string>>& counts);
void collect_obs(const Tensor& x, std::vector<std::pair<int64_t, std::string>>& out);
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
template <class... T>
std::tuple<T...> getobs(const std::tuple<T...>& d, std::span<const int64_t> idx) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{getobs(x, idx)...}; }, d);
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
  return d.f(getobs(d.data, idx));
}

namespace detail {
// numobs(d) for any data, found by argument-dependent lookup too (data
// types of other namespaces, e.g. distributed::DistributedDataContainer).
template <class D>
int64_t numobs_of(const D& d) {
  return numobs(d);
}
}  // namespace detail

namespace detail {

// Which observations an epoch's batches hold.
struct EpochPlan {
  int64_t n = 0, batchsize = 1, nbatches = 0;
  std::vector<int64_t> perm;  // empty: in order
  std::pair<int64_t, int64_t> range(int64_t k) const {
    int64_t a = k * batchsize;
    return {a, std::min(n, a + batchsize)};
  }
};
void check_options(const DataLoaderOptions& o);
int64_t batches_per_epoch(int64_t n, const DataLoaderOptions& o);
EpochPlan plan_epoch(int64_t n, const DataLoaderOptions& o, uint64_t seed, uint64_t epoch);
uint64_t draw_seed();

// Whether every tensor of the data is in host memory (then a background
// thread can gather batches without touching a device).
bool on_host(const Tensor& x);
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
    if (p.perm.empty()) return getobs(data_, a, b);
    return getobs(data_, std::span<const int64_t>(p.perm).subspan(size_t(a), size_t(b - a)));
  }

  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const DataLoader* l, std::shared_ptr<const detail::EpochPlan> p) : loader_(l), plan_(std::move(p)) {}
    Batch operator*() const {
      if (!cur_) cur_ = loader_->batch(*plan_, k_);
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
    int64_t k_ = 0;
    mutable std::optional<Batch> cur_;
  };
  iterator begin() const { return iterator(this, std::make_shared<const detail::EpochPlan>(next_epoch())); }
  std::default_sentinel_t end() const { return {}; }

 private:
  D data_;
  DataLoaderOptions opts_;
  int64_t n_ = 0;
  uint64_t seed_ = 0;
  std::shared_ptr<std::atomic<uint64_t>> epoch_;  // shared by copies: one sequence of shuffles
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
class Stager {
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
class StagerCache {
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
    auto produce = [loader = loader_, plan, stager](int64_t k) {
      size_t slot = 0;
      stager->start(k);
      Batch b = fmap([&](const Tensor& t) { return stager->move(t, k, slot++); }, loader.batch(*plan, k));
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

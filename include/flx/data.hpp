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
// The data it reads, and MLUtils' numobs, getobs, mapobs, splitobs,
// shuffleobs and kfolds: flx/data_containers.hpp. The loader's options
// .collate (how observations become a batch), .parallel (batches prepared on
// several threads, the same batches as a serial loader) and .buffer (reuse a
// gathered batch's memory once it is no longer held).
#pragma once

#include "flx/export.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flx/data_containers.hpp"
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



// The loader's threads, written once for every batch type
// (src/data/loader_threads.cpp, src/data/stager.cpp): a batch is a
// std::shared_ptr<void> to it there, made by a MakeBatch.
using MakeBatch = std::function<std::shared_ptr<void>(int64_t)>;

// .parallel's workers: make(0), make(1), ... on `threads` threads, up to
// 2 × threads batches ahead of the consumer, handed out in order: get(k) is
// make(k) (or rethrows its error), whichever thread made it. Workers claim
// batches in order and stop after an error, so the batches before a failing
// one all arrive, as from a serial loop. k never decreases from one get to
// the next (skipped batches are dropped).
class FLX_API OrderedBatches {
 public:
  OrderedBatches(int64_t nbatches, MakeBatch make, int threads);
  ~OrderedBatches();
  OrderedBatches(const OrderedBatches&) = delete;
  OrderedBatches& operator=(const OrderedBatches&) = delete;
  std::shared_ptr<void> get(int64_t k);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
template <class Batch>
class ParallelBatcher {
 public:
  ParallelBatcher(int64_t nbatches, std::function<Batch(int64_t)> make, int threads)
      : core_(
            nbatches,
            [make = std::move(make)](int64_t k) { return std::shared_ptr<void>(std::make_shared<Batch>(make(k))); },
            threads) {}
  Batch get(int64_t k) { return std::move(*static_cast<Batch*>(core_.get(k).get())); }

 private:
  OrderedBatches core_;
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

}  // namespace flx

// `loader | device`: DeviceLoader.
#include "flx/data_device.hpp"

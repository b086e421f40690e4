// `loader | dev` (gpu(loader), cpu(loader)): a DataLoader whose batches
// arrive on a device, made on a background thread while the previous batch
// computes and copied through pinned staging memory (src/data/stager.cpp).
// Included by flx/data.hpp.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "flx/data.hpp"

namespace flx {

namespace detail {

// What `loader | device` keeps from one epoch to the next: the pinned
// staging buffers and copy stream that move batches to `target` (an epoch
// that starts while another still runs gets its own).
class FLX_API DeviceStaging {
 public:
  DeviceStaging(Device target, bool gpu_eltype);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

 private:
  friend class DeviceBatches;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// One epoch of `loader | device`: host batches from host(k), made on a
// background thread when `async` (host data), a couple of batches ahead of
// the consumer, each moved by move(batch, to_device) (to_device takes one
// tensor of the batch to the target, through the staging ring); next()
// gives them in order, ready for the calling thread's stream (leaves(batch)
// lists their tensors), null at the end. Leaving early stops the thread.
class FLX_API DeviceBatches {
 public:
  using Move = std::function<std::shared_ptr<void>(const std::shared_ptr<void>& batch,
                                                   const std::function<Tensor(const Tensor&)>& to_device)>;
  using Leaves = std::function<std::vector<Tensor>(const std::shared_ptr<void>& batch)>;
  DeviceBatches(DeviceStaging& staging, int64_t nbatches, MakeBatch host, Move move, Leaves leaves, bool async);
  ~DeviceBatches();
  DeviceBatches(const DeviceBatches&) = delete;
  DeviceBatches& operator=(const DeviceBatches&) = delete;
  std::shared_ptr<void> next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
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
      : loader_(std::move(loader)),
        device_(d),
        gpu_eltype_(gpu_eltype),
        staging_(std::make_shared<detail::DeviceStaging>(d, gpu_eltype)) {}

  int64_t size() const { return loader_.size(); }
  Device device() const { return device_; }
  const DataLoader<D>& loader() const { return loader_; }

  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(std::shared_ptr<detail::DeviceBatches> b) : batches_(std::move(b)) { advance(); }
    const Batch& operator*() const { return *cur_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !cur_.has_value(); }

   private:
    void advance() {
      std::shared_ptr<void> b = batches_->next();
      if (b) cur_ = std::move(*static_cast<Batch*>(b.get()));
      else cur_.reset();
    }
    std::shared_ptr<detail::DeviceBatches> batches_;
    std::optional<Batch> cur_;
  };

  iterator begin() const {
    auto plan = std::make_shared<const detail::EpochPlan>(loader_.next_epoch());
    const bool async = detail::on_host(loader_.data());
    auto par = async ? loader_.parallel_batcher(plan) : nullptr;
    auto host = [loader = loader_, plan, par](int64_t k) -> std::shared_ptr<void> {
      return std::make_shared<Batch>(par ? par->get(k) : loader.batch(*plan, k));
    };
    auto move = [](const std::shared_ptr<void>& b, const std::function<Tensor(const Tensor&)>& to_device) {
      return std::shared_ptr<void>(std::make_shared<Batch>(fmap(to_device, *static_cast<const Batch*>(b.get()))));
    };
    auto leaves_of = [](const std::shared_ptr<void>& b) { return leaves(*static_cast<const Batch*>(b.get())); };
    return iterator(std::make_shared<detail::DeviceBatches>(*staging_, plan->nbatches, std::move(host), std::move(move),
                                                            std::move(leaves_of), async));
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  DataLoader<D> loader_;
  Device device_;
  bool gpu_eltype_;
  // The staging (pinned buffers and a copy stream) is kept from one epoch
  // to the next, shared by copies of this loader.
  std::shared_ptr<detail::DeviceStaging> staging_;
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

// The DataLoader's threads, written once for every batch type (a batch is a
// std::shared_ptr<void> here; the templates of flx/data.hpp wrap and unwrap
// it): OrderedBatches, the workers of .parallel, and PrefetchQueue, the
// background thread of `loader | device`.
#include "data/loader_threads.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace flx::detail {

// ---- OrderedBatches ------------------------------------------------------------

struct OrderedBatches::Impl {
  struct Slot {
    std::shared_ptr<void> batch;
    std::exception_ptr error;
  };
  int64_t n = 0;
  MakeBatch make;
  size_t window = 1;
  std::vector<Slot> slots;
  int64_t claimed = 0, consumed = 0;
  bool stop = false, failed = false;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread> workers;

  // Claims batches in order (at most `window` ahead of the consumer) until
  // told to stop, every batch is claimed, or one failed.
  void run() {
    for (;;) {
      int64_t k;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || failed || claimed >= n || claimed < consumed + int64_t(window); });
        if (stop || failed || claimed >= n) return;
        k = claimed++;
      }
      std::shared_ptr<void> b;
      std::exception_ptr err;
      try {
        b = make(k);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lock(mu);
      Slot& s = slots[size_t(k) % window];
      if (err) {
        s.error = err;
        failed = true;
      } else {
        s.batch = std::move(b);
      }
      cv.notify_all();
    }
  }
};

OrderedBatches::OrderedBatches(int64_t nbatches, MakeBatch make, int threads) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.n = nbatches;
  m.make = std::move(make);
  const int64_t t = std::max<int64_t>(1, std::min<int64_t>(threads, m.n));
  m.window = size_t(2 * t);
  m.slots.resize(m.window);
  for (int64_t i = 0; i < t; ++i) m.workers.emplace_back([&m] { m.run(); });
}

OrderedBatches::~OrderedBatches() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  for (auto& w : impl_->workers) w.join();
}

std::shared_ptr<void> OrderedBatches::get(int64_t k) {
  Impl& m = *impl_;
  std::unique_lock lock(m.mu);
  for (;;) {
    Impl::Slot& s = m.slots[size_t(m.consumed) % m.window];
    m.cv.wait(lock, [&] { return s.batch || s.error; });
    if (s.error) std::rethrow_exception(s.error);  // batch `consumed` failed: k, or one the caller skips to k past
    std::shared_ptr<void> b = std::move(s.batch);
    s.batch.reset();
    const bool wanted = m.consumed == k;
    ++m.consumed;
    m.cv.notify_all();
    if (wanted) return b;
  }
}

// ---- PrefetchQueue -----------------------------------------------------------------

PrefetchQueue::PrefetchQueue(int64_t nbatches, MakeBatch produce, bool async, size_t depth)
    : n_(nbatches), produce_(std::move(produce)), depth_(depth) {
  if (async && n_ > 0) thread_ = std::thread([this] { run(); });
}

PrefetchQueue::~PrefetchQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<void> PrefetchQueue::next() {
  if (consumed_ >= n_) return nullptr;
  if (!thread_.joinable()) return produce_(consumed_++);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  std::shared_ptr<void> b = std::move(queue_.front());
  queue_.pop_front();
  ++consumed_;
  cv_.notify_all();
  return b;
}

void PrefetchQueue::run() {
  try {
    for (int64_t k = 0; k < n_; ++k) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
        if (stop_) return;
      }
      std::shared_ptr<void> b = produce_(k);
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

}  // namespace flx::detail

// The DataLoader's background thread for `loader | device` (the one thread
// that produces batches ahead of the consumer), without the batch type: a
// batch is a std::shared_ptr<void> to it. Internal to src/data (the
// workers of .parallel, OrderedBatches, are declared in flx/data.hpp, whose
// templates hold them).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "flx/data.hpp"

namespace flx::detail {

// Runs produce(0), produce(1), ... on a background thread, `depth` batches
// ahead of the consumer (or inline when not async). Errors in the producer
// are rethrown to the consumer by next(); leaving early (destroying it)
// stops the thread.
class PrefetchQueue {
 public:
  PrefetchQueue(int64_t nbatches, MakeBatch produce, bool async, size_t depth);
  ~PrefetchQueue();
  PrefetchQueue(const PrefetchQueue&) = delete;
  PrefetchQueue& operator=(const PrefetchQueue&) = delete;

  // The next batch, or null at the end of the epoch.
  std::shared_ptr<void> next();

 private:
  void run();

  int64_t n_, consumed_ = 0;
  MakeBatch produce_;
  size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<void>> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace flx::detail

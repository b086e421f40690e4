// The current stream of each device, per thread, and a scoped guard that
// sets it (as c10::cuda::CUDAStreamGuard does). The dispatch layer puts
// every call on the current stream; the NULL stream, the default, is the
// device's default stream. Not installed.
#pragma once

#include <atomic>

#include "flx/backend.h"
#include "flx/device.hpp"

namespace flx::detail {

namespace streams_detail {
// Guards alive in the process, on any thread. While there are none (most of
// the time: the loader's copy thread makes one per batch) every current
// stream is the default one and the lookup skips the thread-local table,
// whose access from a shared library costs a __tls_get_addr call.
extern std::atomic<int> guards;
flx_stream guarded_stream(BackendId id, int dev) noexcept;
}  // namespace streams_detail

inline flx_stream current_stream(BackendId id, int dev) noexcept {
  if (streams_detail::guards.load(std::memory_order_relaxed) == 0) [[likely]]
    return nullptr;
  return streams_detail::guarded_stream(id, dev);
}

// Makes `s` the current stream of (id, dev) on this thread for the guard's
// lifetime, then restores the previous one.
class StreamGuard {
 public:
  StreamGuard(BackendId id, int dev, flx_stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  BackendId id_;
  int dev_;
  flx_stream prev_;
};

}  // namespace flx::detail

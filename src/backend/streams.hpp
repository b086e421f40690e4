// The current stream of each device, per thread, and a scoped guard that
// sets it (as c10::cuda::CUDAStreamGuard does). The dispatch layer puts
// every call on the current stream; the NULL stream, the default, is the
// device's default stream. Not installed.
#pragma once

#include "flx/backend.h"
#include "flx/device.hpp"

namespace flx::detail {

flx_stream current_stream(BackendId id, int dev) noexcept;

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

// Current streams: a small per-thread table indexed by backend and ordinal.
#include "streams.hpp"

#include <array>
#include <atomic>

#include "flx/error.hpp"

namespace flx::detail {
namespace {
constexpr int kMaxOrdinals = 64;
thread_local std::array<std::array<flx_stream, kMaxOrdinals>, backend_id_count> t_current{};
}  // namespace

std::atomic<int> streams_detail::guards{0};

flx_stream streams_detail::guarded_stream(BackendId id, int dev) noexcept {
  return dev >= 0 && dev < kMaxOrdinals ? t_current[size_t(id)][size_t(dev)] : nullptr;
}

StreamGuard::StreamGuard(BackendId id, int dev, flx_stream s) : id_(id), dev_(dev) {
  FLX_CHECK(dev >= 0 && dev < kMaxOrdinals, ArgumentError, "StreamGuard: device ordinal ", dev,
            " is outside 0..", kMaxOrdinals - 1);
  prev_ = t_current[size_t(id)][size_t(dev)];
  t_current[size_t(id)][size_t(dev)] = s;
  streams_detail::guards.fetch_add(1, std::memory_order_relaxed);  // a guard is seen by its own thread at once
}
StreamGuard::~StreamGuard() {
  t_current[size_t(id_)][size_t(dev_)] = prev_;
  streams_detail::guards.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace flx::detail

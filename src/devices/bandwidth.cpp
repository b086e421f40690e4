// measure_bandwidth / measure_peer_bandwidth: copy rates between the host
// and a device, and between devices, timed on the host around copies that
// end in a synchronisation (so each time covers the whole transfer).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "../tensor_impl.hpp"
#include "flx/devices.hpp"
#include "flx/error.hpp"

namespace flx {

namespace {

using Clock = std::chrono::steady_clock;

// GB/s of `bytes` moved by `copy` (which must wait for the transfer to end):
// one untimed warm-up, then the median of `repeats` timed runs.
double rate(size_t bytes, int repeats, const std::function<void()>& copy) {
  copy();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    copy();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + repeats / 2, seconds.end());
  const double s = seconds[size_t(repeats / 2)];
  return s > 0 ? double(bytes) / s / 1e9 : 0.0;
}

void check_args(const char* what, size_t bytes, int repeats) {
  FLX_CHECK(bytes >= 1 && repeats >= 1, ArgumentError, what, ": needs at least 1 byte and 1 repeat; got bytes=",
            bytes, ", repeats=", repeats);
}

}  // namespace

Bandwidth measure_bandwidth(const Device& d, size_t bytes, int repeats) {
  check_args("measure_bandwidth", bytes, repeats);
  const detail::Backend& be = detail::backend_of(d);
  const int dev = d.ordinal();
  Tensor a = empty(UInt8, {int64_t(bytes)}, d), b = empty(UInt8, {int64_t(bytes)}, d);
  // Touched once, so that no first-use cost (page faults, lazy allocation)
  // lands in a timed run.
  std::vector<unsigned char> pageable(bytes, 1);
  Bandwidth r;
  r.bytes = bytes;
  r.repeats = repeats;
  // Copies from and to pinned memory may return before they end
  // (asynchronous on the stream): each timed copy waits for the stream.
  r.h2d_pageable = rate(bytes, repeats, [&] {
    be.copy_h2d(dev, detail::mem(a), pageable.data(), bytes);
    be.synchronize(dev);
  });
  r.d2h_pageable = rate(bytes, repeats, [&] {
    be.copy_d2h(dev, pageable.data(), detail::mem(a), bytes);
    be.synchronize(dev);
  });
  r.d2d = rate(bytes, repeats, [&] {
    be.copy_d2d(dev, detail::mem(b), detail::mem(a), bytes);
    be.synchronize(dev);
  });
  void* pinned = nullptr;
  try {
    pinned = be.host_alloc(bytes);
  } catch (const BackendError&) {  // no pinned memory on this backend: those rates stay 0
  }
  if (pinned) {
    std::unique_ptr<void, std::function<void(void*)>> hold(pinned, [&](void* p) { be.host_free(p); });
    std::memset(pinned, 1, bytes);
    r.h2d_pinned = rate(bytes, repeats, [&] {
      be.copy_h2d(dev, detail::mem(a), pinned, bytes);
      be.synchronize(dev);
    });
    r.d2h_pinned = rate(bytes, repeats, [&] {
      be.copy_d2h(dev, pinned, detail::mem(a), bytes);
      be.synchronize(dev);
    });
  }
  return r;
}

double measure_peer_bandwidth(const Device& from, const Device& to, size_t bytes, int repeats) {
  check_args("measure_peer_bandwidth", bytes, repeats);
  FLX_CHECK(from.backend_id() == to.backend_id() && from != to, ArgumentError,
            "measure_peer_bandwidth: expected two devices of one backend; got ", from.str(), " and ", to.str());
  Tensor a = zeros(UInt8, {int64_t(bytes)}).to(from);
  return rate(bytes, repeats, [&] {
    Tensor b = a.to(to);
    synchronize(to);
  });
}

}  // namespace flx

// A cache of a backend's pinned host blocks, as PyTorch's CachingHostAllocator:
// pinning memory (cudaHostAlloc) costs far more than copying through it (about
// 10 ms for 25 MB on an H100's host), so a block freed by a DataLoader's
// stager, a communicator or a bandwidth probe is kept and handed to the next
// request of its size class instead of going back to the driver.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace flx::detail {

class PinnedPool {
 public:
  using Alloc = std::function<void*(size_t)>;  // throws when it cannot
  using Free = std::function<void(void*)>;

  // Cached free blocks beyond this many bytes go back to the backend.
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;

  // A block of at least `bytes` (a cached one of its class when there is one;
  // after a failed allocation, the cache is released and it tries once more).
  void* take(size_t bytes, const Alloc& alloc, const Free& release);
  // Back into the cache (or to the backend, past kMaxCachedBytes); p must
  // come from take.
  void give(void* p, const Free& release) noexcept;
  size_t cached_bytes() const;

  // The size class of a request: powers of two up to 1 MiB, then whole MiB.
  static size_t size_class(size_t bytes);

 private:
  void release_cache(const Free& release) noexcept;  // with mu_ held
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> class_of_;  // every block handed out or cached
  std::multimap<size_t, void*> cached_;         // free blocks by class
  size_t cached_bytes_ = 0;
};

}  // namespace flx::detail

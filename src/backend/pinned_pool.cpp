#include "pinned_pool.hpp"

namespace flx::detail {

size_t PinnedPool::size_class(size_t bytes) {
  constexpr size_t MiB = size_t(1) << 20;
  if (bytes >= MiB) return (bytes + MiB - 1) / MiB * MiB;
  size_t c = 256;
  while (c < bytes) c *= 2;
  return c;
}

void* PinnedPool::take(size_t bytes, const Alloc& alloc, const Free& release) {
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  if (auto it = cached_.find(cls); it != cached_.end()) {
    void* p = it->second;
    cached_.erase(it);
    cached_bytes_ -= cls;
    return p;
  }
  void* p = nullptr;
  try {
    p = alloc(cls);
  } catch (...) {
    if (cached_.empty()) throw;
    release_cache(release);  // other classes' blocks may be what is missing
    p = alloc(cls);
  }
  try {
    class_of_.emplace(p, cls);
  } catch (...) {
    release(p);
    throw;
  }
  return p;
}

void PinnedPool::give(void* p, const Free& release) noexcept {
  if (!p) return;
  std::lock_guard lock(mu_);
  const auto it = class_of_.find(p);
  if (it == class_of_.end()) return release(p);  // not ours: cannot happen through Backend
  const size_t cls = it->second;
  if (cached_bytes_ + cls > kMaxCachedBytes) {
    class_of_.erase(it);
    return release(p);
  }
  try {
    cached_.emplace(cls, p);
    cached_bytes_ += cls;
  } catch (...) {
    class_of_.erase(it);
    release(p);
  }
}

size_t PinnedPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_bytes_;
}

void PinnedPool::release_cache(const Free& release) noexcept {
  for (auto& [cls, p] : cached_) {
    class_of_.erase(p);
    release(p);
  }
  cached_.clear();
  cached_bytes_ = 0;
}

}  // namespace flx::detail

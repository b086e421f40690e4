// Host-only: the table of live allocations (see cuda_allocations.hpp).
#include "cuda_allocations.hpp"

#include <cstdio>

namespace flx_cuda {

void AllocationTable::add(const void* base, int dev, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[base] = Entry{dev, bytes};
}

bool AllocationTable::remove(const void* base) {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.erase(base) > 0;
}

std::string AllocationTable::check(const void* base, uint64_t offset, size_t bytes, int dev, const char* what) const {
  if (!base) return std::string(what) + ": NULL buffer";
  Entry e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(base);
    if (it == live_.end()) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", base);
      return std::string(what) + ": the buffer " + addr +
             " is not a live allocation of the CUDA backend (freed already, or allocated by another backend)";
    }
    e = it->second;
  }
  if (e.dev != dev)
    return std::string(what) + ": the buffer belongs to CUDA device " + std::to_string(e.dev) + ", not device " +
           std::to_string(dev);
  if (offset > e.bytes || bytes > e.bytes - offset)
    return std::string(what) + ": " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
           " run past the buffer's " + std::to_string(e.bytes) + " bytes";
  return {};
}

size_t AllocationTable::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

AllocationTable& allocations() {
  static AllocationTable& t = *new AllocationTable;  // never destroyed (see the header)
  return t;
}

}  // namespace flx_cuda

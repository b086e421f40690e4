// The size and device of every live allocation of the CUDA plugin, so that
// copies and fills past a buffer's end are refused with the message the
// other backends give, instead of being left to the driver: allocations
// from the memory pool (cudaMallocAsync) lie inside larger mapped
// segments, where the driver accepts an access past their end (and
// compute-sanitizer's memcheck reports it). No CUDA header: tested on the
// host by tests/cuda/test_cuda_allocations.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace flx_cuda {

class AllocationTable {
 public:
  void add(const void* base, int dev, size_t bytes);
  // Forgets `base`; false when it was not a live allocation.
  bool remove(const void* base);
  // Empty when the `bytes` bytes at `offset` into allocation `base` lie
  // within it and it belongs to device `dev`; otherwise why not, as
  // "<what>: ..." (a null buffer, one that is not a live allocation, one of
  // another device, or "N bytes at offset O run past the buffer's S bytes").
  std::string check(const void* base, uint64_t offset, size_t bytes, int dev, const char* what) const;
  size_t live() const;

 private:
  struct Entry {
    int dev;
    size_t bytes;
  };
  mutable std::mutex mu_;
  std::unordered_map<const void*, Entry> live_;
};

// The plugin's table, never destroyed: buffers may be freed during process
// exit, after the plugin's other statics are gone.
AllocationTable& allocations();

}  // namespace flx_cuda

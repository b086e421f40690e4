// Which device's context pinned host memory (host_alloc) is allocated in.
// The ABI's host_alloc names no device, and the CUDA runtime allocates in
// the calling thread's current device, device 0 on a thread that has set
// none (a DataLoader's prefetch thread): that would create a context on
// device 0, some 500 MB of its memory, in a process that uses another GPU.
// So: the first device already set up, else device 0; the memory is
// allocated portable, pinned for every device's copies. No CUDA header:
// tested on the host by tests/cuda/test_cuda_host_memory.cpp.
#pragma once

#include <vector>

namespace flx_cuda {

// The device host_alloc uses; ready[d]: device d has been set up (it has a
// context already).
inline int first_ready_device(const std::vector<bool>& ready) {
  for (size_t d = 0; d < ready.size(); ++d)
    if (ready[d]) return int(d);
  return 0;
}

}  // namespace flx_cuda

// Per-device state of the CUDA backend, created on first use of a device.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

#include "flx/backend.h"

namespace flx_cuda {

struct DeviceState {
  std::atomic<bool> ready{false};
  cudaStream_t stream = nullptr;  // the ABI's NULL stream for this device
  cudaMemPool_t pool = nullptr;   // the device's default pool (cudaMallocAsync)
  int sm_count = 0;               // multiprocessors, for the kernels' grid size
};

// The state of `dev` in *out, made current on this thread (cudaSetDevice)
// and set up on first use; an flx_status with last_error() set when dev
// does not exist or cannot be set up.
int device_state(int dev, const char* what, DeviceState** out);

// The device pinned host memory is allocated with (cuda_host_memory.hpp):
// the first device set up so far, else 0.
int host_memory_device();

// The pool's figures (minor 2 of the core table).
int memory_info(void*, int dev, flx_memory_info* out);

}  // namespace flx_cuda

// A thread's handles of a CUDA library (cuBLAS, cuDNN), one per (device,
// stream), each bound to its stream once (cuda_stream_handles.hpp says why).
// They are destroyed through api->destroy when the thread ends (the
// libraries' destroy calls synchronise the device), each with its device
// current; when the CUDA runtime is already being torn down (a thread
// ending during process exit) they are left to the driver, which frees
// everything at exit anyway.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda_stream_handles.hpp"

namespace flx_cuda {

template <class Api, class Handle>
struct ThreadHandles {
  const Api* api = nullptr;  // set with the first handle
  StreamHandles<Handle> hs;
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    int prev = 0;
    if (!api || hs.size() == 0 || cudaGetDevice(&prev) != cudaSuccess) {  // cudaErrorCudartUnloading at exit
      (void)cudaGetLastError();
      return;
    }
    bool runtime_gone = false;
    hs.destroy_all([&](int dev, Handle h) {
      if (runtime_gone || cudaSetDevice(dev) != cudaSuccess) {
        runtime_gone = true;
        return;
      }
      (void)api->destroy(h);
    });
    (void)cudaSetDevice(prev);
    (void)cudaGetLastError();
  }
};

}  // namespace flx_cuda

// A thread's cuBLAS handles, one per (device, stream). cuBLAS runs a GEMM
// in its handle's workspace, and cublasSetStream resets that workspace to
// the handle's default one: one handle moved between two streams would let
// a GEMM queued on the second use the workspace while the first stream's
// GEMM still runs in it. So a handle is bound to one stream when it is made
// and never moved (stream_destroy waits for the stream, so that a new
// stream created at the same address cannot overlap the old one's work).
// No CUDA header: a template over the handle type, tested on the host by
// tests/cuda/test_cuda_stream_handles.cpp.
#pragma once

#include <vector>

namespace flx_cuda {

template <class Handle>
class StreamHandles {
 public:
  // The handle of (dev, stream) in *out, made by make(&h) (an flx_status)
  // on first use; make's failure is returned and nothing is kept.
  template <class Make>
  int get(int dev, const void* stream, Make&& make, Handle* out) {
    for (const Entry& e : entries_)
      if (e.dev == dev && e.stream == stream) {
        *out = e.handle;
        return 0;
      }
    Handle h{};
    if (int st = make(&h)) return st;
    entries_.push_back({dev, stream, h});
    *out = h;
    return 0;
  }
  // destroy(dev, handle) for each handle, then none are left.
  template <class Destroy>
  void destroy_all(Destroy&& destroy) {
    for (const Entry& e : entries_) destroy(e.dev, e.handle);
    entries_.clear();
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    int dev;
    const void* stream;
    Handle handle;
  };
  std::vector<Entry> entries_;  // a few: the default stream and the streams a thread runs GEMMs on
};

}  // namespace flx_cuda

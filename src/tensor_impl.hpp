// Internals behind Tensor: device storage and the tensor record. Not
// installed.
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "flx/backend.h"
#include "flx/tensor.hpp"

namespace flx::autograd {
struct Node;
}

namespace flx::detail {

// Device memory owned by tensors; freed when the last tensor using it goes.
struct Storage {
  const Backend* be;
  int dev;
  flx_buffer buf;
  size_t nbytes;
  // The stream the memory belongs to (allocated on, at first): it is freed
  // after the work queued there (Backend::free_used_on). Code that allocates
  // under a StreamGuard hands the memory to the consumer's stream once that
  // stream is ordered after its work (Stager::ready), before the guarded
  // stream may be destroyed.
  flx_stream stream;
  Storage(const Backend* b, int d, size_t n);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  uint64_t offset = 0;  // bytes into storage
  Shape shape;
  DType dtype = DType::Float32;
  Device device;
  std::shared_ptr<autograd::Node> node;  // set inside gradient() only
};

inline TensorImpl& impl(const Tensor& t) { return *t.impl(); }
inline flx_mem mem(const Tensor& t) {
  auto& i = *t.impl();
  return {i.storage->buf, i.offset};
}
inline const Backend& be(const Tensor& t) { return *t.impl()->storage->be; }
inline int dev(const Tensor& t) { return t.impl()->device.ordinal(); }

// A new tensor record over `storage`, sharing it (views, reshapes).
Tensor share(const Tensor& t, const Shape& shape, uint64_t offset_bytes);

// numel × element size, overflow-checked: ArgumentError naming the shape
// when the byte count does not fit (never a wrapped, too small allocation).
size_t checked_nbytes(const Shape& s, DType t);

// Host pointer to the data when the device is host-addressable, else null.
void* host_data(const Tensor& t);

}  // namespace flx::detail

// The copy half of `loader | device`: host batch tensors go to the device
// through pinned staging buffers on a copy stream of their own, so the copy
// does not queue behind the compute stream's kernels.
#include <cstring>

#include "../tensor_impl.hpp"
#include "backend/streams.hpp"
#include "flx/data.hpp"

namespace flx::detail {

struct Stager::Impl {
  Device target;
  bool gpu_eltype;
  const Backend* be = nullptr;  // null when the target is the CPU
  flx_stream stream = nullptr;
  flx_event event = nullptr;
  struct Slot {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Slot> slots;
  bool pinned_ok = true;  // false once the backend declined to pin memory

  void* staging(size_t slot, size_t bytes) {
    if (!pinned_ok) return nullptr;
    if (slots.size() <= slot) slots.resize(slot + 1);
    Slot& s = slots[slot];
    if (s.bytes < bytes) {
      be->host_free(s.ptr);
      s = {};
      void* p = nullptr;
      try {
        p = be->host_alloc(bytes);
      } catch (const BackendError&) {  // no pinned memory (none left, or none at all): plain copies
        pinned_ok = false;
        return nullptr;
      }
      s = {p, bytes};
    }
    return s.ptr;
  }
};

Stager::Stager(Device target, bool gpu_eltype) : impl_(std::make_unique<Impl>()) {
  impl_->target = target;
  impl_->gpu_eltype = gpu_eltype;
  if (target.is_cpu()) return;
  impl_->be = &backend_of(target);
  impl_->stream = impl_->be->stream_create(target.ordinal());
  impl_->event = impl_->be->event_create(target.ordinal());
}

Stager::~Stager() {
  auto& m = *impl_;
  if (!m.be) return;
  for (auto& s : m.slots) m.be->host_free(s.ptr);
  if (m.event) m.be->event_destroy(m.target.ordinal(), m.event);
  if (m.stream) m.be->stream_destroy(m.target.ordinal(), m.stream);
}

Tensor Stager::move(const Tensor& t0, size_t slot) {
  auto& m = *impl_;
  Tensor t = m.gpu_eltype && t0.dtype() == DType::Float64 ? t0.to(DType::Float32) : t0;
  if (t.device() == m.target) return t;
  const void* src = host_data(t);
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
  void* pinned = src && bytes ? m.staging(slot, bytes) : nullptr;
  if (!pinned) return t.to(m.target);  // data on another device, or no pinned memory
  std::memcpy(pinned, src, bytes);
  const int dev = m.target.ordinal();
  // The batch is allocated and copied on the loader's copy stream.
  StreamGuard on_copy_stream(m.target.backend_id(), dev, m.stream);
  Tensor out = empty(t.dtype(), t.shape(), m.target);
  m.be->copy_h2d(dev, mem(out), pinned, bytes);
  m.be->event_record(dev, m.event);
  // Wait here, on the loader's thread: the staging buffer is free again and
  // the consumer's stream can use the batch without further ordering.
  m.be->event_synchronize(dev, m.event);
  // The copy is done, so the batch's memory belongs to the default stream
  // from here on (this copy stream goes with the loader; the batch may stay).
  impl(out).storage->stream = nullptr;
  return out;
}

}  // namespace flx::detail

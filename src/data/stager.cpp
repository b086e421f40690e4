// The copy half of `loader | device`: host batch tensors go to the device
// through pinned staging buffers on a copy stream of their own, so the copy
// does not queue behind the compute stream's kernels.
#include <cstring>

#include "../tensor_impl.hpp"
#include "flx/data.hpp"

namespace flx::detail {

struct Stager::Impl {
  Device target;
  bool gpu_eltype;
  const BackendRt* be = nullptr;  // null when the target is the CPU
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
      if (s.ptr) be->f->host_free(be->f->ctx, s.ptr);
      s = {};
      void* p = nullptr;
      if (be->f->host_alloc(be->f->ctx, bytes, &p) != FLX_OK || !p) {
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
  const auto* f = impl_->be->f;
  impl_->be->check(f->stream_create(f->ctx, target.ordinal(), &impl_->stream), "creating the loader's copy stream");
  impl_->be->check(f->event_create(f->ctx, target.ordinal(), &impl_->event), "creating the loader's copy event");
}

Stager::~Stager() {
  auto& m = *impl_;
  if (!m.be) return;
  const auto* f = m.be->f;
  for (auto& s : m.slots)
    if (s.ptr) f->host_free(f->ctx, s.ptr);
  if (m.event) f->event_destroy(f->ctx, m.target.ordinal(), m.event);
  if (m.stream) f->stream_destroy(f->ctx, m.target.ordinal(), m.stream);
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
  Tensor out = empty(t.dtype(), t.shape(), m.target);
  const auto* f = m.be->f;
  const int dev = m.target.ordinal();
  m.be->check(f->copy_h2d(f->ctx, dev, mem(out), pinned, bytes, m.stream), "copying a batch to the device");
  m.be->check(f->event_record(f->ctx, dev, m.event, m.stream), "recording the batch copy");
  // Wait here, on the loader's thread: the staging buffer is free again and
  // the consumer's stream can use the batch without further ordering.
  m.be->check(f->event_synchronize(f->ctx, dev, m.event), "waiting for the batch copy");
  return out;
}

}  // namespace flx::detail

// The internal interface of flx::distributed (distributed_interface.hpp):
// each call forwards to the libflx internals it names.
#include "internal/distributed_interface.hpp"

#include "autograd.hpp"
#include "backend/backend.hpp"
#include "backend/streams.hpp"
#include "devices/preferences.hpp"
#include "flx/backend_ops.h"
#include "ops/ops_internal.hpp"
#include "tensor_impl.hpp"

namespace flx::internal {

flx_mem mem(const Tensor& t) { return detail::mem(t); }
void* host_data(const Tensor& t) { return detail::host_data(t); }
size_t checked_nbytes(const Shape& s, DType t) { return detail::checked_nbytes(s, t); }
Tensor share(const Tensor& t, const Shape& shape, uint64_t offset_bytes) {
  return detail::share(t, shape, detail::mem(t).offset + offset_bytes);
}
void divide_in_place(const Tensor& x, double divisor) {
  ops::raw_map_into(x, FLX_OP_DIV, x.dtype(), {{&x}, {nullptr, divisor}});
}

BackendCalls::BackendCalls(const Device& d) : be_(&detail::backend_of(d)) {}
BackendCalls BackendCalls::of(const Tensor& t) { return BackendCalls(&detail::be(t)); }
std::string BackendCalls::abi_version() const { return be_->abi_version(); }
int BackendCalls::device_count() const { return be_->device_count(); }
void* BackendCalls::host_alloc(size_t bytes) const { return be_->host_alloc(bytes); }
void BackendCalls::host_free(void* p) const noexcept { be_->host_free(p); }
flx_stream BackendCalls::stream_create(int dev) const { return be_->stream_create(dev); }
void BackendCalls::stream_destroy(int dev, flx_stream s) const noexcept { be_->stream_destroy(dev, s); }
void BackendCalls::synchronize(int dev) const { be_->synchronize(dev); }
flx_event BackendCalls::event_create(int dev) const { return be_->event_create(dev); }
void BackendCalls::event_destroy(int dev, flx_event e) const noexcept { be_->event_destroy(dev, e); }
void BackendCalls::event_record(int dev, flx_event e) const { be_->event_record(dev, e); }
void BackendCalls::stream_wait_event(int dev, flx_event e) const { be_->stream_wait_event(dev, e); }
bool BackendCalls::event_query(int dev, flx_event e) const { return be_->event_query(dev, e); }
void BackendCalls::copy_h2d(int dev, flx_mem dst, const void* src, size_t bytes) const {
  be_->copy_h2d(dev, dst, src, bytes);
}
void BackendCalls::copy_d2h(int dev, void* dst, flx_mem src, size_t bytes) const { be_->copy_d2h(dev, dst, src, bytes); }
void BackendCalls::copy_d2d(int dev, flx_mem dst, flx_mem src, size_t bytes) const {
  be_->copy_d2d(dev, dst, src, bytes);
}
void BackendCalls::fill(int dev, flx_mem dst, DType t, size_t n, double value) const {
  be_->fill(dev, dst, t, n, value);
}
void BackendCalls::cast(int dev, flx_mem dst, DType dst_t, flx_mem src, DType src_t, size_t n) const {
  be_->cast(dev, dst, dst_t, src, src_t, n);
}
void* BackendCalls::device_address(int dev, flx_mem m) const { return be_->device_address(dev, m); }
bool BackendCalls::has_comm() const { return be_->has_comm(); }
flx_comm_id BackendCalls::comm_id() const { return be_->comm_id(); }
flx_comm BackendCalls::comm_init(int dev, int nranks, int rank, const flx_comm_id& id) const {
  return be_->comm_init(dev, nranks, rank, id);
}
bool BackendCalls::comm_poll(flx_comm c) const { return be_->comm_poll(c); }
void BackendCalls::collective(int dev, flx_comm c, const flx_collective_desc& d) const { be_->collective(dev, c, d); }
void BackendCalls::comm_abort(flx_comm c) const noexcept { be_->comm_abort(c); }
void BackendCalls::comm_destroy(flx_comm c) const noexcept { be_->comm_destroy(c); }

StreamScope::StreamScope(const Device& device, flx_stream s)
    : guard_(std::make_unique<detail::StreamGuard>(device.backend_id(), device.ordinal(), s)) {}
StreamScope::~StreamScope() = default;

void add_gradient_observer(const std::shared_ptr<GradientObserver>& o) { autograd::add_gradient_observer(o); }

RecordingPause::RecordingPause() : scope_(std::make_unique<autograd::PauseScope>()) {}
RecordingPause::~RecordingPause() = default;

std::optional<bool> preference_bool(const std::string& key, std::string* source) {
  return detail::preference_bool(key, source);
}

}  // namespace flx::internal

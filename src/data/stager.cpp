// `loader | device`'s batches (DeviceBatches, DeviceStaging in
// flx/data_device.hpp): made on a background thread (PrefetchQueue) and copied by a
// Stager: host batch tensors go to the device through a ring of pinned
// staging buffers on a copy stream of their own, so the copy overlaps the
// consumer's compute instead of queueing behind its kernels; an event per
// ring entry orders the consumer's stream after the copy and tells the
// producer when a staging buffer is free again.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "../tensor_impl.hpp"
#include "backend/streams.hpp"
#include "data/loader_threads.hpp"
#include "flx/data.hpp"
#include "flx/threads.hpp"

namespace flx::detail {

// Copies host tensors to a device through pinned staging memory on a copy
// stream of its own (a plain copy where the backend has no pinned memory),
// for the DataLoader's prefetch thread, while the consumer computes:
//   producer: start(k); move(t, k, 0), move(u, k, 1), ...; finish(k)
//   consumer: ready(k, tensors of batch k) before using batch k
// Batch k's staging buffers are ring entry k % ring (allocated once, reused
// when that entry's earlier copies are done); finish records an event on the
// copy stream that ready makes the consumer's stream wait for, so the copy
// overlaps the compute of earlier batches. `ring` must exceed how many
// batches the producer can run ahead of the consumer's ready() calls.
class Stager {
 public:
  Stager(Device target, bool gpu_eltype, size_t ring);
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;
  void start(int64_t k);
  // t on the target device; `slot` numbers the tensors of one batch.
  Tensor move(const Tensor& t, int64_t k, size_t slot);
  void finish(int64_t k);
  void ready(int64_t k, const std::vector<Tensor>& batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace {
// memcpy into the staging buffer, in up to 8 pieces of at least 4 MiB on
// threads of their own: one core copies at 5-10 GB/s, a PCIe 5 link takes
// 50, so a large batch's copy would otherwise bound the loader. (A copy: the
// split changes no bits.)
void copy_to_staging(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPiece = size_t(4) << 20;
  const size_t pieces = std::min<size_t>({bytes / kPiece, 8, size_t(std::max(1, num_threads()))});
  if (pieces < 2) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const size_t step = (bytes + pieces - 1) / pieces;
  auto piece = [&](size_t i) {
    const size_t lo = i * step, hi = std::min(bytes, lo + step);
    if (lo < hi) std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
  };
  std::vector<std::thread> helpers;
  helpers.reserve(pieces - 1);
  try {
    for (size_t i = 1; i < pieces; ++i) helpers.emplace_back(piece, i);
  } catch (const std::system_error&) {  // no threads to be had: this one copies the rest
    for (size_t i = helpers.size() + 1; i < pieces; ++i) piece(i);
  }
  piece(0);
  for (auto& t : helpers) t.join();
}
}  // namespace

struct Stager::Impl {
  Device target;
  bool gpu_eltype;
  const Backend* be = nullptr;  // null when the target is the CPU
  int dev = 0;
  flx_stream stream = nullptr;
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct Entry {
    flx_event copied = nullptr;  // recorded on the copy stream by finish()
    bool recorded = false;
    std::vector<Buffer> buffers;  // one per tensor of the batch
  };
  std::vector<Entry> ring;
  bool pinned_ok = true;  // false once the backend declined to pin memory

  Entry& entry(int64_t k) { return ring[size_t(k) % ring.size()]; }

  // The staging buffer for tensor `slot` of batch k, grown to `bytes`; null
  // without pinned memory.
  void* staging(int64_t k, size_t slot, size_t bytes) {
    if (!pinned_ok) return nullptr;
    auto& bufs = entry(k).buffers;
    if (bufs.size() <= slot) bufs.resize(slot + 1);
    Buffer& b = bufs[slot];
    if (b.bytes < bytes) {
      be->host_free(b.ptr);
      b = {};
      try {
        b = {be->host_alloc(bytes), bytes};
      } catch (const BackendError&) {  // no pinned memory (none left, or none at all): plain copies
        pinned_ok = false;
        return nullptr;
      }
    }
    return b.ptr;
  }
};

Stager::Stager(Device target, bool gpu_eltype, size_t ring) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.target = target;
  m.gpu_eltype = gpu_eltype;
  m.ring.resize(ring < 1 ? 1 : ring);
  if (target.is_cpu()) return;
  m.be = &backend_of(target);
  m.dev = target.ordinal();
  m.stream = m.be->stream_create(m.dev);
  for (auto& e : m.ring) e.copied = m.be->event_create(m.dev);
}

Stager::~Stager() {
  auto& m = *impl_;
  if (!m.be) return;
  for (auto& e : m.ring) {
    // A copy still queued reads the entry's staging buffers: let it end first.
    if (e.recorded) {
      try {
        m.be->event_synchronize(m.dev, e.copied);
      } catch (const Error&) {  // a failed device: nothing more to wait for
      }
    }
    for (auto& b : e.buffers) m.be->host_free(b.ptr);
    if (e.copied) m.be->event_destroy(m.dev, e.copied);
  }
  if (m.stream) m.be->stream_destroy(m.dev, m.stream);
}

void Stager::start(int64_t k) {
  auto& m = *impl_;
  Impl::Entry& e = m.entry(k);
  // The entry's buffers were last filled for batch k - ring: wait until
  // that copy has read them (usually long done).
  if (m.be && e.recorded) m.be->event_synchronize(m.dev, e.copied);
}

Tensor Stager::move(const Tensor& t0, int64_t k, size_t slot) {
  auto& m = *impl_;
  Tensor t = m.gpu_eltype && t0.dtype() == DType::Float64 ? t0.to(DType::Float32) : t0;
  if (t.device() == m.target) return t;
  const void* src = host_data(t);
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
  void* pinned = m.be && src && bytes ? m.staging(k, slot, bytes) : nullptr;
  if (!pinned) return t.to(m.target);  // data on another device, or no pinned memory
  copy_to_staging(pinned, src, bytes);
  // The batch is allocated and copied on the copy stream: its memory
  // belongs to that stream until ready() hands it to the consumer's.
  StreamGuard on_copy_stream(m.target.backend_id(), m.dev, m.stream);
  Tensor out = empty(t.dtype(), t.shape(), m.target);
  m.be->copy_h2d(m.dev, mem(out), pinned, bytes);
  return out;
}

void Stager::finish(int64_t k) {
  auto& m = *impl_;
  if (!m.be) return;
  Impl::Entry& e = m.entry(k);
  StreamGuard on_copy_stream(m.target.backend_id(), m.dev, m.stream);
  m.be->event_record(m.dev, e.copied);
  e.recorded = true;
}

void Stager::ready(int64_t k, const std::vector<Tensor>& batch) {
  auto& m = *impl_;
  if (!m.be) return;
  // This thread's stream waits for batch k's copy (not the host)...
  m.be->stream_wait_event(m.dev, m.entry(k).copied);
  // ...so its memory now follows that stream: freed there, after whatever
  // uses it, and independent of the copy stream, which goes with the stager
  // while the batch may stay.
  const flx_stream consumer = current_stream(m.target.backend_id(), m.dev);
  for (const Tensor& t : batch)
    if (t.defined() && t.device() == m.target && impl(t).storage->stream == m.stream)
      impl(t).storage->stream = consumer;
}

// ---- DeviceStaging and DeviceBatches ----------------------------------------------

namespace {
// Batches the prefetch thread may produce ahead of the consumer, and the
// staging ring that covers them (see Stager).
constexpr size_t kPrefetchDepth = 2;
constexpr size_t kRing = kPrefetchDepth + 2;
}  // namespace

// The stager kept from one epoch to the next: take() gives it when no
// running epoch holds it, else a new one (then kept).
struct DeviceStaging::Impl {
  Device target;
  bool gpu_eltype = false;
  std::mutex mu;
  std::shared_ptr<Stager> kept;
};

DeviceStaging::DeviceStaging(Device target, bool gpu_eltype) : impl_(std::make_unique<Impl>()) {
  impl_->target = target;
  impl_->gpu_eltype = gpu_eltype;
}
DeviceStaging::~DeviceStaging() = default;

struct DeviceBatches::Impl {
  std::shared_ptr<Stager> stager;  // declared first: destroyed after the queue's thread has stopped
  Move move;
  Leaves leaves;
  int64_t ready = 0;  // the batches handed to the consumer
  std::unique_ptr<PrefetchQueue> queue;
};

DeviceBatches::DeviceBatches(DeviceStaging& staging, int64_t nbatches, MakeBatch host, Move move, Leaves leaves,
                             bool async)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  {
    DeviceStaging::Impl& s = *staging.impl_;
    std::lock_guard lock(s.mu);
    if (!s.kept || s.kept.use_count() > 1) s.kept = std::make_shared<Stager>(s.target, s.gpu_eltype, kRing);
    m.stager = s.kept;
  }
  m.move = std::move(move);
  m.leaves = std::move(leaves);
  auto produce = [&m, host = std::move(host)](int64_t k) {
    std::shared_ptr<void> on_host = host(k);
    m.stager->start(k);
    size_t slot = 0;
    std::shared_ptr<void> moved = m.move(on_host, [&](const Tensor& t) { return m.stager->move(t, k, slot++); });
    m.stager->finish(k);
    return moved;
  };
  m.queue = std::make_unique<PrefetchQueue>(nbatches, std::move(produce), async, kPrefetchDepth);
}

DeviceBatches::~DeviceBatches() = default;

std::shared_ptr<void> DeviceBatches::next() {
  Impl& m = *impl_;
  std::shared_ptr<void> b = m.queue->next();
  if (b) m.stager->ready(m.ready++, m.leaves(b));  // this thread's stream waits for the batch's copy
  return b;
}

}  // namespace flx::detail

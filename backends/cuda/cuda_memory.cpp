// Stream-ordered device memory (the device's cudaMemPool through
// cudaMallocAsync/cudaFreeAsync), pinned host memory, streams, events and
// copies. Every call makes its device current first: the calling thread
// may have used another device last.
#include <cstdio>
#include <string>

#include "cuda_allocations.hpp"
#include "cuda_common.hpp"
#include "cuda_device.hpp"

namespace flx_cuda {

namespace {
std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / 1048576.0);
  return buf;
}
inline cudaStream_t as_stream(flx_stream s) { return reinterpret_cast<cudaStream_t>(s); }
inline cudaEvent_t as_event(flx_event e) { return reinterpret_cast<cudaEvent_t>(e); }
}  // namespace

int check_range(int dev, flx_mem m, size_t bytes, const char* what) {
  const std::string why = allocations().check(m.buf, m.offset, bytes, dev, what);
  return why.empty() ? FLX_OK : fail(FLX_ERR_INVALID_ARGUMENT, why);
}

int check_elements(int dev, flx_mem m, size_t n, size_t elem_bytes, const char* what) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(n, elem_bytes, &bytes))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(n) + " elements of " +
                                              std::to_string(elem_bytes) + " bytes overflow size_t");
  return check_range(dev, m, bytes, what);
}

int alloc(void*, int dev, size_t bytes, flx_stream s, flx_buffer* out) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "alloc")) return e;
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes ? bytes : 1, st);
  if (err != cudaSuccess) {
    // libflx calls release_cached (synchronise, trim the pool) and tries
    // once more, so this message is usually the second attempt's.
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    flx_memory_info pool{};
    (void)memory_info(nullptr, dev, &pool);
    return fail(err == cudaErrorMemoryAllocation ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
                "cudaMallocAsync of " + mib(bytes) + " (" + std::to_string(bytes) + " bytes) on CUDA device " +
                    std::to_string(dev) + " failed: " + cudaGetErrorString(err) + "; the memory pool has " +
                    mib(pool.used) + " in use and " + mib(pool.reserved) + " reserved, the device " + mib(free_b) +
                    " free of " + mib(total_b) + ". Free tensors you no longer need or use smaller batches");
  }
  allocations().add(p, dev, bytes);
  *out = reinterpret_cast<flx_buffer>(p);
  return FLX_OK;
}

// Also called during process exit for tensors alive after main: the
// plugin's state and allocation table are never destroyed, and once the
// CUDA runtime has been torn down the calls fail quietly, leaving the
// memory to the driver, which frees it as the process ends.
void free(void*, int dev, flx_buffer buf, flx_stream s) {
  if (!buf) return;
  allocations().remove(buf);
  cudaStream_t st;
  if (enter(dev, s, &st, "free")) return;
  if (cudaFreeAsync(reinterpret_cast<void*>(buf), st) != cudaSuccess) (void)cudaGetLastError();
}

int release_cached(void*, int dev) {
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "release_cached", &ds)) return e;
  // Frees queued on streams reach the pool only when those streams get
  // there: wait for the device, then give back everything unused.
  if (int e = check(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return e;
  return check(cudaMemPoolTrimTo(ds->pool, 0), "cudaMemPoolTrimTo");
}

int memory_info(void*, int dev, flx_memory_info* out) {
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "memory_info", &ds)) return e;
  struct {
    cudaMemPoolAttr attr;
    uint64_t* to;
    const char* name;
  } const figures[] = {{cudaMemPoolAttrUsedMemCurrent, &out->used, "UsedMemCurrent"},
                       {cudaMemPoolAttrUsedMemHigh, &out->used_peak, "UsedMemHigh"},
                       {cudaMemPoolAttrReservedMemCurrent, &out->reserved, "ReservedMemCurrent"},
                       {cudaMemPoolAttrReservedMemHigh, &out->reserved_peak, "ReservedMemHigh"}};
  for (const auto& f : figures) {
    uint64_t v = 0;  // the attributes are cuuint64_t
    if (int e = check(cudaMemPoolGetAttribute(ds->pool, f.attr, &v),
                      (std::string("cudaMemPoolGetAttribute(") + f.name + ")").c_str()))
      return e;
    *f.to = v;
  }
  return FLX_OK;
}

void* host_address(void*, int, flx_buffer) { return nullptr; }

// Pinned memory is allocated and freed with host_memory_device() current
// (cuda_host_memory.hpp): no context is made on a device the process does
// not use. Portable: every device's copies treat it as pinned.
int host_alloc(void*, size_t bytes, void** out) {
  DeviceState* ds = nullptr;
  if (int e = device_state(host_memory_device(), "host_alloc", &ds)) return e;
  cudaError_t err = cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocPortable);
  if (err == cudaSuccess) return FLX_OK;
  (void)cudaGetLastError();
  return fail(FLX_ERR_OUT_OF_MEMORY, "cudaHostAlloc of " + std::to_string(bytes) +
                                         " bytes (pinned host memory) failed: " + cudaGetErrorString(err));
}

void host_free(void*, void* p) {
  DeviceState* ds = nullptr;
  if (!p || device_state(host_memory_device(), "host_free", &ds)) return;
  if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

int stream_create(void*, int dev, flx_stream* out) {
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "stream_create", &ds)) return e;
  cudaStream_t st = nullptr;
  if (int e = check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) return e;
  *out = reinterpret_cast<flx_stream>(st);
  return FLX_OK;
}

// Waits for the stream's work first: a stream created later may get the
// same address, and with it this one's cuBLAS handles and their workspace
// (cuda_stream_handles.hpp), which its GEMMs must not share with ours.
void stream_destroy(void*, int dev, flx_stream s) {
  DeviceState* ds = nullptr;
  if (!s || device_state(dev, "stream_destroy", &ds)) return;
  (void)cudaStreamSynchronize(as_stream(s));
  (void)cudaStreamDestroy(as_stream(s));
  (void)cudaGetLastError();
}

int stream_synchronize(void*, int dev, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "stream_synchronize")) return e;
  return check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
}

int event_create(void*, int dev, flx_event* out) {
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "event_create", &ds)) return e;
  cudaEvent_t ev = nullptr;
  if (int e = check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return e;
  *out = reinterpret_cast<flx_event>(ev);
  return FLX_OK;
}

void event_destroy(void*, int dev, flx_event e) {
  DeviceState* ds = nullptr;
  if (!e || device_state(dev, "event_destroy", &ds)) return;
  (void)cudaEventDestroy(as_event(e));
}

int event_record(void*, int dev, flx_event e, flx_stream s) {
  cudaStream_t st;
  if (int r = enter(dev, s, &st, "event_record")) return r;
  return check(cudaEventRecord(as_event(e), st), "cudaEventRecord");
}

int stream_wait_event(void*, int dev, flx_stream s, flx_event e) {
  cudaStream_t st;
  if (int r = enter(dev, s, &st, "stream_wait_event")) return r;
  return check(cudaStreamWaitEvent(st, as_event(e), 0), "cudaStreamWaitEvent");
}

int event_synchronize(void*, int dev, flx_event e) {
  DeviceState* ds = nullptr;
  if (int r = device_state(dev, "event_synchronize", &ds)) return r;
  return check(cudaEventSynchronize(as_event(e)), "cudaEventSynchronize");
}

// Minor 4. cudaEventQuery answers cudaErrorNotReady while the work before
// the record runs, and records it as the thread's last error: cleared, so
// the next launch check does not report it.
int event_query(void*, int dev, flx_event e, int32_t* done) {
  if (!e || !done) return fail(FLX_ERR_INVALID_ARGUMENT, "event_query: the event or the output is a null pointer");
  DeviceState* ds = nullptr;
  if (int r = device_state(dev, "event_query", &ds)) return r;
  const cudaError_t q = cudaEventQuery(as_event(e));
  if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = 0;
    return FLX_OK;
  }
  if (int r = check(q, "cudaEventQuery")) return r;
  *done = 1;
  return FLX_OK;
}

// Minor 4: a buffer is the device pointer itself (cudaMallocAsync), so the
// address is the buffer plus the offset; no CUDA call.
int device_address(void*, int dev, flx_mem m, void** out) {
  if (!out) return fail(FLX_ERR_INVALID_ARGUMENT, "device_address: the output is a null pointer");
  *out = nullptr;
  if (!m.buf) return FLX_OK;
  if (int e = check_range(dev, m, 0, "device_address")) return e;
  *out = addr(m);
  return FLX_OK;
}

int copy_h2d(void*, int dev, flx_mem dst, const void* src, size_t bytes, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "copy_h2d")) return e;
  if (bytes == 0) return FLX_OK;
  if (!src) return fail(FLX_ERR_INVALID_ARGUMENT, "copy_h2d: the host source is a null pointer");
  if (int e = check_range(dev, dst, bytes, "copy_h2d")) return e;
  // From pageable memory the runtime stages the data before returning, so
  // the caller may reuse src at once either way.
  return check(cudaMemcpyAsync(addr(dst), src, bytes, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (host to device)");
}

int copy_d2h(void*, int dev, void* dst, flx_mem src, size_t bytes, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "copy_d2h")) return e;
  if (bytes == 0) return FLX_OK;
  if (!dst) return fail(FLX_ERR_INVALID_ARGUMENT, "copy_d2h: the host destination is a null pointer");
  if (int e = check_range(dev, src, bytes, "copy_d2h")) return e;
  if (int e = check(cudaMemcpyAsync(dst, addr(src), bytes, cudaMemcpyDeviceToHost, st),
                    "cudaMemcpyAsync (device to host)"))
    return e;
  // dst may be pageable memory the caller reads when we return: asynchronous
  // only into pinned memory we could tell apart, so wait in every case.
  return check(cudaStreamSynchronize(st), "cudaStreamSynchronize after a device-to-host copy");
}

int copy_d2d(void*, int dev, flx_mem dst, flx_mem src, size_t bytes, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "copy_d2d")) return e;
  if (bytes == 0) return FLX_OK;
  if (int e = check_range(dev, dst, bytes, "copy_d2d")) return e;
  if (int e = check_range(dev, src, bytes, "copy_d2d")) return e;
  return check(cudaMemcpyAsync(addr(dst), addr(src), bytes, cudaMemcpyDeviceToDevice, st),
               "cudaMemcpyAsync (device to device)");
}

int copy_peer(void*, int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes, flx_stream s) {
  cudaStream_t dst_default;
  if (int e = enter(dst_dev, nullptr, &dst_default, "copy_peer")) return e;
  if (bytes) {
    if (int e = check_range(dst_dev, dst, bytes, "copy_peer")) return e;
    if (int e = check_range(src_dev, src, bytes, "copy_peer")) return e;
  }
  // Order the copy after the work queued on the destination's default stream.
  cudaEvent_t ev = nullptr;
  if (int e = check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return e;
  int r = check(cudaEventRecord(ev, dst_default), "cudaEventRecord");
  cudaStream_t st;
  if (!r) r = enter(src_dev, s, &st, "copy_peer");
  if (!r) r = check(cudaStreamWaitEvent(st, ev, 0), "cudaStreamWaitEvent");
  if (!r && bytes)
    r = check(cudaMemcpyPeerAsync(addr(dst), dst_dev, addr(src), src_dev, bytes, st), "cudaMemcpyPeerAsync");
  (void)cudaEventDestroy(ev);  // released once the wait is done
  return r;
}

}  // namespace flx_cuda

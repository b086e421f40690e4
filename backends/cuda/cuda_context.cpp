// Discovery, errors, device properties and the per-device state (default
// stream, memory pool). Host code against the CUDA runtime API only, so it
// is compiled by the C++ compiler, not nvcc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_common.hpp"
#include "cuda_device.hpp"
#include "cuda_host_memory.hpp"
#include "cuda_reason.hpp"

namespace flx_cuda {

namespace {
// The calling thread's last error message. A plain array, which is never
// destroyed: buffers may be freed, and fail, during process exit, after
// the thread's objects with destructors are gone.
thread_local char t_error[2048];
thread_local int t_sm_count = 0;  // of the device last entered on this thread
}

int current_sm_count() { return t_sm_count; }

int fail(int status, const std::string& msg) {
  std::snprintf(t_error, sizeof t_error, "%s", msg.c_str());  // cut at 2047 bytes
  return status;
}
const char* last_error(void*) { return t_error; }

int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return FLX_OK;
  (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const bool oom = e == cudaErrorMemoryAllocation;
  return fail(oom ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
              std::string(what) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

int launched(const char* what) { return check(cudaGetLastError(), what); }

namespace {

// Probed once: the runtime's answer does not change during a process.
struct Probe {
  ProbeResult result;
  std::string reason;
};
// probe() and states() are never destroyed: a tensor alive after main is
// freed during exit, after static destructors have run.
const Probe& probe() {
  static const Probe& p = *new Probe([] {
    Probe r;
    int count = 0;  // left unset by the runtime when there is no driver
    cudaError_t e = cudaGetDeviceCount(&count);
    r.result.error = int(e);
    r.result.error_string = cudaGetErrorString(e);
    r.result.device_count = e == cudaSuccess ? count : 0;
    r.result.visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (cudaDriverGetVersion(&r.result.driver_version) != cudaSuccess) r.result.driver_version = 0;
    if (cudaRuntimeGetVersion(&r.result.runtime_version) != cudaSuccess) r.result.runtime_version = 0;
    (void)cudaGetLastError();
    r.reason = unusable_reason(r.result);
    return r;
  }());
  return p;
}

std::vector<DeviceState>& states() {
  static auto& s = *new std::vector<DeviceState>(size_t(probe().result.device_count));
  return s;
}
std::mutex g_init;

// Let every device that can reach `dev` directly read and write its pool's
// memory: pool allocations ignore cudaDeviceEnablePeerAccess, and without
// access a peer copy is staged by the driver (slower, but still right, so a
// refusal here is not an error).
void grant_peer_access(int dev, cudaMemPool_t pool) {
  const int n = probe().result.device_count;
  for (int p = 0; p < n; ++p) {
    int can = 0;
    if (p == dev || cudaDeviceCanAccessPeer(&can, p, dev) != cudaSuccess || !can) continue;
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = p;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    (void)cudaMemPoolSetAccess(pool, &desc, 1);
  }
  (void)cudaGetLastError();
}

}  // namespace

int device_state(int dev, const char* what, DeviceState** out) {
  const int n = probe().result.device_count;
  if (n == 0)
    return fail(FLX_ERR_DEVICE, std::string(what) + ": the CUDA backend has no device: " + probe().reason);
  if (dev < 0 || dev >= n)
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": device " + std::to_string(dev) +
                                              " does not exist (expected 0 to " + std::to_string(n - 1) + ")");
  DeviceState& st = states()[size_t(dev)];
  *out = &st;
  if (int e = check(cudaSetDevice(dev), "cudaSetDevice")) return e;
  if (st.ready.load(std::memory_order_acquire)) return FLX_OK;
  std::lock_guard<std::mutex> lock(g_init);
  if (st.ready.load(std::memory_order_relaxed)) return FLX_OK;
  // A non-blocking default stream of our own: the legacy NULL stream would
  // serialise with every other stream of the process.
  if (!st.stream)  // kept from an earlier attempt that failed further on
    if (int e = check(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"))
      return e;
  if (int e = check(cudaDeviceGetDefaultMemPool(&st.pool, dev), "cudaDeviceGetDefaultMemPool")) return e;
  // The multiprocessor count, for the kernels' grid size (blocks_for).
  int sms = 0;
  if (int e = check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
                    "cudaDeviceGetAttribute(MultiProcessorCount)"))
    return e;
  st.sm_count = sms;
  // Keep freed memory in the pool (the default threshold 0 hands it back at
  // every synchronisation); release_cached trims it when an allocation fails.
  uint64_t threshold = UINT64_MAX;
  if (int e = check(cudaMemPoolSetAttribute(st.pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                    "cudaMemPoolSetAttribute(ReleaseThreshold)"))
    return e;
  grant_peer_access(dev, st.pool);
  st.ready.store(true, std::memory_order_release);
  return FLX_OK;
}

int host_memory_device() {
  const std::vector<DeviceState>& all = states();
  std::vector<bool> ready(all.size());
  for (size_t d = 0; d < all.size(); ++d) ready[d] = all[d].ready.load(std::memory_order_acquire);
  return first_ready_device(ready);
}

int enter(int dev, flx_stream s, cudaStream_t* out, const char* what) {
  DeviceState* st = nullptr;
  if (int e = device_state(dev, what, &st)) return e;
  t_sm_count = st->sm_count;
  *out = s ? reinterpret_cast<cudaStream_t>(s) : st->stream;
  return FLX_OK;
}

int functional(void*, char* reason, size_t cap) {
  const Probe& p = probe();
  if (reason && cap) std::snprintf(reason, cap, "%s", p.reason.c_str());
  return p.reason.empty() ? 1 : 0;
}

int device_count(void*) { return probe().reason.empty() ? probe().result.device_count : 0; }

int device_props(void*, int dev, flx_device_props* out) {
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "device_props", &ds)) return e;
  cudaDeviceProp prop{};
  if (int st = check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties")) return st;
  std::memset(out, 0, sizeof(*out));
  std::snprintf(out->name, sizeof(out->name), "%s", prop.name);
  out->kind = FLX_DEVICE_GPU;
  size_t free_b = 0, total_b = 0;
  if (int st = check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo")) return st;
  out->total_memory = total_b;
  out->free_memory = free_b;
  return FLX_OK;
}

}  // namespace flx_cuda

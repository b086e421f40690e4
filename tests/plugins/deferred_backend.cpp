// A test backend for tests/test_synchronize.cpp, linked into that program,
// not a plugin: the CPU backend's tables, but nothing runs when it is
// queued. Every op, device-side copy and free waits in one queue until
// stream_synchronize or event_synchronize runs it, as a GPU's queue does
// until the device gets there, only deterministically. Buffers are not
// host-addressable to libflx (host_address is NULL, as a discrete GPU's), and
// new ones are filled with NaN, so a result that was never computed cannot
// pass for one; the test reads them through flx_test_deferred_address().
// Copies follow the ABI: asynchronous (queued) with pinned host memory from
// host_alloc; from pageable memory the source is taken at the call; to
// pageable memory the queue runs first, so the copy is complete on return.
#include "deferred_backend.hpp"

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace {

const flx_backend* cpu;
const flx_compute_table* cpu_compute;
flx_backend core;
flx_compute_table compute;

std::mutex mu;
std::vector<std::function<int()>> queue;  // in order of submission
std::map<const char*, size_t> pinned;     // host_alloc's blocks

void defer(std::function<int()> work) {
  std::lock_guard lock(mu);
  queue.push_back(std::move(work));
}

// Run everything queued so far; the first failure's status.
int run_queue() {
  std::vector<std::function<int()>> work;
  {
    std::lock_guard lock(mu);
    work.swap(queue);
  }
  int status = FLX_OK;
  for (auto& w : work)
    if (int st = w(); st != FLX_OK && status == FLX_OK) status = st;
  return status;
}

bool is_pinned(const void* p, size_t bytes) {
  std::lock_guard lock(mu);
  auto it = pinned.upper_bound(static_cast<const char*>(p));
  if (it == pinned.begin()) return false;
  --it;
  return static_cast<const char*>(p) + bytes <= it->first + it->second;
}

char* address(flx_mem m) { return static_cast<char*>(cpu->host_address(cpu->ctx, 0, m.buf)) + m.offset; }

// ---- the core table
void* no_host_address(void*, int, flx_buffer) { return nullptr; }

int alloc(void*, int dev, size_t bytes, flx_stream, flx_buffer* out) {
  int st = cpu->alloc(cpu->ctx, dev, bytes, nullptr, out);
  if (st == FLX_OK && bytes) std::memset(cpu->host_address(cpu->ctx, dev, *out), 0xFF, bytes);  // NaN
  return st;
}
void free_later(void*, int dev, flx_buffer buf, flx_stream) {
  defer([=] {
    cpu->free(cpu->ctx, dev, buf, nullptr);
    return FLX_OK;
  });
}
int host_alloc(void*, size_t bytes, void** out) {
  int st = cpu->host_alloc(cpu->ctx, bytes, out);
  if (st == FLX_OK) {
    std::lock_guard lock(mu);
    pinned[static_cast<const char*>(*out)] = bytes;
  }
  return st;
}
void host_free(void*, void* p) {
  run_queue();  // a queued copy may still use it
  {
    std::lock_guard lock(mu);
    pinned.erase(static_cast<const char*>(p));
  }
  cpu->host_free(cpu->ctx, p);
}

flx_stream_s* const kStream = reinterpret_cast<flx_stream_s*>(&core);  // any non-null handle
int stream_create(void*, int, flx_stream* out) {
  *out = kStream;
  return FLX_OK;
}
void stream_destroy(void*, int, flx_stream) {}
int synchronize(void*, int, flx_stream) { return run_queue(); }
int event_create(void*, int, flx_event* out) {
  *out = reinterpret_cast<flx_event>(new char);
  return FLX_OK;
}
void event_destroy(void*, int, flx_event e) { delete reinterpret_cast<char*>(e); }
// One queue for every stream: work is in submission order, so an event
// is reached once the queue has run.
int event_record(void*, int, flx_event, flx_stream) { return FLX_OK; }
int stream_wait_event(void*, int, flx_stream, flx_event) { return FLX_OK; }
int event_synchronize(void*, int, flx_event) { return run_queue(); }

int copy_h2d(void*, int, flx_mem dst, const void* src, size_t bytes, flx_stream) {
  if (is_pinned(src, bytes)) {
    defer([=] {
      std::memcpy(address(dst), src, bytes);
      return FLX_OK;
    });
  } else {
    auto taken = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    defer([=] {
      std::memcpy(address(dst), taken->data(), bytes);
      return FLX_OK;
    });
  }
  return FLX_OK;
}
int copy_d2h(void*, int, void* dst, flx_mem src, size_t bytes, flx_stream) {
  if (is_pinned(dst, bytes)) {
    defer([=] {
      std::memcpy(dst, address(src), bytes);
      return FLX_OK;
    });
    return FLX_OK;
  }
  int st = run_queue();
  std::memcpy(dst, address(src), bytes);
  return st;
}
int copy_d2d(void*, int, flx_mem dst, flx_mem src, size_t bytes, flx_stream) {
  defer([=] {
    std::memmove(address(dst), address(src), bytes);
    return FLX_OK;
  });
  return FLX_OK;
}
int copy_peer(void* ctx, int, flx_mem dst, int, flx_mem src, size_t bytes, flx_stream s) {
  return copy_d2d(ctx, 0, dst, src, bytes, s);
}

// ---- the compute table: each call queued with a copy of its arguments
template <typename Desc, int (*flx_compute_table::*F)(void*, int, const Desc*, flx_stream)>
int deferred(void*, int dev, const Desc* d, flx_stream) {
  defer([dev, desc = *d] { return (cpu_compute->*F)(cpu->ctx, dev, &desc, nullptr); });
  return FLX_OK;
}
int fill(void*, int dev, flx_mem dst, int32_t t, size_t n, double v, flx_stream) {
  defer([=] { return cpu_compute->fill(cpu->ctx, dev, dst, t, n, v, nullptr); });
  return FLX_OK;
}
int random(void*, int dev, flx_mem dst, int32_t t, size_t n, int32_t dist, uint64_t seed, uint64_t offset, double a,
           double b, flx_stream) {
  defer([=] { return cpu_compute->random(cpu->ctx, dev, dst, t, n, dist, seed, offset, a, b, nullptr); });
  return FLX_OK;
}
int cast(void*, int dev, flx_mem dst, int32_t dt, flx_mem src, int32_t st, size_t n, flx_stream) {
  defer([=] { return cpu_compute->cast(cpu->ctx, dev, dst, dt, src, st, n, nullptr); });
  return FLX_OK;
}

const void* get_table(void*, const char* name, uint32_t version) {
  return name && std::strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == FLX_TABLE_COMPUTE_VERSION ? &compute
                                                                                                   : nullptr;
}

}  // namespace

const flx_backend* flx_test_deferred_backend(const flx_backend* cpu_core, const char* name) {
  cpu = cpu_core;
  cpu_compute = static_cast<const flx_compute_table*>(cpu->get_table(cpu->ctx, FLX_TABLE_COMPUTE, FLX_TABLE_COMPUTE_VERSION));
  // Every call of the CPU's table but gemm_epilogue, which may answer
  // FLX_ERR_UNSUPPORTED at the call and so cannot wait in the queue: without
  // it libflx runs the unfused ops.
  compute = *cpu_compute;
  compute.struct_size = offsetof(flx_compute_table, gemm_epilogue);
  compute.fill = fill;
  compute.random = random;
  compute.cast = cast;
  compute.map = deferred<flx_map_desc, &flx_compute_table::map>;
  compute.reduce = deferred<flx_reduce_desc, &flx_compute_table::reduce>;
  compute.gemm = deferred<flx_gemm_desc, &flx_compute_table::gemm>;
  compute.gather = deferred<flx_index_desc, &flx_compute_table::gather>;
  compute.scatter_add = deferred<flx_index_desc, &flx_compute_table::scatter_add>;
  compute.permute = deferred<flx_permute_desc, &flx_compute_table::permute>;
  compute.softmax = deferred<flx_softmax_desc, &flx_compute_table::softmax>;
  compute.softmax_backward = deferred<flx_softmax_desc, &flx_compute_table::softmax_backward>;
  compute.optim_step = deferred<flx_optim_desc, &flx_compute_table::optim_step>;
  core = *cpu;
  core.name = name;
  core.get_table = get_table;
  core.host_address = no_host_address;
  core.alloc = alloc;
  core.free = free_later;
  core.host_alloc = host_alloc;
  core.host_free = host_free;
  core.stream_create = stream_create;
  core.stream_destroy = stream_destroy;
  core.stream_synchronize = synchronize;
  core.event_create = event_create;
  core.event_destroy = event_destroy;
  core.event_record = event_record;
  core.stream_wait_event = stream_wait_event;
  core.event_synchronize = event_synchronize;
  core.event_query = nullptr;  // the CPU's says "done" at once; here nothing runs until a synchronize
  core.copy_h2d = copy_h2d;
  core.copy_d2h = copy_d2h;
  core.copy_d2d = copy_d2d;
  core.copy_peer = copy_peer;
  return &core;
}

size_t flx_test_deferred_pending() {
  std::lock_guard lock(mu);
  return queue.size();
}

const void* flx_test_deferred_address(flx_mem m) { return address(m); }

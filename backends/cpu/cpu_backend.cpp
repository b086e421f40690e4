// The CPU backend: the built-in implementation of the backend ABI. Memory is
// host memory (64-byte aligned), work runs synchronously on the calling
// thread (with the pool's helpers for large loops, cpu_pool.hpp), so
// streams and events are no-ops.
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend_common/fused_calls.hpp"
#include "backend_common/host_memory.hpp"
#include "backend_common/philox.hpp"
#include "backend_common/uniform_bound.hpp"
#include "cpu_backend.hpp"
#include "cpu_common.hpp"
#include "cpu_dnn.hpp"
#include "cpu_native_halves.hpp"

namespace flx::cpu_backend {
namespace {
thread_local std::string t_error;
}  // namespace

int functional(void*, char* reason, size_t cap) {
  if (reason && cap) reason[0] = '\0';
  return 1;
}
int device_count(void*) { return 1; }
int device_props(void*, int dev, flx_device_props* out) {
  if (dev != 0) return fail(FLX_ERR_INVALID_ARGUMENT, "the CPU backend has one device, 0");
  std::memset(out, 0, sizeof *out);
  std::string name = "CPU (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
  std::strncpy(out->name, name.c_str(), sizeof out->name - 1);
  out->kind = FLX_DEVICE_CPU;
  return FLX_OK;
}
const char* last_error(void*) { return t_error.c_str(); }

namespace {
// Large blocks are cached and reused: returning them to the OS (glibc
// unmaps big blocks on free) would make every training step pay page faults
// and page clearing for its activations. Small blocks are kept per thread, so
// that the many tiny tensors of eager code skip aligned_alloc (glibc's slow
// memalign path). Each block carries a header with its size class.
constexpr size_t kHeader = 64;                 // keeps the data 64-byte aligned
constexpr size_t kCacheFrom = 64 * 1024;       // cache blocks of this size or more
constexpr size_t kCacheLimit = size_t(1) << 30;  // bytes kept for reuse at most

size_t size_class(size_t bytes) {
  if (bytes < kCacheFrom) return (bytes + 63) / 64 * 64;
  // 8 classes per power of two: at most 12.5% slack.
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes));
  size_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

struct BlockCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached = 0;
};
// Never destroyed: a buffer may be freed during exit (a tensor alive after
// main), after static destructors have run; the blocks it keeps are the
// system's again when the process ends.
BlockCache& cache() {
  static BlockCache& c = *new BlockCache;
  return c;
}

// Small blocks: per-thread free lists per size class (a block freed on
// another thread joins that thread's list). After the thread's cache is gone
// (thread exit), blocks go straight back to malloc.
constexpr size_t kSmallMax = 4096;
constexpr size_t kSmallKeep = 32;  // blocks kept per size class and thread
struct SmallCache;
// The hot path reaches the thread's cache through two trivial thread-locals
// in the initial-exec model (a load at a fixed offset from the thread
// pointer; 9 bytes, which glibc's static TLS reserve holds even when libflx
// is dlopened) instead of a __tls_get_addr call per allocation.
[[gnu::tls_model("initial-exec")]] thread_local SmallCache* t_small_fast = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local bool t_small_gone = false;
struct SmallCache {
  std::array<std::vector<void*>, kSmallMax / 64 + 1> lists;
  ~SmallCache() {
    t_small_gone = true;
    t_small_fast = nullptr;
    for (auto& l : lists)
      for (void* p : l) std::free(p);
  }
};
thread_local SmallCache t_small;  // owns the lists; destroyed at thread exit
// This thread's cache, or null once it is gone (thread exit).
inline SmallCache* small_cache() {
  if (SmallCache* c = t_small_fast) [[likely]]
    return c;
  if (t_small_gone) return nullptr;
  return t_small_fast = &t_small;  // first use on this thread
}
}  // namespace

int alloc(void*, int, size_t bytes, flx_stream, flx_buffer* out) {
  if (bytes > flx::backend_common::host_memory_limit())
    return fail(FLX_ERR_OUT_OF_MEMORY, "out of host memory allocating " + std::to_string(bytes) +
                                           " bytes: more than this process can ever hold (RAM and swap, or its "
                                           "cgroup's limit: " +
                                           std::to_string(flx::backend_common::host_memory_limit()) + " bytes)");
  size_t cls = size_class(bytes ? bytes : 1);
  void* block = nullptr;
  SmallCache* small = cls <= kSmallMax ? small_cache() : nullptr;
  if (small) {
    auto& l = small->lists[cls / 64];
    if (!l.empty()) {
      block = l.back();
      l.pop_back();
    }
  } else if (cls >= kCacheFrom) {
    // The block of this class, else the smallest cached one of up to twice
    // its size: a batch smaller than the others (an epoch's last, a last
    // piece of evaluation) then reuses the blocks of the full batches
    // instead of adding its own to what the process holds. A block keeps
    // its class, and goes back to its own list.
    BlockCache& c = cache();
    std::lock_guard lock(c.mutex);
    if (!c.free_blocks.empty())
      for (size_t fit = cls; fit <= 2 * cls && !block; fit = size_class(fit + 1)) {
        auto it = c.free_blocks.find(fit);
        if (it == c.free_blocks.end() || it->second.empty()) continue;
        block = it->second.back();
        it->second.pop_back();
        c.cached -= fit;
        cls = fit;
      }
  }
  if (!block) block = std::aligned_alloc(64, kHeader + cls);
  if (!block) return fail(FLX_ERR_OUT_OF_MEMORY, "out of host memory allocating " + std::to_string(bytes) + " bytes");
  *static_cast<size_t*>(block) = cls;
  *out = reinterpret_cast<flx_buffer>(static_cast<char*>(block) + kHeader);
  return FLX_OK;
}
void free(void*, int, flx_buffer b, flx_stream) {
  if (!b) return;
  void* block = reinterpret_cast<char*>(b) - kHeader;
  size_t cls = *static_cast<size_t*>(block);
  SmallCache* small = cls <= kSmallMax ? small_cache() : nullptr;
  if (small) {
    auto& l = small->lists[cls / 64];
    if (l.size() < kSmallKeep) {
      l.push_back(block);
      return;
    }
  } else if (cls >= kCacheFrom) {
    BlockCache& c = cache();
    std::lock_guard lock(c.mutex);
    if (c.cached + cls <= kCacheLimit) {
      c.free_blocks[cls].push_back(block);
      c.cached += cls;
      return;
    }
  }
  std::free(block);
}
void* host_address(void*, int, flx_buffer b) { return b; }
int host_alloc(void*, size_t bytes, void** out) {
  return alloc(nullptr, 0, bytes, nullptr, reinterpret_cast<flx_buffer*>(out));
}
void host_free(void*, void* p) { cpu_backend::free(nullptr, 0, reinterpret_cast<flx_buffer>(p), nullptr); }

// Give the large blocks kept for reuse back to the system (the calling
// thread's small blocks too); the dispatch layer calls it when an
// allocation fails, before trying again.
int release_cached(void*, int) {
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mutex);
    for (auto& [size, v] : c.free_blocks)
      for (void* p : v) std::free(p);
    c.free_blocks.clear();
    c.cached = 0;
  }
  if (SmallCache* small = small_cache())
    for (auto& l : small->lists) {
      for (void* p : l) std::free(p);
      l.clear();
    }
  return FLX_OK;
}

// Work is synchronous: a stream is a token and an event is always complete.
int stream_create(void*, int, flx_stream* out) {
  *out = nullptr;
  return FLX_OK;
}
void stream_destroy(void*, int, flx_stream) {}
int stream_synchronize(void*, int, flx_stream) { return FLX_OK; }
int event_create(void*, int, flx_event* out) {
  *out = nullptr;
  return FLX_OK;
}
void event_destroy(void*, int, flx_event) {}
int event_record(void*, int, flx_event, flx_stream) { return FLX_OK; }
int stream_wait_event(void*, int, flx_stream, flx_event) { return FLX_OK; }
int event_synchronize(void*, int, flx_event) { return FLX_OK; }
// minor 4, optional: every event is complete (event_create gives NULL ones).
int event_query(void*, int, flx_event, int32_t* done) {
  if (!done) return fail(FLX_ERR_INVALID_ARGUMENT, "event_query: the output is a null pointer");
  *done = 1;
  return FLX_OK;
}

int copy_h2d(void*, int, flx_mem dst, const void* src, size_t bytes, flx_stream) {
  if (bytes && !src) return fail(FLX_ERR_INVALID_ARGUMENT, "copy_h2d: the host source is a null pointer");
  if (bytes) std::memcpy(addr(dst), src, bytes);
  return FLX_OK;
}
int copy_d2h(void*, int, void* dst, flx_mem src, size_t bytes, flx_stream) {
  if (bytes && !dst) return fail(FLX_ERR_INVALID_ARGUMENT, "copy_d2h: the host destination is a null pointer");
  if (bytes) std::memcpy(dst, addr(src), bytes);
  return FLX_OK;
}
int copy_d2d(void*, int, flx_mem dst, flx_mem src, size_t bytes, flx_stream) {
  if (bytes) std::memmove(addr(dst), addr(src), bytes);
  return FLX_OK;
}
int copy_peer(void*, int, flx_mem dst, int, flx_mem src, size_t bytes, flx_stream s) {
  return copy_d2d(nullptr, 0, dst, src, bytes, s);
}

int fill(void*, int, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream) {
  bool ok = dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = cast_element<T>(value);
    T* p = reinterpret_cast<T*>(addr(dst));
    parallel_for(int64_t(n), parallel_grain, [&](int64_t lo, int64_t hi) { std::fill(p + lo, p + hi, v); });
  });
  return ok ? FLX_OK : fail(FLX_ERR_INVALID_ARGUMENT, "fill: unknown dtype " + std::to_string(dtype));
}

int cast(void*, int, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream) {
  bool ok = true;
  ok &= dispatch_dtype(src_dtype, [&](auto stag) {
    using S = decltype(stag);
    ok &= dispatch_dtype(dst_dtype, [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = reinterpret_cast<const S*>(addr(src));
      D* d = reinterpret_cast<D*>(addr(dst));
      parallel_for(int64_t(n), parallel_grain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) d[i] = cast_element<D>(s[i]);
      });
    });
  });
  return ok ? FLX_OK : fail(FLX_ERR_INVALID_ARGUMENT, "cast: unknown dtype");
}

int fail(int status, const std::string& msg) {
  t_error = msg;
  return status;
}
const char* last_error() { return t_error.c_str(); }

int random(void*, int, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset, double a,
           double b, flx_stream) {
  bool floating = dtype == FLX_F32 || dtype == FLX_F64 || dtype == FLX_F16 || dtype == FLX_BF16;
  if (!floating) return fail(FLX_ERR_UNSUPPORTED, "random: only floating dtypes can be filled with random numbers");
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      T* p = reinterpret_cast<T*>(addr(dst));
      const T top = store<T>(compute_t<T>(uniform_bound::largest_below(dtype, b)));  // exact in T
      parallel_for(int64_t(n), parallel_grain / 4, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          auto r = philox::bits(seed, offset, uint64_t(i));
          if (dist == FLX_RANDOM_UNIFORM) {
            const T v = store<T>(compute_t<T>(a + (b - a) * philox::uniform01(r)));
            p[i] = double(load(v)) >= b ? top : v;  // rounding may reach b: keep [a, b) half-open
          } else {
            p[i] = store<T>(compute_t<T>(a + b * philox::normal01(r)));
          }
        }
      });
    }
  });
  return FLX_OK;
}

namespace {
const flx_compute_table compute_table = [] {
  auto t = abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, cpu_backend)
  t.gemm_epilogue = gemm_epilogue;  // minor 2, optional
  t.rule_step = rule_step;          // minor 12, optional
  return t;
}();
// Convolution, pooling, batch normalisation (minor 5): oneDNN for Float32,
// direct loops for Float64 (cpu_dnn.hpp); Float32 LSTMs (minor 6) on oneDNN;
// attention without its scores (minor 7) on OpenBLAS tiles; group
// normalisation (minor 10) as direct loops.
const flx_dnn_table dnn_table = [] {
  auto t = abi::table_header<flx_dnn_table>();
  FLX_SET_DNN_CALLS(t, cpu_backend)
  t.conv_workspace = conv_workspace;        // optional
  t.pool_reserve_size = pool_reserve_size;  // optional
  t.rnn_reserve_size = rnn_reserve_size;    // minor 6, optional: LSTMs through oneDNN
  t.rnn_forward = rnn_forward;
  t.rnn_backward = rnn_backward;
  t.attention_forward = attention_forward;  // minor 7, optional: attention without its scores
  t.attention_backward = attention_backward;
  t.groupnorm_forward = groupnorm_forward;  // minor 10, optional: group normalisation
  t.groupnorm_backward = groupnorm_backward;
  t.conv_backward = conv_backward;  // minor 13, optional: both gradients, each piece's dy reordered once
  return t;
}();
// Every fused op by its code (minor 14): the calls above.
const flx_fused_table fused_table = FLX_FUSED_TABLE_OF(&dnn_table, &compute_table);
}  // namespace

FLX_SERVE_TABLES(compute_table, dnn_table, fused_table)

const flx_backend* core() {
  static const flx_backend b = [] {
    flx_backend f = abi::core_table_header("CPU");
    FLX_SET_CORE_CALLS(f, cpu_backend)
    f.release_cached = release_cached;
    f.event_query = event_query;  // device_address stays NULL: CPU memory has host addresses only
    f.precision_path = precision_path;  // minor 9, optional: which half ops run natively
    return f;
  }();
  return &b;
}

}  // namespace flx::cpu_backend

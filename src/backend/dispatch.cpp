// The dispatch layer (backend.hpp): the only code that calls a backend's
// tables.
#include <cstddef>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "backend/backend.hpp"
#include "backend/descriptors.hpp"
#include "backend/streams.hpp"
#include "common/backend_tables.hpp"
#include "devices/log.hpp"
#include "flx/error.hpp"

namespace flx::detail {

namespace {

const char* status_name(int s) {
  switch (s) {
    case FLX_ERR_OUT_OF_MEMORY: return "out of memory";
    case FLX_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FLX_ERR_UNSUPPORTED: return "unsupported";
    case FLX_ERR_DEVICE: return "device error";
  }
  return "error";
}

// The core calls, by name, for the load check.
struct CoreFn {
  const char* name;
  size_t offset;
};
#define FLX_CORE_FN_(f, ...) CoreFn{#f, offsetof(flx_backend, f)},
// Discovery: needed to load a plugin and ask whether it works.
constexpr CoreFn kDiscoveryCore[] = {FLX_CORE_FN_(functional) FLX_CORE_FN_(device_count)
                                         FLX_CORE_FN_(last_error) FLX_CORE_FN_(get_table)};
// All of them: needed to use a functional backend.
constexpr CoreFn kRequiredCore[] = {FLX_CORE_CALLS(FLX_CORE_FN_, unused)};
#undef FLX_CORE_FN_
static_assert(sizeof kRequiredCore / sizeof kRequiredCore[0] + 2 ==
                  (sizeof(flx_backend) - offsetof(flx_backend, functional)) / sizeof(void*),
              "every core call is listed in FLX_CORE_CALLS, release_cached and memory_info (optional) aside");

bool core_fn_set(const flx_backend* core, const CoreFn& f) {
  void* p;
  std::memcpy(&p, reinterpret_cast<const char*>(core) + f.offset, sizeof p);
  return p != nullptr;
}

// The compute table's calls, by name; the optional ones (reduce_workspace)
// are not reported missing.
struct TableFn {
  const char* name;
  size_t offset;
};
#define FLX_COMPUTE_FN_(f, ...) TableFn{#f, offsetof(flx_compute_table, f)},
constexpr TableFn kComputeFns[] = {FLX_COMPUTE_CALLS(FLX_COMPUTE_FN_, unused)};
#undef FLX_COMPUTE_FN_
static_assert(sizeof kComputeFns / sizeof kComputeFns[0] + 2 ==
                  (sizeof(flx_compute_table) - offsetof(flx_compute_table, fill)) / sizeof(void*),
              "every call of the compute table is listed in FLX_COMPUTE_CALLS, reduce_workspace and "
              "gemm_epilogue (optional) aside");

std::vector<std::string> missing_fns(const flx_compute_table* t) {
  std::vector<std::string> out;
  for (const TableFn& f : kComputeFns) {
    void* p = nullptr;
    if (f.offset + sizeof p <= t->struct_size) std::memcpy(&p, reinterpret_cast<const char*>(t) + f.offset, sizeof p);
    if (!p) out.push_back(f.name);
  }
  return out;
}

}  // namespace

Backend::Backend(BackendId id, const flx_backend* core, std::string origin)
    : id_(id), core_(core), origin_(std::move(origin)) {
  FLX_CHECK(core, BackendUnavailable, backend_name(id), " backend (", origin_, ") returned no table");
  FLX_CHECK(core->abi_major == FLX_BACKEND_ABI_MAJOR, BackendUnavailable, backend_name(id), " backend (", origin_,
            ") was built for backend ABI ", core->abi_major, ".x; this libflx needs ", FLX_BACKEND_ABI_MAJOR,
            ".x. Install the plugin that came with this libflx");
  const size_t min_size = offsetof(flx_backend, copy_peer) + sizeof(core->copy_peer);
  FLX_CHECK(core->struct_size >= min_size, BackendUnavailable, backend_name(id), " backend (", origin_,
            ") has a core table of ", core->struct_size, " bytes; ABI ", FLX_BACKEND_ABI_MAJOR, ".0 needs at least ",
            min_size, ". The plugin is damaged or was built against a different flx/backend.h");
  FLX_CHECK(core->name, BackendUnavailable, backend_name(id), " backend (", origin_, ") has no name");
  for (const CoreFn& f : kDiscoveryCore)
    FLX_CHECK(core_fn_set(core, f), BackendUnavailable, backend_name(id), " backend (", origin_,
              ") lacks the core call `", f.name, "`, which every backend must provide");
  const void* t = core->get_table(core->ctx, FLX_TABLE_COMPUTE, FLX_TABLE_COMPUTE_VERSION);
  compute_ = static_cast<const flx_compute_table*>(t);
  if (compute_ && (compute_->struct_size < offsetof(flx_compute_table, fill) ||
                   compute_->version != FLX_TABLE_COMPUTE_VERSION))
    compute_ = nullptr;  // not a table this libflx can read: as good as none
  if (compute_) std::memcpy(&calls_, compute_, std::min<size_t>(compute_->struct_size, sizeof calls_));
}

int Backend::functional(std::string* reason) const {
  char buf[512] = {0};
  int score = core_->functional(core_->ctx, buf, sizeof buf);
  if (reason) *reason = buf;
  if (score > 0)  // a working backend must have the whole core table
    for (const CoreFn& f : kRequiredCore)
      if (!core_fn_set(core_, f)) {
        if (reason)
          *reason = std::string(name()) + " backend (" + origin_ + ") reports it works but lacks the core call `" +
                    f.name + "`, which every backend must provide; the plugin is incomplete";
        return 0;
      }
  return score;
}

std::string Backend::abi_version() const {
  return std::to_string(core_->abi_major) + "." + std::to_string(core_->abi_minor);
}

int Backend::device_count() const { return core_->device_count(core_->ctx); }

flx_device_props Backend::device_props(int dev) const {
  flx_device_props p{};
  check(core_->device_props(core_->ctx, dev, &p), "device_props");
  return p;
}

std::vector<TableInfo> Backend::tables() const {
  std::vector<TableInfo> out;
  if (compute_) out.push_back({FLX_TABLE_COMPUTE, compute_->version, missing_fns(compute_)});
  return out;
}

void Backend::fail(int status, const char* what) const {
  const char* msg = core_->last_error(core_->ctx);
  if (status == FLX_ERR_OUT_OF_MEMORY)
    FLX_THROW(OutOfMemory, name(), " backend: ", what, " failed (", status_name(status), "): ", msg,
              "; free tensors that are no longer needed or use smaller sizes (a smaller batch)");
  FLX_THROW(BackendError, name(), " backend: ", what, " failed (", status_name(status), "): ", msg);
}

void Backend::missing(const char* op, const char* table, const char* function) const {
  if (!function)
    FLX_THROW(NotImplemented, op, " cannot run on ", name(), ": its backend (", origin_, ", ABI ", abi_version(),
              ") provides no \"", table, "\" table version ",
              FLX_TABLE_COMPUTE_VERSION, ". Update the plugin, or move the tensors to a device whose backend has it");
  FLX_THROW(NotImplemented, op, " cannot run on ", name(), ": its backend (", origin_, ", ABI ", abi_version(),
            ") has no `", function, "` in its \"", table,
            "\" table (an older plugin). Update the plugin, or move the tensors to a device whose backend has it");
}

// The compute table's entry, or NotImplemented naming the op. calls_ is a
// copy of the table with what an older plugin's table lacks left NULL.
#define FLX_COMPUTE(field, op) \
  (calls_.field ? calls_.field : (missing(op, FLX_TABLE_COMPUTE, compute_ ? #field : nullptr), nullptr))

// ---- memory ---------------------------------------------------------------------

flx_buffer Backend::alloc_failed(int dev, size_t bytes, int status) const {
  // Out of memory: let a backend that caches give its cache back, then try
  // once more (as PyTorch's caching allocator does).
  flx_buffer buf = nullptr;
  if (status == FLX_ERR_OUT_OF_MEMORY && FLX_HAS_FN(core_, flx_backend, release_cached) &&
      core_->release_cached(core_->ctx, dev) == FLX_OK)
    status = core_->alloc(core_->ctx, dev, bytes, current_stream(id_, dev), &buf);
  check(status, "alloc");
  return buf;
}
void Backend::free_after_stream(int dev, flx_buffer buf, flx_stream used_on, flx_stream now) const noexcept {
  // Allocated (and maybe still in use) on another stream: the free, on this
  // one, waits for the work queued there so far. Without an event (none
  // left) wait for that stream outright rather than free too early.
  flx_event e = nullptr;
  if (core_->event_create(core_->ctx, dev, &e) == FLX_OK && e &&
      core_->event_record(core_->ctx, dev, e, used_on) == FLX_OK &&
      core_->stream_wait_event(core_->ctx, dev, now, e) == FLX_OK) {
    core_->event_destroy(core_->ctx, dev, e);  // released once the wait is done
  } else {
    if (e) core_->event_destroy(core_->ctx, dev, e);
    (void)core_->stream_synchronize(core_->ctx, dev, used_on);
  }
  core_->free(core_->ctx, dev, buf, now);
}

bool Backend::memory_info(int dev, flx_memory_info* out) const {
  if (!FLX_HAS_FN(core_, flx_backend, memory_info)) return false;
  check(core_->memory_info(core_->ctx, dev, out), "memory_stats");
  return true;
}
void* Backend::host_address(int dev, flx_buffer buf) const { return core_->host_address(core_->ctx, dev, buf); }
void* Backend::host_alloc(size_t bytes) const {
  void* p = nullptr;
  int st = core_->host_alloc(core_->ctx, bytes, &p);
  if (st == FLX_OK && !p && bytes) st = FLX_ERR_OUT_OF_MEMORY;
  check(st, "pinned host allocation");
  return p;
}
void Backend::host_free(void* p) const noexcept {
  if (p) core_->host_free(core_->ctx, p);
}

// ---- streams and events ---------------------------------------------------------

flx_stream Backend::stream_create(int dev) const {
  flx_stream s = nullptr;
  check(core_->stream_create(core_->ctx, dev, &s), "creating a stream");
  return s;
}
void Backend::stream_destroy(int dev, flx_stream s) const noexcept { core_->stream_destroy(core_->ctx, dev, s); }
void Backend::synchronize(int dev) const {
  check(core_->stream_synchronize(core_->ctx, dev, current_stream(id_, dev)), "synchronize");
}
flx_event Backend::event_create(int dev) const {
  flx_event e = nullptr;
  check(core_->event_create(core_->ctx, dev, &e), "creating an event");
  return e;
}
void Backend::event_destroy(int dev, flx_event e) const noexcept { core_->event_destroy(core_->ctx, dev, e); }
void Backend::event_record(int dev, flx_event e) const {
  check(core_->event_record(core_->ctx, dev, e, current_stream(id_, dev)), "recording an event");
}
void Backend::stream_wait_event(int dev, flx_event e) const {
  check(core_->stream_wait_event(core_->ctx, dev, current_stream(id_, dev), e), "waiting for an event");
}
void Backend::event_synchronize(int dev, flx_event e) const {
  check(core_->event_synchronize(core_->ctx, dev, e), "waiting for an event");
}

// ---- copies -----------------------------------------------------------------------

void Backend::copy_h2d(int dev, flx_mem dst, const void* src, size_t bytes) const {
  check(core_->copy_h2d(core_->ctx, dev, dst, src, bytes, current_stream(id_, dev)), "copy to the device");
}
void Backend::copy_d2h(int dev, void* dst, flx_mem src, size_t bytes) const {
  check(core_->copy_d2h(core_->ctx, dev, dst, src, bytes, current_stream(id_, dev)), "copy to the host");
}
void Backend::copy_d2d(int dev, flx_mem dst, flx_mem src, size_t bytes) const {
  check(core_->copy_d2d(core_->ctx, dev, dst, src, bytes, current_stream(id_, dev)), "device copy");
}
void Backend::copy_peer(int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes) const {
  check(core_->copy_peer(core_->ctx, dst_dev, dst, src_dev, src, bytes, current_stream(id_, src_dev)),
        "copy between devices");
}

// ---- compute ----------------------------------------------------------------------

void Backend::fill(int dev, flx_mem dst, DType t, size_t n, double value) const {
  auto fn = FLX_COMPUTE(fill, "fill");
  check(fn(core_->ctx, dev, dst, int32_t(t), n, value, current_stream(id_, dev)), "fill");
}
void Backend::random(int dev, flx_mem dst, DType t, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
                     double a, double b) const {
  auto fn = FLX_COMPUTE(random, "random numbers");
  check(fn(core_->ctx, dev, dst, int32_t(t), n, dist, seed, offset, a, b, current_stream(id_, dev)), "random");
}
void Backend::cast(int dev, flx_mem dst, DType dst_t, flx_mem src, DType src_t, size_t n) const {
  auto fn = FLX_COMPUTE(cast, "element type conversion");
  check(fn(core_->ctx, dev, dst, int32_t(dst_t), src, int32_t(src_t), n, current_stream(id_, dev)), "cast");
}
void Backend::map(int dev, flx_map_desc& d) const {
  auto fn = FLX_COMPUTE(map, "an elementwise op");
  canonicalize(d);
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "elementwise map");
}
void Backend::reduce(int dev, flx_reduce_desc& d) const {
  auto fn = FLX_COMPUTE(reduce, "a reduction");
  uint64_t bytes = 0;
  if (calls_.reduce_workspace) check(calls_.reduce_workspace(core_->ctx, dev, &d, &bytes), "reduce workspace query");
  if (bytes == 0) {
    check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "reduce");
    return;
  }
  // Stream-ordered: freed right after the launch, reusable once it ran.
  flx_buffer ws = alloc(dev, size_t(bytes));
  d.workspace = {ws, 0};
  d.workspace_bytes = bytes;
  int st = fn(core_->ctx, dev, &d, current_stream(id_, dev));
  free(dev, ws);
  d.workspace = {};  // gone: the descriptor must not point at it
  d.workspace_bytes = 0;
  check(st, "reduce");
}
void Backend::gemm(int dev, const flx_gemm_desc& d) const {
  auto fn = FLX_COMPUTE(gemm, "matmul");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "gemm");
}
bool Backend::gemm_epilogue(int dev, const flx_gemm_epilogue_desc& d) const {
  if (!calls_.gemm_epilogue) return false;  // an older plugin, or one that fuses nothing
  const int st = calls_.gemm_epilogue(core_->ctx, dev, &d, current_stream(id_, dev));
  if (st == FLX_OK) return true;
  // Any other answer: the caller runs the unfused ops on the same device,
  // which raise the error in turn if the device itself is at fault. A
  // failure other than "unsupported" is reported once per backend.
  if (st != FLX_ERR_UNSUPPORTED) {
    static std::atomic<bool> reported[backend_id_count];
    if (!reported[size_t(id_)].exchange(true))
      log_warn_box({std::string("flx: ") + name() + " backend: a fused Dense product (gemm_epilogue) failed (" +
                        status_name(st) + "): " + core_->last_error(core_->ctx),
                    "The unfused ops (GEMM, bias, activation) ran instead, on the same device; later failures of "
                    "gemm_epilogue are not reported."});
  }
  return false;
}
void Backend::gather(int dev, const flx_index_desc& d) const {
  auto fn = FLX_COMPUTE(gather, "gather");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "gather");
}
void Backend::scatter_add(int dev, const flx_index_desc& d) const {
  auto fn = FLX_COMPUTE(scatter_add, "scatter_add");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "scatter_add");
}
void Backend::permute(int dev, const flx_permute_desc& d) const {
  auto fn = FLX_COMPUTE(permute, "permutedims");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "permute");
}
void Backend::softmax(int dev, const flx_softmax_desc& d) const {
  auto fn = FLX_COMPUTE(softmax, d.log ? "logsoftmax" : "softmax");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), d.log ? "logsoftmax" : "softmax");
}
void Backend::softmax_backward(int dev, const flx_softmax_desc& d) const {
  auto fn = FLX_COMPUTE(softmax_backward, "the softmax gradient");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "softmax backward");
}
void Backend::optim_step(int dev, const flx_optim_desc& d) const {
  auto fn = FLX_COMPUTE(optim_step, "a fused optimiser step");
  check(fn(core_->ctx, dev, &d, current_stream(id_, dev)), "optimiser step");
}

#undef FLX_COMPUTE

}  // namespace flx::detail

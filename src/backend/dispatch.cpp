// The dispatch layer (backend.hpp): the only code that calls a backend's
// tables. Loading them and the errors are in backend_tables.cpp.
#include <array>
#include <atomic>
#include <string>

#include "backend/backend.hpp"
#include "backend/descriptors.hpp"
#include "backend/streams.hpp"
#include "backend_common/map_op_info.hpp"
#include "backend_common/rule_info.hpp"
#include "devices/log.hpp"
#include "flx/error.hpp"

namespace flx::detail {

int Backend::device_count() const { return core_->device_count(core_->ctx); }

flx_device_props Backend::device_props(int dev) const {
  flx_device_props p{};
  check(core_->device_props(core_->ctx, dev, &p), "device_props");
  return p;
}

// ---- memory ---------------------------------------------------------------------

flx_buffer Backend::alloc_failed(int dev, size_t bytes, int status) const {
  // Out of memory: let a backend that caches give its cache back, then try
  // once more (as PyTorch's caching allocator does).
  flx_buffer buf = nullptr;
  if (status == FLX_ERR_OUT_OF_MEMORY && release_cached(dev))
    status = core_->alloc(core_->ctx, dev, bytes, current_stream(id_, dev), &buf);
  check(status, "alloc");
  return buf;
}
bool Backend::release_cached(int dev) const noexcept {
  return FLX_HAS_FN(core_, flx_backend, release_cached) && core_->release_cached(core_->ctx, dev) == FLX_OK;
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
  const auto alloc = [this](size_t n) {
    void* p = nullptr;
    int st = core_->host_alloc(core_->ctx, n, &p);
    if (st == FLX_OK && !p && n) st = FLX_ERR_OUT_OF_MEMORY;
    check(st, "pinned host allocation");
    return p;
  };
  return pinned_->take(bytes, alloc, [this](void* p) { core_->host_free(core_->ctx, p); });
}
void Backend::host_free(void* p) const noexcept {
  pinned_->give(p, [this](void* q) { core_->host_free(core_->ctx, q); });
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

namespace {
using compute = flx_compute_table;

// The ABI minor of each map op code (map_ops::since), here so that the check
// on every map reads a table of this file.
constexpr auto kMapOpSince = [] {
  std::array<uint8_t, map_ops::kMaxOpCode> since{};
  for (int op = 0; op < map_ops::kMaxOpCode; ++op) since[size_t(op)] = uint8_t(map_ops::since(op));
  return since;
}();

const char* reduce_name(int32_t op) {
  switch (op) {
    case FLX_REDUCE_SUM: return "sum";
    case FLX_REDUCE_MAX: return "maximum";
    case FLX_REDUCE_MIN: return "minimum";
    case FLX_REDUCE_ARGMAX: return "argmax";
    case FLX_REDUCE_ARGMIN: return "argmin";
  }
  return "a reduction";
}
}  // namespace

void Backend::fill(int dev, flx_mem dst, DType t, size_t n, double value) const {
  run<&compute::fill>(compute_, {"fill", t}, dev, dst, int32_t(t), n, value);
}
void Backend::random(int dev, flx_mem dst, DType t, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
                     double a, double b) const {
  run<&compute::random>(compute_, {"random numbers", t}, dev, dst, int32_t(t), n, dist, seed, offset, a, b);
}
void Backend::cast(int dev, flx_mem dst, DType dst_t, flx_mem src, DType src_t, size_t n) const {
  run<&compute::cast>(compute_, {"element type conversion", src_t}, dev, dst, int32_t(dst_t), src, int32_t(src_t), n);
}
void Backend::map(int dev, flx_map_desc& d) const {
  const OpRef op = OpRef::map(d.op, d.in_dtype);
  // A code the backend's minor version does not know: refused here, since
  // the backend cannot tell it from a malformed descriptor.
  if (uint32_t(d.op) < kMapOpSince.size() && kMapOpSince[size_t(d.op)] > abi_minor_) [[unlikely]]
    op_code_too_new(op);
  canonicalize(d);
  run<&compute::map>(compute_, op, dev, &d);
}
void Backend::reduce(int dev, flx_reduce_desc& d) const {
  const OpRef op{reduce_name(d.op), d.dtype};
  const Scratch workspace = scratch<&compute::reduce_workspace>(compute_, op, dev, &d);
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  const int st = status<&compute::reduce>(compute_, op, dev, &d);
  d.workspace = {};  // freed with `workspace`: the descriptor must not point at it
  d.workspace_bytes = 0;
  check(st, op);
}
void Backend::gemm(int dev, const flx_gemm_desc& d) const { run<&compute::gemm>(compute_, {"matmul", d.dtype}, dev, &d); }
bool Backend::gemm_epilogue(int dev, const flx_gemm_epilogue_desc& d) const {
  // an older plugin, or one that fuses nothing
  if (fused_supports(dev, FLX_FUSED_GEMM_EPILOGUE, &d) != FLX_OK) return false;
  const int st = fused_run(dev, FLX_FUSED_GEMM_EPILOGUE, &d);
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
  run<&compute::gather>(compute_, {"gather", d.dtype}, dev, &d);
}
void Backend::scatter_add(int dev, const flx_index_desc& d) const {
  run<&compute::scatter_add>(compute_, {"scatter_add", d.dtype}, dev, &d);
}
void Backend::permute(int dev, const flx_permute_desc& d) const {
  run<&compute::permute>(compute_, {"permutedims", d.dtype}, dev, &d);
}
void Backend::softmax(int dev, const flx_softmax_desc& d) const {
  run<&compute::softmax>(compute_, {d.log ? "logsoftmax" : "softmax", d.dtype}, dev, &d);
}
void Backend::softmax_backward(int dev, const flx_softmax_desc& d) const {
  run<&compute::softmax_backward>(compute_, {d.log ? "the logsoftmax gradient" : "the softmax gradient", d.dtype}, dev,
                                  &d);
}
void Backend::optim_step(int dev, const flx_optim_desc& d) const {
  run<&compute::optim_step>(compute_, {"a fused optimiser step", d.dtype}, dev, &d);
}

void Backend::rule_step(int dev, const flx_rule_desc& d, const char* what) const {
  // A code this libflx does not list (since 0) counts as newer than any backend.
  const uint32_t since = rules::since(d.rule) ? rules::since(d.rule) : FLX_BACKEND_ABI_MINOR + 1;
  if (since > abi_minor_)
    not_implemented({what, d.dtype},
                    "predates rule code " + std::to_string(d.rule) + ", which came with ABI " +
                        std::to_string(FLX_BACKEND_ABI_MAJOR) + "." + std::to_string(since),
                    "Update the plugin, or move the tensors to a device whose backend has it");
  const OpRef op{what, d.dtype};
  run_fused<&compute::rule_step>(dev, FLX_FUSED_RULE_STEP, &d, op);
}

}  // namespace flx::detail

// The handle on a loaded backend and the one dispatch layer through which
// libflx calls it. Every call into a backend's tables goes through a method
// here: it supplies the stream (the current stream of the device on this
// thread, streams.hpp), makes descriptors canonical (descriptors.hpp),
// allocates workspaces, and turns a failed status into a typed flx::Error
// carrying the backend's message. Nothing else touches the tables (a test
// greps for it). Not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/streams.hpp"
#include "flx/backend.h"
#include "flx/device.hpp"
#include "flx/dtype.hpp"

namespace flx::detail {

struct TableInfo {
  std::string name;
  uint32_t version;
  std::vector<std::string> missing;  // functions this libflx knows that the table lacks
};

class Backend {
 public:
  // Check `core` (ABI major, sizes, the calls every backend must have) and
  // look up its op tables. Throws BackendUnavailable naming `origin` (the
  // plugin's path, or "built in") when it does not fit.
  Backend(BackendId id, const flx_backend* core, std::string origin);

  BackendId id() const { return id_; }
  const char* name() const { return core_->name; }
  std::string abi_version() const;  // "2.1": the ABI version the backend implements

  // ---- discovery
  // > 0 when usable; else 0 and *reason says why.
  int functional(std::string* reason) const;
  int device_count() const;
  flx_device_props device_props(int dev) const;
  // The op tables this backend provides, of those this libflx knows.
  std::vector<TableInfo> tables() const;

  // ---- memory: stream-ordered on the current stream
  flx_buffer alloc(int dev, size_t bytes) const {  // OutOfMemory when it cannot
    flx_buffer buf = nullptr;
    const int st = core_->alloc(core_->ctx, dev, bytes, current_stream(id_, dev), &buf);
    return st == FLX_OK ? buf : alloc_failed(dev, bytes, st);
  }
  void free(int dev, flx_buffer buf) const noexcept { core_->free(core_->ctx, dev, buf, current_stream(id_, dev)); }
  // Free memory allocated on stream `used_on` from the current stream: after
  // the work queued on used_on so far (through an event when they differ).
  void free_used_on(int dev, flx_buffer buf, flx_stream used_on) const noexcept {
    const flx_stream now = current_stream(id_, dev);
    if (used_on == now) [[likely]]
      core_->free(core_->ctx, dev, buf, now);
    else
      free_after_stream(dev, buf, used_on, now);
  }
  // The allocator's figures into *out; false when the backend does not
  // report them (minor 2).
  bool memory_info(int dev, flx_memory_info* out) const;
  void* host_address(int dev, flx_buffer buf) const;  // null when not host memory
  void* host_alloc(size_t bytes) const;               // pinned; OutOfMemory
  void host_free(void* p) const noexcept;

  // ---- streams and events
  flx_stream stream_create(int dev) const;
  void stream_destroy(int dev, flx_stream s) const noexcept;
  void synchronize(int dev) const;  // the current stream
  flx_event event_create(int dev) const;
  void event_destroy(int dev, flx_event e) const noexcept;
  void event_record(int dev, flx_event e) const;       // on the current stream
  void stream_wait_event(int dev, flx_event e) const;  // the current stream waits
  void event_synchronize(int dev, flx_event e) const;

  // ---- copies, on the current stream
  void copy_h2d(int dev, flx_mem dst, const void* src, size_t bytes) const;
  void copy_d2h(int dev, void* dst, flx_mem src, size_t bytes) const;
  void copy_d2d(int dev, flx_mem dst, flx_mem src, size_t bytes) const;
  // dst_dev and src_dev are devices of this backend; on src_dev's stream.
  void copy_peer(int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes) const;

  // ---- compute (the "compute" table), on the current stream
  void fill(int dev, flx_mem dst, DType t, size_t n, double value) const;
  void random(int dev, flx_mem dst, DType t, size_t n, int32_t dist, uint64_t seed, uint64_t offset, double a,
              double b) const;
  void cast(int dev, flx_mem dst, DType dst_t, flx_mem src, DType src_t, size_t n) const;
  // d as the frontend fills it (shape and strides of the output's dims);
  // made canonical here.
  void map(int dev, flx_map_desc& d) const;
  // d from reduce_desc() (descriptors.hpp); workspace allocated here.
  void reduce(int dev, flx_reduce_desc& d) const;
  void gemm(int dev, const flx_gemm_desc& d) const;
  // The GEMM with a fused epilogue (ABI minor 2, optional): true when the
  // backend ran it; false when it lacks gemm_epilogue or answered anything
  // but FLX_OK (the caller runs the unfused ops on the same device; a
  // failure other than FLX_ERR_UNSUPPORTED is logged once per backend).
  bool has_gemm_epilogue() const { return calls_.gemm_epilogue != nullptr; }
  bool gemm_epilogue(int dev, const flx_gemm_epilogue_desc& d) const;
  void gather(int dev, const flx_index_desc& d) const;
  void scatter_add(int dev, const flx_index_desc& d) const;
  void permute(int dev, const flx_permute_desc& d) const;  // from permute_desc()
  void softmax(int dev, const flx_softmax_desc& d) const;
  void softmax_backward(int dev, const flx_softmax_desc& d) const;
  void optim_step(int dev, const flx_optim_desc& d) const;

 private:
  void check(int status, const char* what) const {
    if (status != FLX_OK) [[unlikely]]
      fail(status, what);
  }
  [[noreturn]] void fail(int status, const char* what) const;
  void free_after_stream(int dev, flx_buffer buf, flx_stream used_on, flx_stream now) const noexcept;
  // After a failed alloc: release the backend's cache and try once more.
  flx_buffer alloc_failed(int dev, size_t bytes, int status) const;
  [[noreturn]] void missing(const char* op, const char* table, const char* function) const;

  BackendId id_;
  const flx_backend* core_;
  const flx_compute_table* compute_ = nullptr;  // null: the backend has none
  flx_compute_table calls_{};  // its calls; NULL where the table lacks them
  std::string origin_;
};

// The backend serving a device (loads and checks it on first use); throws
// BackendUnavailable when the backend or the device does not exist.
const Backend& backend_of(Device d);
// Make `core` serve devices of backend `id` (tests; programs that build a
// backend in). Throws when it does not fit or `id` already has one.
void register_backend(BackendId id, const flx_backend* core);

}  // namespace flx::detail

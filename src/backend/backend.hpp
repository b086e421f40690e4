// The handle on a loaded backend and the one dispatch layer through which
// libflx calls it. Every call into a backend's tables goes through a method
// here: it supplies the stream (the current stream of the device on this
// thread, streams.hpp), makes descriptors canonical (descriptors.hpp),
// allocates the scratch memory a call asks for (scratch.hpp), and turns a
// failed status into a typed flx::Error carrying the backend's message:
// NotImplemented for anything the backend cannot do (a table or call it
// lacks, FLX_ERR_UNSUPPORTED, an op code newer than its ABI minor). The
// tables are those declared in backends/backend_common/backend_tables.hpp; nothing
// else touches them (a test greps for it). Not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/pinned_pool.hpp"
#include "backend/scratch.hpp"
#include "backend/streams.hpp"
#include "backend_common/backend_tables.hpp"
#include "backend_common/fused_calls.hpp"
#include "flx/backend.h"
#include "flx/device.hpp"
#include "flx/dtype.hpp"

namespace flx::detail {

// The words for a backend status code (FLX_ERR_*), for messages.
const char* status_name(int status);

// An op as messages name it ("matmul", or a map op by its code, named only
// when a message needs it) and the element type it ran on (-1: none).
struct OpRef {
  const char* name;
  int32_t dtype = -1;
  int32_t map_op = -1;
  OpRef(const char* n, int32_t t = -1) : name(n), dtype(t) {}
  OpRef(const char* n, DType t) : name(n), dtype(int32_t(t)) {}
  static OpRef map(int32_t code, int32_t t) {
    OpRef op(nullptr, t);
    op.map_op = code;
    return op;
  }
  const char* label() const;  // "softsign"
};

// An op table of a backend as the dispatch layer reads it: a copy of the
// backend's table with the calls it lacks (an older, shorter table) NULL.
template <class T>
struct LoadedTable {
  bool served = false;  // false: the backend has no such table (every call NULL)
  T calls{};
};

// An op table a backend serves, for listings (flx-info).
struct TableInfo {
  std::string name;
  uint32_t version;
  std::vector<std::string> missing;  // required calls this libflx knows that the table lacks
  bool known = true;                 // false: a table this libflx has no declaration for
  bool listed = false;               // the backend's list_tables (minor 3) names it
};

namespace tables_detail {
template <class M>
struct member_of;
template <class C, class M>
struct member_of<M C::*> {
  using type = C;
};
// The table struct a call (a pointer to a field of it) belongs to.
template <auto Field>
using table_of = typename member_of<decltype(Field)>::type;
}  // namespace tables_detail

class Backend {
 public:
  // Check `core` (ABI major, sizes, the calls every backend must have) and
  // look up its op tables. Throws BackendUnavailable naming `origin` (the
  // plugin's path, or "built in") when it does not fit.
  Backend(BackendId id, const flx_backend* core, std::string origin);

  BackendId id() const { return id_; }
  const char* name() const { return core_->name; }
  std::string abi_version() const;  // "2.1": the ABI version the backend implements
  uint32_t abi_minor() const { return abi_minor_; }

  // ---- discovery
  // > 0 when usable; else 0 and *reason says why.
  int functional(std::string* reason) const;
  int device_count() const;
  flx_device_props device_props(int dev) const;
  // The op tables this backend serves: those of FLX_OP_TABLES it has, then
  // any other it lists (list_tables, minor 3).
  std::vector<TableInfo> tables() const;

  // ---- op tables (declared in backends/backend_common/backend_tables.hpp)
  // Table T of FLX_OP_TABLES, looked up when the backend was loaded.
  template <class T>
  const LoadedTable<T>& table() const {
    return slot(std::type_identity<T>{});
  }
  // Any declared table, looked up now: one this libflx keeps no slot for (a
  // test's, an extension's).
  template <class T>
  LoadedTable<T> look_up() const {
    LoadedTable<T> t;
    t.served = load_table(abi::Decl<T>::info, &t.calls, sizeof t.calls);
    return t;
  }
  // Whether this backend has call Field (&flx_compute_table::gemm_epilogue).
  template <auto Field>
  bool has() const {
    return table<tables_detail::table_of<Field>>().calls.*Field != nullptr;
  }
  // Call Field of t (a table of this backend) with (ctx, dev, args..., the
  // current stream). NotImplemented naming `op` when t lacks the call or the
  // backend answers FLX_ERR_UNSUPPORTED; a typed error for other failures.
  template <auto Field, class T, class... A>
  void run(const LoadedTable<T>& t, OpRef op, int dev, A... args) const {
    check(status<Field>(t, op, dev, args...), op);
  }
  // The scratch memory (scratch.hpp) that Query, a call's optional
  // *_workspace or *_reserve_size call taking (ctx, dev, args..., uint64_t*),
  // asks for; none when t lacks Query or it asks for 0 bytes.
  template <auto Query, class T, class... A>
  Scratch scratch(const LoadedTable<T>& t, OpRef op, int dev, A... args) const {
    uint64_t bytes = 0;
    if (const auto query = t.calls.*Query) check(query(core_->ctx, dev, args..., &bytes), op);
    return Scratch(*this, dev, bytes);
  }

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
  // Give the device allocator's cached blocks back; false when the backend
  // keeps no cache it can release.
  bool release_cached(int dev) const noexcept;
  void* host_address(int dev, flx_buffer buf) const;  // null when not host memory
  // Pinned host memory, cached (pinned_pool.hpp): host_free keeps the block
  // for the next host_alloc of its size class. OutOfMemory when it cannot.
  void* host_alloc(size_t bytes) const;
  void host_free(void* p) const noexcept;
  size_t host_cached_bytes() const { return pinned_->cached_bytes(); }

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

  // ---- fused ops (backend_fused.h), by code: through the backend's fused
  // table (minor 14), else the older call FLX_FUSED_OPS names
  // (backend_common/fused_calls.hpp), so that a plugin built for an older
  // minor runs them as before. Each answers as the backend does: FLX_OK, or
  // FLX_ERR_UNSUPPORTED where it has no kernel for the case (d may be null
  // for supports: any case at all).
  int fused_supports(int dev, int32_t op, const void* d) const;
  int fused_scratch_bytes(int dev, int32_t op, const void* d, int32_t kind, uint64_t* bytes) const;
  int fused_run(int dev, int32_t op, const void* d) const;  // on the current stream
  // The op's kernel runs for d, else NotImplemented naming Field, the
  // older call that FLX_FUSED_OPS names for it, as a backend lacking that
  // call is named.
  template <auto Field>
  void require_fused(int dev, int32_t op, const void* d, OpRef ref) const {
    if (fused_supports(dev, op, d) == FLX_OK) [[likely]]
      return;
    using T = tables_detail::table_of<Field>;
    lacks(abi::Decl<T>::info, call_offset<Field>(), table<T>().served, ref);
  }
  // The op on d, which the backend must run: require_fused, then a typed
  // error for any answer but FLX_OK.
  template <auto Field>
  void run_fused(int dev, int32_t op, const void* d, OpRef ref) const {
    require_fused<Field>(dev, op, d, ref);
    check(fused_run(dev, op, d), ref);
  }

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
  bool gemm_epilogue(int dev, const flx_gemm_epilogue_desc& d) const;
  void gather(int dev, const flx_index_desc& d) const;
  void scatter_add(int dev, const flx_index_desc& d) const;
  void permute(int dev, const flx_permute_desc& d) const;  // from permute_desc()
  void softmax(int dev, const flx_softmax_desc& d) const;
  void softmax_backward(int dev, const flx_softmax_desc& d) const;
  void optim_step(int dev, const flx_optim_desc& d) const;
  // One optimiser rule's step (backend_rules.h; minor 12, optional). A
  // backend without rule_step, or older than the rule, raises
  // NotImplemented naming `what` ("NAdam's step").
  bool has_rule_step() const { return fused_supports(0, FLX_FUSED_RULE_STEP, nullptr) == FLX_OK; }
  void rule_step(int dev, const flx_rule_desc& d, const char* what) const;

  // ---- collectives (the "comm" table, ABI minor 4; backend.h has the
  // protocol: comm_id on rank 0, comm_init everywhere, comm_poll until ready)
  bool has_comm() const { return comm_.served; }  // the backend serves the comm table
  flx_comm_id comm_id() const;                     // NotImplemented without the table
  flx_comm comm_init(int dev, int nranks, int rank, const flx_comm_id& id) const;
  // true once ready; BackendError carrying the backend's message on an
  // async error (then only comm_abort is left).
  bool comm_poll(flx_comm c) const;
  // On the current stream of dev; d.struct_size is set here.
  void collective(int dev, flx_comm c, const flx_collective_desc& d) const;
  // Both free c and never throw (a backend without the table has no
  // communicator to free); comm_destroy waits for c's queued work, and a
  // failure is logged once per backend.
  void comm_abort(flx_comm c) const noexcept;
  void comm_destroy(flx_comm c) const noexcept;

  // ---- convolution, pooling, normalisation (the "dnn" table, ABI minor 5;
  // recurrent layers, minor 6; attention, minor 7).
  // NotImplemented naming the op when the backend lacks the table or the
  // call, or answers FLX_ERR_UNSUPPORTED (a dtype it lacks). struct_size is
  // set here, and conv's workspace is allocated here for the call.
  bool has_dnn() const { return dnn_.served; }
  // pass FLX_CONV_BACKWARD (both gradients in one call, minor 13) only
  // where has_conv_backward().
  void conv(int dev, flx_conv_desc d, flx_conv_pass pass) const;
  bool has_conv_backward() const { return fused_supports(0, FLX_FUSED_CONV_BACKWARD, nullptr) == FLX_OK; }
  // The reserve a training pool_forward of d fills for pool_backward (none
  // when the backend asks for none); the op keeps it with its record.
  Scratch pool_reserve(int dev, const flx_pool_desc& d) const;
  void pool_forward(int dev, flx_pool_desc d) const;
  void pool_backward(int dev, flx_pool_desc d) const;
  void batchnorm_forward(int dev, flx_batchnorm_desc d) const;
  void batchnorm_backward(int dev, flx_batchnorm_desc d) const;
  // Recurrent layers over a sequence (ABI minor 6, optional; whether the
  // backend has them: ops::use_kernel): the reserve a training rnn_forward of d fills,
  // in *reserve, and the forward itself: false, with nothing queued, when
  // the backend answered FLX_ERR_UNSUPPORTED (the caller runs the layer
  // with the compute table), a typed error for other failures. The backward
  // must run where the forward did.
  bool rnn_reserve(int dev, const flx_rnn_desc& d, Scratch* reserve) const;
  bool rnn_forward(int dev, flx_rnn_desc d) const;
  void rnn_backward(int dev, flx_rnn_desc d) const;
  // Attention without its scores (ABI minor 7, optional; whether the
  // backend has the calls: ops::use_kernel): the forward and backward with their workspace
  // allocated here: false, with nothing queued, when the backend answered
  // FLX_ERR_UNSUPPORTED (the caller runs attention in tiles through the
  // compute table), a typed error for other failures. A backward is asked
  // of the backend whose forward ran.
  bool attention_forward(int dev, flx_attention_desc d) const;
  bool attention_backward(int dev, flx_attention_desc d) const;
  // Group normalisation (ABI minor 10, optional): the forward answers false,
  // with nothing queued, when the backend lacks the calls or declines the
  // case (the caller composes the layer from batchnorm and maps); the
  // backward is asked of the backend whose forward ran.
  bool groupnorm_forward(int dev, flx_groupnorm_desc d) const;
  void groupnorm_backward(int dev, flx_groupnorm_desc d) const;

  // ---- core calls of minor 4 (optional)
  bool has_event_query() const { return FLX_HAS_FN(core_, flx_backend, event_query); }
  bool event_query(int dev, flx_event e) const;  // true once done; NotImplemented when the backend lacks it
  // The device pointer of m for libraries of the backend's runtime (CUDA-aware
  // MPI); nullptr when the backend has no such call or m has no device pointer.
  void* device_address(int dev, flx_mem m) const;

  // ---- core call of minor 9 (optional)
  // How dev runs op (a flx_precision_op) in half dtype `dtype` into *out;
  // false when the backend does not say (no call, or an op it does not know).
  bool precision_path(int dev, int32_t dtype, int32_t op, flx_precision_path* out) const;

 private:
  bool attention(int dev, flx_attention_desc d, int32_t pass) const;
  bool rnn_knows(const flx_rnn_desc& d) const;
  // The older tables, as FLX_FUSED_OPS reads them for a backend without a
  // fused table.
  abi::FusedTables older_tables() const {
    return {dnn_.served ? &dnn_.calls : nullptr, compute_.served ? &compute_.calls : nullptr};
  }
  void check(int status, OpRef op) const {
    if (status != FLX_OK) [[unlikely]]
      fail(status, op);
  }
  template <auto Field, class T, class... A>
  int status(const LoadedTable<T>& t, OpRef op, int dev, A... args) const {
    const auto fn = t.calls.*Field;
    if (!fn) [[unlikely]]
      lacks(abi::Decl<T>::info, call_offset<Field>(), t.served, op);
    return fn(core_->ctx, dev, args..., current_stream(id_, dev));
  }
  // Call Field of t with (ctx, args...): the calls that take no device and
  // stream (the comm table's). NotImplemented naming `op` when t lacks it.
  template <auto Field, class T, class... A>
  int status_no_stream(const LoadedTable<T>& t, OpRef op, A... args) const {
    const auto fn = t.calls.*Field;
    if (!fn) [[unlikely]]
      lacks(abi::Decl<T>::info, call_offset<Field>(), t.served, op);
    return fn(core_->ctx, args...);
  }
  template <auto Field>
  static size_t call_offset() {
    const tables_detail::table_of<Field> t{};
    return size_t(reinterpret_cast<const char*>(&(t.*Field)) - reinterpret_cast<const char*>(&t));
  }
  // Copy the backend's table `decl` into `calls` (size bytes, zeroed); false
  // when it has none this libflx can read.
  bool load_table(const abi::TableDecl& decl, void* calls, size_t size) const;
  [[noreturn]] void fail(int status, OpRef op) const;
  // NotImplemented: the table `decl` or its call at `offset` is missing.
  [[noreturn]] void lacks(const abi::TableDecl& decl, size_t offset, bool served, OpRef op) const;
  [[noreturn]] void op_code_too_new(OpRef op) const;
  [[noreturn]] void not_implemented(OpRef op, const std::string& what, const char* advice) const;
  void free_after_stream(int dev, flx_buffer buf, flx_stream used_on, flx_stream now) const noexcept;
  // After a failed alloc: release the backend's cache and try once more.
  flx_buffer alloc_failed(int dev, size_t bytes, int status) const;

  BackendId id_;
  const flx_backend* core_;
  uint32_t abi_minor_;
  std::string origin_;
  std::shared_ptr<PinnedPool> pinned_ = std::make_shared<PinnedPool>();
  // One slot per table of FLX_OP_TABLES (compute_, ...) and its accessor.
#define FLX_TABLE_SLOT_(id, T, ...) \
  LoadedTable<T> id##_;             \
  const LoadedTable<T>& slot(std::type_identity<T>) const { return id##_; }
  FLX_OP_TABLES(FLX_TABLE_SLOT_)
#undef FLX_TABLE_SLOT_
};

// The backend serving a device (loads and checks it on first use); throws
// BackendUnavailable when the backend or the device does not exist.
const Backend& backend_of(Device d);
// Make `core` serve devices of backend `id` (tests; programs that build a
// backend in). Throws when it does not fit or `id` already has one.
void register_backend(BackendId id, const flx_backend* core);

}  // namespace flx::detail

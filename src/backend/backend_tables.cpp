// Loading a backend's tables and saying what it lacks (backend.hpp): the
// checks of its core table, the lookup of the op tables declared in
// backends/backend_common/backend_tables.hpp, the listing flx-info prints, and the
// errors of failed or impossible calls.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "backend/backend.hpp"
#include "backend_common/map_op_info.hpp"
#include "flx/error.hpp"

namespace flx::detail {

const char* status_name(int s) {
  switch (s) {
    case FLX_ERR_OUT_OF_MEMORY: return "out of memory";
    case FLX_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FLX_ERR_UNSUPPORTED: return "unsupported";
    case FLX_ERR_DEVICE: return "device error";
  }
  return "error";
}

namespace {

// Whether the call at `offset` of a table of `size` bytes (as served) is set.
bool call_set(const void* table, size_t size, size_t offset) {
  void* p = nullptr;
  if (offset + sizeof p <= size) std::memcpy(&p, static_cast<const char*>(table) + offset, sizeof p);
  return p != nullptr;
}

// The core calls needed to load a plugin and ask whether it works.
struct DiscoveryCall {
  const char* name;
  size_t offset;
};
constexpr DiscoveryCall kDiscoveryCalls[] = {{"functional", offsetof(flx_backend, functional)},
                                             {"device_count", offsetof(flx_backend, device_count)},
                                             {"last_error", offsetof(flx_backend, last_error)},
                                             {"get_table", offsetof(flx_backend, get_table)}};

std::string abi(uint32_t minor) { return std::to_string(FLX_BACKEND_ABI_MAJOR) + "." + std::to_string(minor); }

}  // namespace

Backend::Backend(BackendId id, const flx_backend* core, std::string origin)
    : id_(id), core_(core), abi_minor_(core ? core->abi_minor : 0), origin_(std::move(origin)) {
  FLX_CHECK(core, BackendUnavailable, backend_name(id), " backend (", origin_, ") returned no table");
  FLX_CHECK(core->abi_major == FLX_BACKEND_ABI_MAJOR, BackendUnavailable, backend_name(id), " backend (", origin_,
            ") was built for backend ABI ", core->abi_major, ".x; this libflx needs ", FLX_BACKEND_ABI_MAJOR,
            ".x. Install the plugin that came with this libflx");
  const size_t min_size = offsetof(flx_backend, copy_peer) + sizeof(core->copy_peer);
  FLX_CHECK(core->struct_size >= min_size, BackendUnavailable, backend_name(id), " backend (", origin_,
            ") has a core table of ", core->struct_size, " bytes; ABI ", FLX_BACKEND_ABI_MAJOR, ".0 needs at least ",
            min_size, ". The plugin is damaged or was built against a different flx/backend.h");
  FLX_CHECK(core->name, BackendUnavailable, backend_name(id), " backend (", origin_, ") has no name");
  for (const DiscoveryCall& call : kDiscoveryCalls)
    FLX_CHECK(call_set(core, core->struct_size, call.offset), BackendUnavailable, backend_name(id), " backend (",
              origin_, ") lacks the core call `", call.name, "`, which every backend must provide");
#define FLX_LOAD_SLOT_(id, T, ...) id##_.served = load_table(abi::Decl<T>::info, &id##_.calls, sizeof id##_.calls);
  FLX_OP_TABLES(FLX_LOAD_SLOT_)
#undef FLX_LOAD_SLOT_
}

bool Backend::load_table(const abi::TableDecl& decl, void* calls, size_t size) const {
  struct Header {  // what every op table begins with
    uint32_t struct_size, version;
  };
  std::memset(calls, 0, size);
  const void* t = core_->get_table(core_->ctx, decl.name, decl.version);
  if (!t) return false;
  Header h;
  std::memcpy(&h, t, sizeof h);
  if (h.struct_size < sizeof h || h.version != decl.version) return false;  // not a table this libflx can read
  std::memcpy(calls, t, std::min<size_t>(h.struct_size, size));
  return true;
}

int Backend::functional(std::string* reason) const {
  char buf[512] = {0};
  int score = core_->functional(core_->ctx, buf, sizeof buf);
  if (reason) *reason = buf;
  if (score > 0) {  // a working backend has every required core call of its minor
    const abi::TableDecl& core = abi::Decl<flx_backend>::info;
    for (size_t i = 0; i < core.ncalls; ++i) {
      const abi::CallDecl& c = core.calls[i];
      if (c.need != abi::Need::required || c.since > abi_minor_ || call_set(core_, core_->struct_size, c.offset))
        continue;
      if (reason)
        *reason = std::string(name()) + " backend (" + origin_ + ", ABI " + abi_version() +
                  ") reports it works but lacks the core call `" + c.name + "`, which every backend of ABI " +
                  abi(c.since) + " or later must provide; the plugin is incomplete";
      return 0;
    }
  }
  return score;
}

std::string Backend::abi_version() const { return std::to_string(core_->abi_major) + "." + std::to_string(abi_minor_); }

std::vector<TableInfo> Backend::tables() const {
  std::vector<TableInfo> out;
  auto add = [&](const abi::TableDecl& decl, bool served, const void* calls, size_t size) {
    if (!served) return;
    TableInfo t{decl.name, decl.version, {}, true};
    for (size_t i = 0; i < decl.ncalls; ++i)
      if (decl.calls[i].need == abi::Need::required && !call_set(calls, size, decl.calls[i].offset))
        t.missing.push_back(decl.calls[i].name);
    out.push_back(std::move(t));
  };
#define FLX_LIST_SLOT_(id, T, ...) add(abi::Decl<T>::info, id##_.served, &id##_.calls, sizeof id##_.calls);
  FLX_OP_TABLES(FLX_LIST_SLOT_)
#undef FLX_LIST_SLOT_
  uint32_t n = 0;
  const flx_table_ref* refs = FLX_HAS_FN(core_, flx_backend, list_tables) ? core_->list_tables(core_->ctx, &n) : nullptr;
  for (uint32_t i = 0; refs && i < n; ++i) {
    if (!refs[i].name) continue;
    auto found = std::find_if(out.begin(), out.end(), [&](const TableInfo& t) {
      return t.name == refs[i].name && t.version == refs[i].version;
    });
    if (found == out.end()) found = out.insert(out.end(), TableInfo{refs[i].name, refs[i].version, {}, false});
    found->listed = true;
  }
  return out;
}

// ---- errors -------------------------------------------------------------------------

const char* OpRef::label() const {
  if (name) return name;
  const char* op = map_ops::info(map_op).name;
  return op ? op : "an elementwise op";
}

void Backend::fail(int status, OpRef op) const {
  const char* msg = core_->last_error(core_->ctx);
  if (status == FLX_ERR_UNSUPPORTED)
    not_implemented(op, std::string("answered unsupported: ") + msg,
                    "Use another element type, or move the tensors to a device whose backend supports it");
  if (status == FLX_ERR_OUT_OF_MEMORY)
    FLX_THROW(OutOfMemory, name(), " backend: ", op.label(), " failed (", status_name(status), "): ", msg,
              "; free tensors that are no longer needed or use smaller sizes (a smaller batch)");
  FLX_THROW(BackendError, name(), " backend: ", op.label(), " failed (", status_name(status), "): ", msg);
}

void Backend::not_implemented(OpRef op, const std::string& what, const char* advice) const {
  std::string of;
  if (op.dtype >= 0 && op.dtype <= int32_t(DType::Bool)) of = " of " + std::string(dtype_name(DType(op.dtype)));
  FLX_THROW(NotImplemented, op.label(), of, " cannot run on ", name(), ": its backend (", origin_, ", ABI ",
            abi_version(), ") ", what, ". ", advice);
}

void Backend::lacks(const abi::TableDecl& decl, size_t offset, bool served, OpRef op) const {
  constexpr const char* kUpdate = "Update the plugin, or move the tensors to a device whose backend has it";
  const std::string table = "\"" + std::string(decl.name) + "\" table";
  if (!served)
    not_implemented(op,
                    "provides no " + table + " version " + std::to_string(decl.version) +
                        (decl.since > abi_minor_ ? " (the table came with ABI " + abi(decl.since) + ")" : ""),
                    kUpdate);
  const abi::CallDecl* call = nullptr;
  for (size_t i = 0; i < decl.ncalls && !call; ++i)
    if (decl.calls[i].offset == offset) call = &decl.calls[i];
  const std::string call_name = call ? call->name : "?";
  const std::string why = !call ? ""
                          : call->since > abi_minor_
                              ? " (" + call_name + " came with ABI " + abi(call->since) + ")"
                          : call->need == abi::Need::optional ? " (an optional call it does not provide)"
                                                              : " (a required call: the plugin is incomplete)";
  not_implemented(op, "has no `" + call_name + "` in its " + table + why, kUpdate);
}

void Backend::op_code_too_new(OpRef op) const {
  not_implemented(op,
                  "predates op code " + std::to_string(op.map_op) + " (" + op.label() + "), which came with ABI " +
                      abi(uint32_t(map_ops::since(op.map_op))),
                  "Update the plugin, or move the tensors to a device whose backend has it");
}

}  // namespace flx::detail

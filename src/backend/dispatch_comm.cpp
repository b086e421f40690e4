// The dispatch layer's collectives (the "comm" table, ABI minor 4) and the
// optional core calls of minor 4 (event_query, device_address) and 9
// (precision_path): see backend.hpp. The rest of the dispatch layer is in
// dispatch.cpp.
#include <atomic>
#include <string>

#include "backend/backend.hpp"
#include "backend/streams.hpp"
#include "devices/log.hpp"
#include "flx/error.hpp"

namespace flx::detail {

namespace {
using comm = flx_comm_table;

// "allreduce (sum)", as messages name a collective.
const char* collective_name(const flx_collective_desc& d) {
  switch (d.kind) {
    case FLX_COLLECTIVE_BROADCAST: return "broadcast";
    case FLX_COLLECTIVE_ALLREDUCE:
    case FLX_COLLECTIVE_REDUCE: {
      static const char* const names[2][4] = {
          {"allreduce (sum)", "allreduce (max)", "allreduce (min)", "allreduce (avg)"},
          {"reduce (sum)", "reduce (max)", "reduce (min)", "reduce (avg)"}};
      const int k = d.kind == FLX_COLLECTIVE_REDUCE;
      return d.op >= 0 && d.op < 4 ? names[k][d.op] : k ? "reduce" : "allreduce";
    }
  }
  return "a collective";
}
}  // namespace

flx_comm_id Backend::comm_id() const {
  const OpRef op{"comm_id"};
  flx_comm_id id{};
  check(status_no_stream<&comm::comm_id>(comm_, op, &id), op);
  return id;
}

flx_comm Backend::comm_init(int dev, int nranks, int rank, const flx_comm_id& id) const {
  const OpRef op{"comm_init"};
  flx_comm c = nullptr;
  check(status_no_stream<&comm::comm_init>(comm_, op, dev, int32_t(nranks), int32_t(rank), &id, &c), op);
  FLX_CHECK(c, BackendError, name(), " backend: comm_init reported success but returned no communicator");
  return c;
}

bool Backend::comm_poll(flx_comm c) const {
  const OpRef op{"comm_poll"};
  int32_t ready = 0;
  check(status_no_stream<&comm::comm_poll>(comm_, op, c, &ready), op);
  return ready != 0;
}

void Backend::collective(int dev, flx_comm c, const flx_collective_desc& d) const {
  flx_collective_desc desc = d;
  desc.struct_size = sizeof desc;
  run<&comm::collective>(comm_, {collective_name(desc), desc.dtype}, dev, c, &desc);
}

void Backend::comm_abort(flx_comm c) const noexcept {
  // No table, no communicator: nothing a backend without it could have made.
  if (const auto fn = comm_.calls.comm_abort) (void)fn(core_->ctx, c);
}

void Backend::comm_destroy(flx_comm c) const noexcept {
  const auto fn = comm_.calls.comm_destroy;
  if (!fn) return;
  const int st = fn(core_->ctx, c);
  // The communicator is gone either way; a failure (its work failed, or the
  // library could not finalize it) is reported once per backend.
  if (st != FLX_OK) {
    static std::atomic<bool> reported[backend_id_count];
    if (!reported[size_t(id_)].exchange(true))
      log_warn_box({std::string("flx: ") + name() + " backend: destroying a communicator failed (" +
                        status_name(st) + "): " + core_->last_error(core_->ctx),
                    "It was freed anyway; later failures of comm_destroy are not reported."});
  }
}

// ---- core calls of minor 4 ---------------------------------------------------------

bool Backend::event_query(int dev, flx_event e) const {
  const OpRef op{"event_query"};
  if (!has_event_query())
    not_implemented(op,
                    abi_minor_ < 4 ? "predates the core call `event_query`, which came with ABI 2.4"
                                   : "has no core call `event_query` (optional, from ABI 2.4)",
                    "Wait with event_synchronize instead, or update the plugin");
  int32_t done = 0;
  check(core_->event_query(core_->ctx, dev, e, &done), op);
  return done != 0;
}

void* Backend::device_address(int dev, flx_mem m) const {
  if (!FLX_HAS_FN(core_, flx_backend, device_address)) return nullptr;
  void* p = nullptr;
  check(core_->device_address(core_->ctx, dev, m, &p), "device_address");
  return p;
}

// ---- core call of minor 9 ------------------------------------------------------------

bool Backend::precision_path(int dev, int32_t dtype, int32_t op, flx_precision_path* out) const {
  // Only a plugin of minor 9 or later has the call (its table must hold it too).
  if (abi_minor_ < 9 || !FLX_HAS_FN(core_, flx_backend, precision_path)) return false;
  *out = flx_precision_path{};
  out->struct_size = sizeof *out;
  out->dtype = dtype;
  out->op = op;
  const int st = core_->precision_path(core_->ctx, dev, out);
  if (st == FLX_ERR_INVALID_ARGUMENT) return false;  // an op (or dtype) this backend does not know
  check(st, "precision_path");
  out->how[sizeof out->how - 1] = '\0';
  return true;
}

}  // namespace flx::detail

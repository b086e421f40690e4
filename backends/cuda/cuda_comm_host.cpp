// Host-only: the live communicators and a collective's checks (see
// cuda_comm_host.hpp).
#include "cuda_comm_host.hpp"

#include <cstddef>
#include <cstdio>

#include "backend_common/dtype_info.hpp"

namespace flx_cuda {

flx_comm CommRegistry::add(const CommEntry& e) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_++;
  live_[id] = e;
  return reinterpret_cast<flx_comm>(static_cast<uintptr_t>(id));
}

bool CommRegistry::find(flx_comm c, CommEntry* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c)));
  if (it == live_.end()) return false;
  *out = it->second;
  return true;
}

void CommRegistry::set_ready(flx_comm c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c)));
  if (it != live_.end()) it->second.ready = true;
}

bool CommRegistry::take(flx_comm c, CommEntry* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c)));
  if (it == live_.end()) return false;
  *out = it->second;
  live_.erase(it);
  return true;
}

size_t CommRegistry::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

CommRegistry& comms() {
  static CommRegistry& r = *new CommRegistry;  // never destroyed (see the header)
  return r;
}

std::string unknown_comm(flx_comm c, const char* what) {
  char handle[32];
  std::snprintf(handle, sizeof handle, "%p", static_cast<void*>(c));
  return std::string(what) + ": " + handle +
         " is not a live communicator of the CUDA backend (never made by comm_init, or aborted or destroyed "
         "already)";
}

size_t collective_elem_bytes(int32_t dtype) { return flx::backend_common::dtype_bytes(dtype); }

namespace {
const char* op_name(int32_t op) {
  static const char* const names[] = {"SUM", "MAX", "MIN", "AVG"};
  return op >= 0 && op < 4 ? names[op] : "?";
}
bool reduces(int32_t kind) { return kind == FLX_COLLECTIVE_ALLREDUCE || kind == FLX_COLLECTIVE_REDUCE; }
}  // namespace

std::string check_collective_desc(const flx_collective_desc* d, int* status) {
  *status = FLX_ERR_INVALID_ARGUMENT;
  if (!d) return "collective: the descriptor is a null pointer";
  constexpr size_t need = offsetof(flx_collective_desc, recv) + sizeof(flx_mem);
  if (d->struct_size < need)
    return "collective: the descriptor's struct_size is " + std::to_string(d->struct_size) +
           " bytes; version 1 of the comm table needs at least " + std::to_string(need);
  if (d->kind < FLX_COLLECTIVE_ALLREDUCE || d->kind > FLX_COLLECTIVE_REDUCE)
    return "collective: unknown kind " + std::to_string(d->kind) +
           " (expected ALLREDUCE 0, BROADCAST 1 or REDUCE 2)";
  if (collective_elem_bytes(d->dtype) == 0)
    return "collective: unknown dtype " + std::to_string(d->dtype) + " (expected a flx_dtype, 0 to 7)";
  if (reduces(d->kind)) {
    if (d->op < FLX_COMM_SUM || d->op > FLX_COMM_AVG)
      return "collective: unknown op " + std::to_string(d->op) + " (expected SUM 0, MAX 1, MIN 2 or AVG 3)";
    if (d->dtype == FLX_BOOL && (d->op == FLX_COMM_SUM || d->op == FLX_COMM_AVG)) {
      *status = FLX_ERR_UNSUPPORTED;
      return std::string("collective: ") + op_name(d->op) +
             " of Bool is not defined (MAX and MIN are: any and all); convert to an integer type first";
    }
  }
  *status = FLX_OK;
  return {};
}

bool collective_reads_send(const flx_collective_desc& d, int32_t rank) {
  return d.kind != FLX_COLLECTIVE_BROADCAST || rank == d.root;
}
bool collective_writes_recv(const flx_collective_desc& d, int32_t rank) {
  return d.kind != FLX_COLLECTIVE_REDUCE || rank == d.root;
}

std::string check_collective_ranks(const flx_collective_desc& d, const CommEntry& e) {
  if (d.kind != FLX_COLLECTIVE_ALLREDUCE && (d.root < 0 || d.root >= e.nranks))
    return "collective: root " + std::to_string(d.root) + " is not a rank of the communicator (0 to " +
           std::to_string(e.nranks - 1) + ")";
  // NCCL works in place when send and recv are the same address; memory
  // that overlaps otherwise would be read after it was written.
  if (collective_reads_send(d, e.rank) && collective_writes_recv(d, e.rank) && d.send.buf && d.send.buf == d.recv.buf &&
      d.send.offset != d.recv.offset) {
    uint64_t bytes = 0;
    const uint64_t gap = d.send.offset > d.recv.offset ? d.send.offset - d.recv.offset : d.recv.offset - d.send.offset;
    if (!__builtin_mul_overflow(d.count, uint64_t(collective_elem_bytes(d.dtype)), &bytes) && gap < bytes)
      return "collective: send (offset " + std::to_string(d.send.offset) + ") and recv (offset " +
             std::to_string(d.recv.offset) + ") overlap in the same buffer without being the same memory; pass " +
             "the same memory for in place, or buffers that do not overlap";
  }
  return {};
}

}  // namespace flx_cuda

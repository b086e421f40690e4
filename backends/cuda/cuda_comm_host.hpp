// The host-only half of the CUDA plugin's comm table (cuda_comm.cpp): the
// table of live communicators behind the ABI's flx_comm handles, and the
// checks of a collective's descriptor that come before NCCL sees it. No
// CUDA or NCCL header: tested on the host by tests/cuda/test_cuda_comm_host.cpp.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "flx/backend.h"

namespace flx_cuda {

// One process's membership in a communicator: the NCCL communicator
// (ncclComm_t, kept as void* here) and what the plugin checks calls against.
struct CommEntry {
  void* nccl = nullptr;
  int dev = 0;
  int32_t nranks = 0, rank = 0;
  bool ready = false;  // comm_poll (or a collective) saw its set-up done
};

// flx_comm handles are numbers, never reused, so a stale or made-up handle
// is found missing, never taken for another communicator.
class CommRegistry {
 public:
  flx_comm add(const CommEntry& e);
  // A copy of c's entry into *out; false when c is not a live handle.
  bool find(flx_comm c, CommEntry* out) const;
  void set_ready(flx_comm c);
  // Removes c and gives its entry; false when c is not a live handle. Once
  // taken, no other call finds c.
  bool take(flx_comm c, CommEntry* out);
  size_t live() const;

 private:
  mutable std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, CommEntry> live_;
};

// The plugin's registry, never destroyed (communicators may outlive main).
CommRegistry& comms();

// "<what>: <handle> is not a live communicator of the CUDA backend ...",
// the message for a handle find or take did not know.
std::string unknown_comm(flx_comm c, const char* what);

// Bytes per element of a collective's dtype; 0 for a value that is none.
size_t collective_elem_bytes(int32_t dtype);

// The checks that need no communicator, in this order: d's size (it must
// hold every field of version 1), the kind, the dtype, the op (ALLREDUCE
// and REDUCE), then SUM and AVG of Bool. Empty when d passes; otherwise
// the message, and *status is FLX_ERR_INVALID_ARGUMENT (or
// FLX_ERR_UNSUPPORTED for Bool).
std::string check_collective_desc(const flx_collective_desc* d, int* status);

// The checks against the communicator: root within its ranks (BROADCAST,
// REDUCE), and send and recv either the same memory (in place) or not
// overlapping. Empty when they pass (always FLX_ERR_INVALID_ARGUMENT else).
std::string check_collective_ranks(const flx_collective_desc& d, const CommEntry& e);

// Whether this rank reads send / writes recv for d: BROADCAST reads send on
// root only, REDUCE writes recv on root only, ALLREDUCE both everywhere.
bool collective_reads_send(const flx_collective_desc& d, int32_t rank);
bool collective_writes_recv(const flx_collective_desc& d, int32_t rank);

}  // namespace flx_cuda

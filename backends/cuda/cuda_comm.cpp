// The comm table (backend ABI minor 4) on NCCL: every communicator is
// non-blocking (ncclConfig_t.blocking = 0), so comm_init returns while the
// ranks still find each other and comm_poll reports when they have. NCCL is
// opened by the first comm_id or comm_init (cuda_nccl_lib.cpp); handles are
// checked against the live communicators (cuda_comm_host.hpp) before NCCL
// sees them.
//
// NCCL's rule for non-blocking communicators: a call that returns
// ncclInProgress is finished only once ncclCommGetAsyncError stops saying
// ncclInProgress, and no other NCCL call may be made on the communicator
// (nor work queued on the stream it uses) before that. So a collective that
// answers ncclInProgress (the first one on a communicator, while NCCL
// connects the ranks) is polled here until it is queued, and
// ncclCommFinalize until the communicator is quiescent.
#include <cstring>
#include <string>
#include <thread>

#include "cuda_comm_host.hpp"
#include "cuda_common.hpp"
#include "cuda_device.hpp"
#include "cuda_nccl_lib.hpp"

namespace flx_cuda {

static_assert(FLX_COMM_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "flx_comm_id holds an ncclUniqueId");
static_assert(sizeof(flx_comm_id) == sizeof(ncclUniqueId), "flx_comm_id holds an ncclUniqueId");

namespace {

ncclComm_t as_nccl(const CommEntry& e) { return static_cast<ncclComm_t>(e.nccl); }

std::string describe(const CommEntry& e) {
  return "NCCL communicator (rank " + std::to_string(e.rank) + " of " + std::to_string(e.nranks) +
         ", CUDA device " + std::to_string(e.dev) + ")";
}

// NCCL's result as an flx_status, with its message for last_error().
int nccl_fail(const NcclApi& api, ncclResult_t r, const std::string& what) {
  const int status = r == ncclInvalidArgument || r == ncclInvalidUsage ? FLX_ERR_INVALID_ARGUMENT : FLX_ERR_DEVICE;
  return fail(status, what + " failed: " + nccl_error(api, r));
}

// Polls ncclCommGetAsyncError until it says something other than
// ncclInProgress: what a call that answered ncclInProgress ended with.
ncclResult_t wait_in_progress(const NcclApi& api, ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (;;) {
    if (ncclResult_t r = api.comm_get_async_error(comm, &state); r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    std::this_thread::yield();
  }
}

// The entry of live communicator c into *e, or FLX_ERR_INVALID_ARGUMENT.
int look_up(flx_comm c, CommEntry* e, const char* what) {
  return comms().find(c, e) ? FLX_OK : fail(FLX_ERR_INVALID_ARGUMENT, unknown_comm(c, what));
}

}  // namespace

int comm_id(void*, flx_comm_id* out) {
  if (!out) return fail(FLX_ERR_INVALID_ARGUMENT, "comm_id: the output is a null pointer");
  // Without a usable device say so, before opening NCCL for nothing.
  char reason[512] = {0};
  if (functional(nullptr, reason, sizeof reason) <= 0)
    return fail(FLX_ERR_DEVICE, std::string("comm_id: the CUDA backend cannot run here: ") + reason);
  const NcclApi* api = nullptr;
  if (int e = nccl_api(&api, FLX_ERR_DEVICE, "comm_id")) return e;
  ncclUniqueId id;
  if (ncclResult_t r = api->get_unique_id(&id); r != ncclSuccess) return nccl_fail(*api, r, "ncclGetUniqueId");
  std::memcpy(out->bytes, id.internal, sizeof out->bytes);
  return FLX_OK;
}

int comm_init(void*, int dev, int32_t nranks, int32_t rank, const flx_comm_id* id, flx_comm* out) {
  if (!id || !out) return fail(FLX_ERR_INVALID_ARGUMENT, "comm_init: the id or the output is a null pointer");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(FLX_ERR_INVALID_ARGUMENT, "comm_init: rank " + std::to_string(rank) + " of " +
                                              std::to_string(nranks) + " ranks (expected nranks >= 1 and 0 <= rank < nranks)");
  // NCCL takes the communicator's device from the calling thread's current
  // one (cudaGetDevice): device_state makes dev current.
  DeviceState* ds = nullptr;
  if (int e = device_state(dev, "comm_init", &ds)) return e;
  const NcclApi* api = nullptr;
  if (int e = nccl_api(&api, FLX_ERR_DEVICE, "comm_init")) return e;
  ncclUniqueId uid;
  std::memcpy(uid.internal, id->bytes, sizeof uid.internal);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nc = nullptr;
  const ncclResult_t r = api->comm_init_rank_config(&nc, nranks, uid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const int st = nccl_fail(*api, r, "comm_init: ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " +
                                          std::to_string(nranks) + ", CUDA device " + std::to_string(dev) + ")");
    if (nc) (void)api->comm_abort(nc);  // made, then failed: nothing of it is kept
    return st;
  }
  CommEntry e;
  e.nccl = nc;
  e.dev = dev;
  e.nranks = nranks;
  e.rank = rank;
  e.ready = r == ncclSuccess;
  *out = comms().add(e);
  return FLX_OK;
}

int comm_poll(void*, flx_comm c, int32_t* ready) {
  if (!ready) return fail(FLX_ERR_INVALID_ARGUMENT, "comm_poll: the output is a null pointer");
  CommEntry e;
  if (int st = look_up(c, &e, "comm_poll")) return st;
  const NcclApi* api = nullptr;
  if (int st = nccl_api(&api, FLX_ERR_DEVICE, "comm_poll")) return st;  // loaded by comm_init already
  ncclResult_t state = ncclInProgress;
  if (ncclResult_t r = api->comm_get_async_error(as_nccl(e), &state); r != ncclSuccess)
    return nccl_fail(*api, r, "comm_poll: ncclCommGetAsyncError");
  if (state == ncclInProgress) {
    *ready = 0;
    return FLX_OK;
  }
  if (state != ncclSuccess)
    return fail(FLX_ERR_DEVICE, "comm_poll: the " + describe(e) + " failed: " + nccl_error(*api, state) +
                                    ". Abort it (comm_abort); the other ranks must too");
  if (!e.ready) comms().set_ready(c);
  *ready = 1;
  return FLX_OK;
}

int collective(void*, int dev, flx_comm c, const flx_collective_desc* d, flx_stream s) {
  // Everything that can be refused is, before anything is queued.
  int status = FLX_OK;
  if (std::string why = check_collective_desc(d, &status); !why.empty()) return fail(status, why);
  CommEntry e;
  if (int st = look_up(c, &e, "collective")) return st;
  if (e.dev != dev)
    return fail(FLX_ERR_INVALID_ARGUMENT, "collective: the " + describe(e) + " is not on CUDA device " +
                                              std::to_string(dev));
  if (std::string why = check_collective_ranks(*d, e); !why.empty()) return fail(FLX_ERR_INVALID_ARGUMENT, why);
  const size_t esize = collective_elem_bytes(d->dtype);
  const bool reads = collective_reads_send(*d, e.rank), writes = collective_writes_recv(*d, e.rank);
  // Memory the kind uses on this rank must be of dev and long enough;
  // memory it does not use may be NULL, and is checked when it is not.
  if (reads || d->send.buf)
    if (int st = check_elements(dev, d->send, d->count, esize, "collective (send)")) return st;
  if (writes || d->recv.buf)
    if (int st = check_elements(dev, d->recv, d->count, esize, "collective (recv)")) return st;
  const NcclApi* api = nullptr;
  if (int st = nccl_api(&api, FLX_ERR_DEVICE, "collective")) return st;
  if (!e.ready) {  // ready once NCCL says so, whether comm_poll asked or not
    ncclResult_t state = ncclInProgress;
    if (ncclResult_t r = api->comm_get_async_error(as_nccl(e), &state); r != ncclSuccess)
      return nccl_fail(*api, r, "collective: ncclCommGetAsyncError");
    if (state == ncclInProgress)
      return fail(FLX_ERR_INVALID_ARGUMENT, "collective: the " + describe(e) +
                                                " is still being set up; poll comm_poll until it is ready");
    if (state != ncclSuccess)
      return fail(FLX_ERR_DEVICE, "collective: the " + describe(e) + " failed: " + nccl_error(*api, state) +
                                      ". Abort it (comm_abort)");
    comms().set_ready(c);
  }
  if (d->count == 0) return FLX_OK;  // every rank passes the same count: nothing to do anywhere
  cudaStream_t st;
  if (int r = enter(dev, s, &st, "collective")) return r;
  ncclDataType_t type;
  ncclRedOp_t op = ncclSum;
  (void)nccl_dtype(d->dtype, &type);  // both checked by check_collective_desc
  if (d->kind != FLX_COLLECTIVE_BROADCAST) (void)nccl_op(d->op, &op);
  const void* send = d->send.buf ? addr(d->send) : nullptr;
  void* recv = d->recv.buf ? addr(d->recv) : nullptr;
  // Off root, a broadcast reads no send: without one it is NCCL's in-place
  // form (ncclBcast), and REDUCE's unused recv may stay NULL (nccl.h).
  if (d->kind == FLX_COLLECTIVE_BROADCAST && !send) send = recv;
  ncclResult_t r = ncclSuccess;
  const char* call = "ncclAllReduce";
  switch (d->kind) {
    case FLX_COLLECTIVE_ALLREDUCE: r = api->all_reduce(send, recv, d->count, type, op, as_nccl(e), st); break;
    case FLX_COLLECTIVE_BROADCAST:
      call = "ncclBroadcast";
      r = api->broadcast(send, recv, d->count, type, d->root, as_nccl(e), st);
      break;
    case FLX_COLLECTIVE_REDUCE:
      call = "ncclReduce";
      r = api->reduce(send, recv, d->count, type, op, d->root, as_nccl(e), st);
      break;
  }
  // In progress: NCCL is still queuing it (connecting the ranks, the first
  // time); it is queued once the communicator's state leaves ncclInProgress.
  if (r == ncclInProgress) r = wait_in_progress(*api, as_nccl(e));
  if (r != ncclSuccess)
    return nccl_fail(*api, r, std::string("collective: ") + call + " on the " + describe(e));
  return FLX_OK;
}

int comm_abort(void*, flx_comm c) {
  CommEntry e;
  if (!comms().take(c, &e)) return fail(FLX_ERR_INVALID_ARGUMENT, unknown_comm(c, "comm_abort"));
  const NcclApi* api = nullptr;
  if (int st = nccl_api(&api, FLX_ERR_DEVICE, "comm_abort")) return st;  // cannot be: comm_init loaded it
  // Sets NCCL's abort flag, so its kernels and its proxy thread quit, joins
  // the set-up thread and frees: no waiting for the other ranks.
  if (ncclResult_t r = api->comm_abort(as_nccl(e)); r != ncclSuccess)
    return nccl_fail(*api, r, "comm_abort: ncclCommAbort of the " + describe(e));
  return FLX_OK;
}

int comm_destroy(void*, flx_comm c) {
  CommEntry e;
  if (!comms().take(c, &e)) return fail(FLX_ERR_INVALID_ARGUMENT, unknown_comm(c, "comm_destroy"));
  const NcclApi* api = nullptr;
  if (int st = nccl_api(&api, FLX_ERR_DEVICE, "comm_destroy")) return st;
  const ncclComm_t nc = as_nccl(e);
  // ncclCommFinalize needs a communicator whose state is ncclSuccess: one
  // still setting up, or in error, has nothing to flush and is aborted.
  ncclResult_t state = ncclInProgress;
  const ncclResult_t q = api->comm_get_async_error(nc, &state);
  if (q != ncclSuccess || state != ncclSuccess) {
    (void)api->comm_abort(nc);
    if (q == ncclSuccess && state == ncclInProgress) return FLX_OK;  // never set up: nothing was lost
    return fail(FLX_ERR_DEVICE, "comm_destroy: the " + describe(e) + " had failed (" +
                                    nccl_error(*api, q != ncclSuccess ? q : state) + "); it was aborted instead");
  }
  // Flushes the work queued with it; ncclInProgress until that is done
  // (and every rank's matching work with it).
  ncclResult_t r = api->comm_finalize(nc);
  if (r == ncclInProgress) r = wait_in_progress(*api, nc);
  if (r != ncclSuccess) {
    const int st = nccl_fail(*api, r, "comm_destroy: ncclCommFinalize of the " + describe(e));
    (void)api->comm_abort(nc);  // c is gone either way
    return st;
  }
  if (r = api->comm_destroy(nc); r != ncclSuccess)
    return nccl_fail(*api, r, "comm_destroy: ncclCommDestroy of the " + describe(e));
  return FLX_OK;
}

}  // namespace flx_cuda

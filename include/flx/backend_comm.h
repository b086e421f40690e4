/* flx backend ABI: the comm table, get_table("comm", 1) (minor 4):
 * communicators and collectives across processes, NCCL's model
 * (include/flx/backend.h has the ABI's rules). Plain C. */
#ifndef FLX_BACKEND_COMM_H
#define FLX_BACKEND_COMM_H

#include "flx/backend_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- collectives: the comm table, get_table("comm", 1) (minor 4) ---------
 * A communicator joins one device in each of nranks processes (or threads)
 * into a group whose members reduce and broadcast device memory together,
 * as NCCL's communicators do. Setting one up:
 *   1. rank 0 calls comm_id and sends the bytes to every other rank by its
 *      own means (MPI_Bcast, a file, a socket);
 *   2. every rank calls comm_init with its device, nranks, its rank and that
 *      id. The call does not wait for the other ranks: it returns at once
 *      with a communicator that is not ready yet;
 *   3. every rank polls comm_poll until it answers ready. A rank that never
 *      joins keeps the others waiting: the caller decides how long to wait,
 *      then calls comm_abort. A thread makes one communicator at a time:
 *      it polls one ready (or aborts it) before its next comm_init or
 *      collective (older NCCL releases keep one pending non-blocking
 *      operation per thread and refuse another meanwhile).
 * Collectives are queued on a stream of the communicator's device, and
 * every rank must queue the same collectives in the same order, with the
 * same kind, dtype, op, root and count: a mismatch hangs or gives wrong
 * values rather than failing, as in NCCL. Calls on one communicator must
 * not run on several threads at once. A failure found later (a peer that
 * died, a network error) comes out of comm_poll; after any failure other
 * than a refused argument the communicator can only be aborted. */
#define FLX_COMM_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */
typedef struct flx_comm_s* flx_comm; /* one process's membership in a communicator, on one device */
typedef struct flx_comm_id {
  unsigned char bytes[FLX_COMM_ID_BYTES];
} flx_comm_id;

typedef enum flx_collective_kind {
  FLX_COLLECTIVE_ALLREDUCE = 0, /* every rank's recv = op over every rank's send */
  FLX_COLLECTIVE_BROADCAST = 1, /* every rank's recv = root's send (send read on root only) */
  FLX_COLLECTIVE_REDUCE = 2     /* root's recv = op over every rank's send (recv written on root only) */
} flx_collective_kind;

/* AVG divides by nranks as ncclAvg does: floating types multiply each
 * rank's value by 1/nranks, then sum; integers sum (wrapping), then divide
 * (rounding toward zero). MAX and MIN of NaN follow the backend's library. */
typedef enum flx_comm_op {
  FLX_COMM_SUM = 0,
  FLX_COMM_MAX = 1,
  FLX_COMM_MIN = 2,
  FLX_COMM_AVG = 3
} flx_comm_op;

/* count elements of dtype: F32, F64, F16, BF16, I32, I64, U8, or Bool with
 * MAX and MIN only (SUM or AVG of Bool is FLX_ERR_UNSUPPORTED). send and
 * recv are memory of the communicator's device; the same memory (buf and
 * offset) for both is in place. A buffer the kind does not use on this rank
 * (BROADCAST's send off root, REDUCE's recv off root) may have a NULL buf. */
typedef struct flx_collective_desc {
  uint32_t struct_size; /* sizeof(flx_collective_desc) as the caller was built */
  int32_t kind;         /* flx_collective_kind */
  int32_t dtype;        /* flx_dtype */
  int32_t op;           /* flx_comm_op: ALLREDUCE and REDUCE (BROADCAST ignores it) */
  int32_t root;         /* BROADCAST and REDUCE: a rank, 0 <= root < nranks */
  int32_t reserved;     /* 0 */
  uint64_t count;       /* elements; 0 queues nothing */
  flx_mem send, recv;
} flx_collective_desc;

/* Every call returns FLX_OK or a status with last_error() set. A handle that
 * is not a live communicator of this backend (never made by comm_init,
 * aborted or destroyed already) is FLX_ERR_INVALID_ARGUMENT, never a crash.
 * A backend that opens its collectives library on first use (NCCL) reports
 * one that cannot be opened as FLX_ERR_DEVICE, naming what it tried. */
typedef struct flx_comm_table {
  uint32_t struct_size; /* sizeof(flx_comm_table) as the backend was built */
  uint32_t version;     /* FLX_TABLE_COMM_VERSION */
  /* A new communicator's id into *out (ncclGetUniqueId): called once, by
   * rank 0, which sends the bytes to the other ranks. Does not block on
   * other processes. */
  int (*comm_id)(void* ctx, flx_comm_id* out);
  /* Join communicator `id` as `rank` (0 <= rank < nranks) on device dev.
   * Non-blocking: returns at once, *out a communicator that comm_poll says
   * is ready once every rank has joined; until then only comm_poll and
   * comm_abort may be called on it. On failure *out is left alone and
   * nothing needs freeing. */
  int (*comm_init)(void* ctx, int dev, int32_t nranks, int32_t rank, const flx_comm_id* id, flx_comm* out);
  /* *ready = 1 once c's set-up is done, 0 while it goes on; never blocks.
   * An error of c's set-up or of its queued work found since (a peer that
   * died, a network failure) is FLX_ERR_DEVICE with the library's message
   * in last_error(); c must then be aborted. */
  int (*comm_poll)(void* ctx, flx_comm c, int32_t* ready);
  /* Queue collective d on stream s of dev, c's device: every rank's call
   * must match (above). Returns once the work is queued (work queued on s
   * later runs after it), not when it is done; for a non-blocking NCCL
   * communicator that includes waiting, if NCCL says the call is still in
   * progress, until it is queued. c must be ready (comm_poll);
   * arguments are checked first, before anything is queued: an unknown
   * kind, op or dtype, a root out of range, buffers that are not memory of
   * dev or too short for count elements are FLX_ERR_INVALID_ARGUMENT; SUM or
   * AVG of Bool is FLX_ERR_UNSUPPORTED. */
  int (*collective)(void* ctx, int dev, flx_comm c, const flx_collective_desc* d, flx_stream s);
  /* End c at once: work of c still queued or running is abandoned (its
   * output is undefined), and c's resources are freed; c is no longer a
   * handle. Never waits for the other ranks, so it ends a communicator
   * whose peers died or never joined. The other ranks' work with c fails
   * or hangs until they abort too. */
  int (*comm_abort)(void* ctx, flx_comm c);
  /* Finalize and free c once its queued work is done (ncclCommFinalize,
   * then ncclCommDestroy): blocks until that work has run, which needs
   * every rank's matching calls. A communicator still setting up or in
   * error is aborted instead. c is no longer a handle afterwards, even when
   * the call fails. */
  int (*comm_destroy)(void* ctx, flx_comm c);
} flx_comm_table;

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_COMM_H */

/* flx backend ABI, version 2 — the boundary between libflx and a device
 * backend.
 *
 * Plain C so that a backend can be built by any compiler and loaded with
 * dlopen: no C++ type and no exception crosses this line. A plugin exports
 * one function, FLX_BACKEND_ENTRY_SYMBOL, which returns its core table
 * (flx_backend): devices, stream-ordered memory, pinned host memory,
 * streams and events, copies, and get_table(), through which libflx looks up
 * the op tables by name and version: "compute" (flx_compute_table: fill,
 * random, cast, map, reduce, GEMM, gather/scatter, permute, softmax,
 * optimiser steps); "comm" (flx_comm_table, minor 4: communicators and
 * collectives across processes, NCCL's model); "dnn" (flx_dnn_table,
 * minor 5: convolution, pooling, batch normalisation, as cuDNN and oneDNN
 * offer them; recurrent layers, minor 6; attention, minor 7). Minor 8 added
 * the map ops sin, cos and erf (backend_ops.h); minor 9 the core call
 * precision_path; minor 10 the dnn table's group normalisation; minor 11 the
 * map ops of NNlib's remaining activations (hardsigmoid ... lisht, rrelu)
 * and their derivative products; minor 12 the compute table's rule_step,
 * every stateful optimiser rule's element update (backend_rules.h); minor 13
 * the dnn table's conv_backward, both backward passes of a convolution in
 * one call; minor 14 the "fused" table (backend_fused.h): every fused op by
 * its code through three calls (supports, scratch_bytes, run), so that a
 * new fused op needs no new table field and no new minor.
 *
 * Conventions
 *  - Every call takes the backend's own context pointer first.
 *  - Calls returning int return FLX_OK (0) or an flx_status; after a failure
 *    last_error() gives a human-readable message for the calling thread.
 *  - Device memory is an opaque flx_buffer plus a byte offset (flx_mem), so
 *    backends whose buffers are not pointers (OpenCL cl_mem) fit too.
 *  - Work is ordered on a stream (a CUDA stream, an OpenCL in-order queue);
 *    the NULL stream is the device's default stream. alloc and free are
 *    stream-ordered: memory freed on stream s may be reused by work later on
 *    s at once, and by other streams once s has reached the free (as
 *    cudaFreeAsync). Backends that compute synchronously (the CPU) may
 *    ignore streams and events entirely.
 *  - Shapes are column-major (first index fastest); strides count elements;
 *    a stride of 0 broadcasts.
 *  - From minor 5 on, a double that becomes an integer element (a map's
 *    alpha and beta, a scalar operand, a fill value) saturates into the
 *    dtype's range (NaN is 0, else truncation toward zero): -1 as UInt8 is
 *    0 on every backend (C++ leaves the conversion undefined; x86 gave 255).
 *  - Descriptors arrive canonical: libflx has dropped size-1 dims, merged
 *    dims that are contiguous for every operand and computed the strides, so
 *    a backend only runs loops.
 *  - A backend that lacks a table or a function still loads. The op that
 *    needs what it lacks raises flx::NotImplemented naming the op, the
 *    dtype, the backend and what is missing, and so does an op the backend
 *    answers FLX_ERR_UNSUPPORTED for, or an op code newer than the minor
 *    version it implements (libflx checks that before calling). libflx
 *    never falls back to the CPU in the middle of a device computation.
 *
 * Compatibility rules
 *  - The ABI has a major and a minor version. libflx loads a plugin whose
 *    major equals FLX_BACKEND_ABI_MAJOR, whatever its minor.
 *  - Additive changes raise the minor version: a new function appended to
 *    the end of flx_backend or of an op table, a new op table, a new map op
 *    code (backend_ops.h records the minor of each), a new enum value, a
 *    field appended to a descriptor of a table that came with minor 3 or
 *    later. Every table begins with its struct_size as the plugin was
 *    built, and libflx calls a function only when the table is long enough
 *    to hold it and the pointer is not NULL (FLX_HAS_FN), so a plugin built
 *    against an older minor version keeps working: what it lacks is
 *    reported as missing when used.
 *  - Descriptors of the tables that come with minor 3 or later begin with
 *    uint32_t struct_size, sizeof the descriptor as the caller was built: a
 *    backend reads a field only when the descriptor holds it
 *    (FLX_DESC_HAS), and takes a field it lacks as zero, which must mean
 *    what the descriptor meant before the field came. libflx sets a field
 *    to anything but zero only for a backend whose minor knows it. The
 *    compute table's descriptors predate this rule and never change.
 *  - Anything else is a new major version: changing or removing a field,
 *    a signature, a descriptor layout, the meaning of a code. An op table
 *    changes incompatibly by getting a new version number under the same
 *    name (get_table("compute", 2)); a backend may offer both.
 *  - A backend states the minor version it implements in abi_minor; build
 *    it with -DFLX_BACKEND_TARGET_MINOR=n to compile against the layout of
 *    an older minor version n.
 *  - Fields added in minor version n are marked "minor n" below.
 */
#ifndef FLX_BACKEND_H
#define FLX_BACKEND_H

/* The tables, one a header, and what they share. */
#include "flx/backend_types.h"
#include "flx/backend_compute.h"
#include "flx/backend_comm.h"
#include "flx/backend_dnn.h"
#include "flx/backend_fused.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- an allocator's figures (minor 2) --------------------------------------
 * Bytes of a device's memory the backend's allocator holds: used = handed
 * out by alloc and not yet freed (a stream-ordered free counts once its
 * stream gets there); reserved = taken from the driver or the system, used
 * plus what is cached for reuse. Peaks since the backend started (or since
 * the backend last reset them). */
typedef struct flx_memory_info {
  uint64_t used, used_peak;
  uint64_t reserved, reserved_peak;
} flx_memory_info;

/* ---- an op table a backend serves (minor 3), for listings ----------------- */
typedef struct flx_table_ref {
  const char* name; /* as get_table takes it: "compute" */
  uint32_t version;
} flx_table_ref;

/* ---- how a device runs half work (minor 9), for listings -------------------
 * For a half dtype (FLX_F16, FLX_BF16) and a family of ops, whether the
 * device runs them fast (in the type, on hardware made for it: tensor
 * cores, AVX512-BF16, AMX), emulated (correct, each output rounded once,
 * but computed through Float32 copies or Float32 kernels, so no faster than
 * Float32), or not at all (the ops raise NotImplemented), and what runs
 * them. The answer must be what the backend dispatches on that device (a
 * backend that decides per call answers for a typical case). flx-info
 * lists it; flx::precision_paths returns it. */
typedef enum flx_precision_op {
  FLX_PRECISION_GEMM = 0,      /* matmul, Dense, batched products: the compute table's gemm */
  FLX_PRECISION_CONV = 1,      /* convolutions, forward and backward: conv_* */
  FLX_PRECISION_BATCHNORM = 2, /* batchnorm_* */
  FLX_PRECISION_ATTENTION = 3, /* attention without its scores: attention_* */
  FLX_PRECISION_RNN = 4,       /* recurrent layers (rnn_*, or their GEMMs and maps) */
  FLX_PRECISION_OP_COUNT = 5   /* later minors may add families: a backend answers
                                  FLX_ERR_INVALID_ARGUMENT for one it does not know */
} flx_precision_op;

typedef enum flx_precision_speed {
  FLX_PRECISION_MISSING = 0,  /* not run in this dtype: NotImplemented */
  FLX_PRECISION_EMULATED = 1, /* correct, through Float32 */
  FLX_PRECISION_FAST = 2      /* in the type itself, on hardware made for it */
} flx_precision_speed;

typedef struct flx_precision_path {
  uint32_t struct_size; /* sizeof, as the caller was built */
  int32_t dtype;        /* in: FLX_F16 or FLX_BF16 */
  int32_t op;           /* in: a flx_precision_op */
  int32_t speed;        /* out: a flx_precision_speed */
  /* out, NUL-terminated: what runs it ("oneDNN brg:avx512_core_bf16",
   * "cuBLAS on the tensor cores") or, when not fast, why ("Float32 copies:
   * oneDNN's ISA, avx2, has no BFloat16 arithmetic") */
  char how[200];
} flx_precision_path;

/* ---- the core table ---------------------------------------------------------- */
typedef struct flx_backend {
  uint32_t abi_major;   /* FLX_BACKEND_ABI_MAJOR (where version 1 had api_version) */
  uint32_t struct_size; /* sizeof(flx_backend) as the backend was built */
  uint32_t abi_minor;   /* the minor version the backend implements */
  uint32_t reserved;    /* 0 */
  const char* name;     /* "CPU", "CUDA", "OpenCL", ... */
  void* ctx;

  /* discovery: score > 0 when usable; otherwise 0 and a reason. */
  int (*functional)(void* ctx, char* reason, size_t reason_cap);
  int (*device_count)(void* ctx);
  int (*device_props)(void* ctx, int dev, flx_device_props* out);
  const char* (*last_error)(void* ctx);

  /* op tables by name and version: NULL when the backend has none */
  const void* (*get_table)(void* ctx, const char* name, uint32_t version);

  /* stream-ordered device memory */
  int (*alloc)(void* ctx, int dev, size_t bytes, flx_stream s, flx_buffer* out);
  void (*free)(void* ctx, int dev, flx_buffer buf, flx_stream s);
  /* host address of a buffer, or NULL when it is not host-addressable */
  void* (*host_address)(void* ctx, int dev, flx_buffer buf);
  int (*host_alloc)(void* ctx, size_t bytes, void** out); /* pinned */
  void (*host_free)(void* ctx, void* ptr);

  /* streams and events */
  int (*stream_create)(void* ctx, int dev, flx_stream* out);
  void (*stream_destroy)(void* ctx, int dev, flx_stream s);
  int (*stream_synchronize)(void* ctx, int dev, flx_stream s);
  int (*event_create)(void* ctx, int dev, flx_event* out);
  void (*event_destroy)(void* ctx, int dev, flx_event e);
  int (*event_record)(void* ctx, int dev, flx_event e, flx_stream s);
  int (*stream_wait_event)(void* ctx, int dev, flx_stream s, flx_event e);
  int (*event_synchronize)(void* ctx, int dev, flx_event e);

  /* copies (asynchronous on s when the host side is pinned); a null host
     pointer with bytes > 0 is FLX_ERR_INVALID_ARGUMENT */
  int (*copy_h2d)(void* ctx, int dev, flx_mem dst, const void* src, size_t bytes, flx_stream s);
  int (*copy_d2h)(void* ctx, int dev, void* dst, flx_mem src, size_t bytes, flx_stream s);
  int (*copy_d2d)(void* ctx, int dev, flx_mem dst, flx_mem src, size_t bytes, flx_stream s);
  /* between two devices of this backend; s is a stream of src_dev, and the
   * copy is ordered after the work already queued on dst_dev's default stream */
  int (*copy_peer)(void* ctx, int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes, flx_stream s);

#if FLX_BACKEND_TARGET_MINOR >= 1
  /* minor 1: give cached device memory back to the driver or the system.
   * libflx calls it when an allocation fails, then tries once more. */
  int (*release_cached)(void* ctx, int dev);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 2
  /* minor 2: the allocator's figures for dev (flx::memory_stats) */
  int (*memory_info)(void* ctx, int dev, flx_memory_info* out);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 3
  /* minor 3: every table get_table serves, as *count entries (flx-info
   * lists them, those this libflx does not know too); may be NULL */
  const flx_table_ref* (*list_tables)(void* ctx, uint32_t* count);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 4
  /* minor 4, optional: *done = 1 when the work queued before e's last
   * record has finished (or e was never recorded), else 0; never blocks. */
  int (*event_query)(void* ctx, int dev, flx_event e, int32_t* done);
  /* minor 4, optional: the address of m that libraries of the backend's
   * own runtime take (a CUDA device pointer, for CUDA-aware MPI and NCCL):
   * *out = NULL where m has none (NULL buf; a backend whose buffers are
   * not pointers leaves the call NULL). Does not check that bytes past the
   * offset exist; a buffer that is not of dev is FLX_ERR_INVALID_ARGUMENT. */
  int (*device_address)(void* ctx, int dev, flx_mem m, void** out);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 9
  /* minor 9, optional: how dev runs p->op in p->dtype (flx_precision_path:
   * fills speed and how). FLX_ERR_INVALID_ARGUMENT for an op or dtype the
   * backend does not know. */
  int (*precision_path)(void* ctx, int dev, flx_precision_path* p);
#endif
} flx_backend;

/* The one symbol a plugin exports. Returns NULL when the backend cannot
 * serve the requested major version; a backend serves any requested minor
 * and states its own in abi_minor. */
typedef const flx_backend* (*flx_backend_entry_fn)(uint32_t abi_major, uint32_t abi_minor);

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_H */

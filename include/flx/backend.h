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
 * one call.
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

#include <stddef.h>
#include <stdint.h>

#include "flx/backend_ops.h"
#include "flx/backend_rules.h"
#include "flx/dtype_list.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLX_BACKEND_ABI_MAJOR 2u
#define FLX_BACKEND_ABI_MINOR 13u
#ifndef FLX_BACKEND_TARGET_MINOR
#define FLX_BACKEND_TARGET_MINOR FLX_BACKEND_ABI_MINOR
#endif
#define FLX_BACKEND_ENTRY_SYMBOL "flx_backend_entry"
#define FLX_MAX_DIMS 8

/* Op table names and the versions this header describes. */
#define FLX_TABLE_COMPUTE "compute"
#define FLX_TABLE_COMPUTE_VERSION 1u
#define FLX_TABLE_DNN "dnn" /* convolution, pooling, normalisation (minor 5); recurrent layers (minor 6); attention (minor 7); group normalisation (minor 10) */
#define FLX_TABLE_DNN_VERSION 1u
#define FLX_TABLE_COMM "comm" /* collectives (minor 4) */
#define FLX_TABLE_COMM_VERSION 1u

/* True when `table` (a pointer to a table whose first field is struct_size)
 * is long enough to hold `field` and the backend set it. */
#define FLX_HAS_FN(table, type, field)                                                         \
  ((table) != NULL && (table)->struct_size >= offsetof(type, field) + sizeof((table)->field) && \
   (table)->field != NULL)
/* True when descriptor `desc` (of a table from minor 3 on: its first field
 * is struct_size) holds `field`. */
#define FLX_DESC_HAS(desc, type, field) \
  ((desc)->struct_size >= offsetof(type, field) + sizeof((desc)->field))

/* Element types. Float16 and BFloat16 are stored as IEEE half and bfloat16
 * bits, rounded to nearest even; from minor 3 on, every path that stores a
 * NaN into them (cast, fill, map, random, reductions, ...) writes
 * sign|0x7E00 (Float16) or sign|0x7FC0 (BFloat16), the CPU's bits, whatever
 * the NaN's payload. */
#define FLX_DTYPE_ENUMERATOR_(code, sfx, name, bytes, kind, rank) FLX_##sfx = code,
typedef enum flx_dtype {
  /* FLX_F32 = 0, FLX_F64 = 1, FLX_F16 = 2, FLX_BF16 = 3, FLX_I32 = 4,
   * FLX_I64 = 5, FLX_U8 = 6, FLX_BOOL = 7: from flx/dtype_list.h */
  FLX_DTYPES(FLX_DTYPE_ENUMERATOR_)
} flx_dtype;
#undef FLX_DTYPE_ENUMERATOR_

typedef enum flx_status {
  FLX_OK = 0,
  FLX_ERR_OUT_OF_MEMORY = 1,
  FLX_ERR_INVALID_ARGUMENT = 2,
  FLX_ERR_UNSUPPORTED = 3, /* op/dtype combination this backend lacks */
  FLX_ERR_DEVICE = 4       /* driver or runtime failure */
} flx_status;

typedef enum flx_device_kind {
  FLX_DEVICE_CPU = 0,
  FLX_DEVICE_GPU = 1,
  FLX_DEVICE_ACCELERATOR = 2
} flx_device_kind;

typedef struct flx_buffer_s* flx_buffer;
typedef struct flx_stream_s* flx_stream;
typedef struct flx_event_s* flx_event;

typedef struct flx_mem {
  flx_buffer buf;
  uint64_t offset; /* bytes */
} flx_mem;

typedef struct flx_device_props {
  char name[256];
  int32_t kind; /* flx_device_kind */
  uint64_t total_memory;
  uint64_t free_memory;
} flx_device_props;

/* ---- elementwise map ---------------------------------------------------
 * out[i] = op(in0[i], in1[i], in2[i]) over the output shape; each operand is
 * read through its own strides (0 = broadcast) or is a scalar.
 * Inputs share one dtype (the frontend casts first); the output dtype is
 * that dtype, or Bool for comparisons. alpha/beta parametrise some ops.
 * The ops, their codes and their bodies are listed in backend_ops.h. */
typedef enum flx_map_op {
#define FLX_MAP_OP_ENUM_(NAME, CODE, ARITY, CLASS, GRAD, BODY) FLX_OP_##NAME = CODE,
  FLX_MAP_OPS(FLX_MAP_OP_ENUM_)
#undef FLX_MAP_OP_ENUM_
  FLX_OP_NONE = -1
} flx_map_op;

typedef struct flx_operand {
  flx_mem mem;
  int64_t strides[FLX_MAX_DIMS]; /* per (canonical) dim; 0 broadcasts */
  int32_t is_scalar;             /* use `scalar` instead of memory */
  double scalar;
} flx_operand;

/* Canonical: ndim >= 1, no dim of size 1 unless the output is one element,
 * adjacent dims merged where every operand continues contiguously. The
 * output is contiguous; numel is the product of shape. */
typedef struct flx_map_desc {
  int32_t op;
  int32_t ninputs;
  int32_t in_dtype; /* dtype of every input (Bool for WHERE's in0 aside) */
  int32_t out_dtype;
  int32_t ndim;
  int64_t shape[FLX_MAX_DIMS];
  int64_t numel;
  flx_operand in[3];
  flx_mem out;
  double alpha, beta;
} flx_map_desc;

/* ---- reductions ----------------------------------------------------------
 * out = scale * reduce(in) for SUM; MAX and MIN propagate NaN. The input is
 * read through runs: output element o (0 <= o < nkept, the contiguous
 * output) starts at the offset of o in the kept runs, and its nred inputs
 * follow the reduced runs. Runs are (extent, stride) pairs, first fastest,
 * with size-1 dims dropped and contiguous dims merged; either list may be
 * empty. ARGMAX/ARGMIN have exactly one reduced run, of extent >= 1 (the
 * frontend refuses empty ones), and write 0-based Int64 indices along it
 * (the first NaN, else the first extremum). MAX and MIN start from -Inf
 * and +Inf for floating dtypes (so a run of -Inf gives -Inf in every dtype),
 * from the dtype's extremes for integers. An empty reduction (nred == 0)
 * writes the initial value. */
typedef enum flx_reduce_op {
  FLX_REDUCE_SUM = 0,
  FLX_REDUCE_MAX = 1,
  FLX_REDUCE_MIN = 2,
  FLX_REDUCE_ARGMAX = 3,
  FLX_REDUCE_ARGMIN = 4
} flx_reduce_op;

typedef struct flx_reduce_desc {
  int32_t op;
  int32_t dtype; /* input dtype; output dtype is the same except for ARG* (I64) */
  int32_t nkept_runs, nred_runs;
  int64_t kept_extent[FLX_MAX_DIMS], kept_stride[FLX_MAX_DIMS];
  int64_t red_extent[FLX_MAX_DIMS], red_stride[FLX_MAX_DIMS];
  int64_t nkept, nred; /* products of the extents */
  double scale;
  flx_mem in, out;
  /* Scratch memory of workspace_bytes (as reduce_workspace asked for), from
   * the device's allocator on the call's stream; NULL buf when none. */
  flx_mem workspace;
  uint64_t workspace_bytes;
} flx_reduce_desc;

/* ---- batched GEMM, column-major ------------------------------------------
 * C_b = alpha * op(A_b) * op(B_b) + beta * C_b for b < batch; op(A) is m×k,
 * op(B) is k×n, C is m×n. Batch strides in elements (0 = same matrix). */
typedef struct flx_gemm_desc {
  int32_t dtype;
  int32_t trans_a, trans_b;
  int64_t m, n, k;
  double alpha, beta;
  flx_mem a, b, c;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
} flx_gemm_desc;

/* ---- GEMM with an epilogue (minor 2) -----------------------------------
 * One GEMM (gemm.batch == 1; libflx passes alpha = 1, beta = 0) with work
 * fused after it, for Dense layers. Let P = alpha * op(A) * op(B) + beta * C
 * (m×n, column-major) and bias a vector of m elements of gemm.dtype:
 *   BIAS        C = P + bias (bias[i] added to row i of every column)
 *   BIAS_RELU   C = relu(P + bias) = max(P + bias, 0); a NaN stays NaN as
 *               in FLX_OP_RELU where the backend's library allows
 *   BIAS_GELU   C = gelu(P + bias), the tanh form of FLX_OP_GELU
 *               (NNlib's gelu, cuBLASLt's GELU epilogue); when aux.buf is
 *               set, aux (m×n, leading dimension aux_ld) also receives the
 *               pre-activation P + bias, for the backward pass
 *   BGRADA      C = P as gemm, and bias[i] = sum over l < k of op(A)[i, l]
 *               (the row sums of op(A): a Dense layer's bias gradient,
 *               fused into the weight-gradient GEMM dW = dY * Xᵀ)
 * A backend answers FLX_ERR_UNSUPPORTED, before queuing any work, for a
 * combination it does not fuse (a dtype, an alignment, a shape its library's
 * heuristic finds no algorithm for): libflx then runs the same computation
 * unfused on the same device. */
typedef enum flx_epilogue {
  FLX_EPILOGUE_BIAS = 0,
  FLX_EPILOGUE_BIAS_RELU = 1,
  FLX_EPILOGUE_BIAS_GELU = 2,
  FLX_EPILOGUE_BGRADA = 3
} flx_epilogue;

typedef struct flx_gemm_epilogue_desc {
  flx_gemm_desc gemm;
  int32_t epilogue; /* flx_epilogue */
  int32_t reserved; /* 0 */
  flx_mem bias;     /* read (BIAS*) or written (BGRADA): m elements */
  flx_mem aux;      /* BIAS_GELU only, optional (NULL buf: none) */
  int64_t aux_ld;
} flx_gemm_epilogue_desc;

/* ---- gather / scatter along one axis -------------------------------------
 * The tensor is viewed as (inner, axis, outer), column-major. gather:
 * dst[i, j, o] = src[i, idx[j], o] with dst axis length nidx.
 * scatter_add: dst[i, idx[j], o] += src[i, j, o] (dst axis length axis_len).
 * idx is Int64 device memory; out-of-range indices are an error the
 * frontend prevents. */
typedef struct flx_index_desc {
  int32_t dtype;
  int64_t inner, axis_len, outer;
  flx_mem src, dst, idx;
  int64_t nidx;
} flx_index_desc;

/* ---- permute: dst = permutedims(src, perm), dst contiguous ---------------
 * Canonical: dst element t (column-major over out_shape) is read from src
 * at the offset of t through src_strides (the permuted strides of src), with
 * size-1 dims dropped and dims that stay adjacent merged. */
typedef struct flx_permute_desc {
  int32_t dtype;
  int32_t ndim;
  int64_t out_shape[FLX_MAX_DIMS];
  int64_t src_strides[FLX_MAX_DIMS];
  int64_t numel;
  flx_mem src, dst;
} flx_permute_desc;

/* ---- softmax over the middle axis of (inner, axis, outer) ---------------- */
typedef struct flx_softmax_desc {
  int32_t dtype;
  int32_t log; /* logsoftmax */
  int64_t inner, axis_len, outer;
  flx_mem x, y;   /* forward: y = softmax(x) */
  flx_mem dy, dx; /* backward: dx from y and dy (x unused) */
} flx_softmax_desc;

/* ---- fused optimiser transforms (in place on state, writes dx) ---------- */
typedef enum flx_optim_kind {
  FLX_OPTIM_ADAM = 0 /* m,v updated; step = eta*mhat/(sqrt(vhat)+eps) */
} flx_optim_kind;

/* The step is written to dx, or, when dx.buf is NULL, subtracted from the
 * parameter x in place (one pass over memory instead of two). */
typedef struct flx_optim_desc {
  int32_t kind;
  int32_t dtype;
  int64_t n;
  flx_mem grad, m, v, dx, x;
  double eta, beta1, beta2, eps;
  double beta1_pow, beta2_pow; /* beta^t, for bias correction */
} flx_optim_desc;

/* ---- optimiser rules' element updates (minor 12) ---------------------------
 * For each of n elements: step = BODY(param, grad, x, state) of the rule
 * (backend_rules.h, which lists the rules, their codes, their states and
 * their parameters), the states updated in place; the step is written to
 * dx, or, when dx.buf is NULL, subtracted from x in place. x is read by the
 * rules that use it (and by the in-place form); every operand is contiguous
 * and of `dtype`, a floating type. Adam through rule_step gives the same
 * bits as through optim_step. */
#define FLX_RULE_ENUM_(NAME, CODE, STATES, BODY) FLX_RULE_##NAME = CODE,
typedef enum flx_rule { FLX_RULES(FLX_RULE_ENUM_) } flx_rule;
#undef FLX_RULE_ENUM_

typedef struct flx_rule_desc {
  uint32_t struct_size; /* sizeof(flx_rule_desc) as the caller was built */
  int32_t rule;         /* flx_rule */
  int32_t dtype;
  int64_t n;
  flx_mem grad, x, dx;
  flx_mem state[FLX_RULE_MAX_STATES]; /* the rule's STATES first; the rest unset */
  double param[FLX_RULE_MAX_PARAMS];  /* as the rule's body reads them; the rest 0 */
} flx_rule_desc;

typedef enum flx_random_dist {
  FLX_RANDOM_UNIFORM = 0, /* [a, b) */
  FLX_RANDOM_NORMAL = 1   /* mean a, std b */
} flx_random_dist;

/* ---- workspace and reserve space -------------------------------------------
 * A call that needs scratch memory has an optional *_workspace function that
 * says how many bytes (0 when none) for a descriptor; libflx allocates them
 * from the device's allocator on the call's stream, passes them in the
 * descriptor's `workspace`, and frees them stream-ordered right after the
 * call (the memory is reused only once the stream has passed the call). A
 * backend without the function gets no workspace. A forward call whose
 * backward needs state from it (cuDNN's BatchNorm and RNN reserve space,
 * oneDNN's pooling workspace) gets a `reserve` of the size its
 * *_reserve_size function gives, allocated the same way, which libflx keeps
 * with the autodiff record and hands to the backward call; it is freed when
 * the record goes. */

/* ---- the compute table: get_table("compute", 1) ------------------------- */
typedef struct flx_compute_table {
  uint32_t struct_size; /* sizeof(flx_compute_table) as the backend was built */
  uint32_t version;     /* FLX_TABLE_COMPUTE_VERSION */
  int (*fill)(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s);
  int (*random)(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed,
                uint64_t offset, double a, double b, flx_stream s);
  int (*cast)(void* ctx, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n,
              flx_stream s);
  int (*map)(void* ctx, int dev, const flx_map_desc* d, flx_stream s);
  int (*reduce)(void* ctx, int dev, const flx_reduce_desc* d, flx_stream s);
  /* bytes of workspace reduce needs for d (d->workspace unset); may be NULL */
  int (*reduce_workspace)(void* ctx, int dev, const flx_reduce_desc* d, uint64_t* bytes);
  int (*gemm)(void* ctx, int dev, const flx_gemm_desc* d, flx_stream s);
  int (*gather)(void* ctx, int dev, const flx_index_desc* d, flx_stream s);
  int (*scatter_add)(void* ctx, int dev, const flx_index_desc* d, flx_stream s);
  int (*permute)(void* ctx, int dev, const flx_permute_desc* d, flx_stream s);
  int (*softmax)(void* ctx, int dev, const flx_softmax_desc* d, flx_stream s);
  int (*softmax_backward)(void* ctx, int dev, const flx_softmax_desc* d, flx_stream s);
  int (*optim_step)(void* ctx, int dev, const flx_optim_desc* d, flx_stream s);
#if FLX_BACKEND_TARGET_MINOR >= 2
  /* minor 2, optional: a GEMM with a fused epilogue (flx_gemm_epilogue_desc);
   * any answer but FLX_OK makes libflx run the unfused ops instead (a
   * failure other than FLX_ERR_UNSUPPORTED is logged once), so a failed
   * call must leave the outputs to be overwritten and no error pending. */
  int (*gemm_epilogue)(void* ctx, int dev, const flx_gemm_epilogue_desc* d, flx_stream s);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 12
  /* minor 12, optional: one optimiser rule's step (flx_rule_desc). A
   * backend without it runs Adam through optim_step and no other rule. */
  int (*rule_step)(void* ctx, int dev, const flx_rule_desc* d, flx_stream s);
#endif
} flx_compute_table;

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

/* ---- convolution, pooling, normalisation: the dnn table, get_table("dnn", 1)
 * (minor 5) ------------------------------------------------------------------
 * Tensors are contiguous and laid out as flx's WHCN (column-major (W, H, C,
 * N), which is row-major NCHW, the layout cuDNN and oneDNN take): an image
 * batch is (spatial..., channels, batch) with spatial dim 0 (W) fastest.
 * Spatial sizes, kernels, strides, paddings and dilations are listed in that
 * order, dim 0 first, for nspatial (1 to FLX_DNN_MAX_SPATIAL) dims. Every
 * descriptor's output sizes are computed by libflx and checked (>= 1):
 *   out = (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) / stride + 1
 * Padding may differ between the two sides of a dim (Flux's SamePad for an
 * even kernel): a backend whose library pads both sides alike pads the
 * input itself. Outputs are overwritten (never accumulated). dtypes: F32
 * and F64 are required; F16 and BF16 are optional (FLX_ERR_UNSUPPORTED,
 * before anything is queued, where a backend lacks them). Scratch memory
 * follows "workspace and reserve space" above. */
#define FLX_DNN_MAX_SPATIAL 3

/* Cross-correlation (cuDNN's CROSS_CORRELATION mode, oneDNN's convolution;
 * Flux's Conv flips the kernel in libflx), with groups:
 *   x  (in_size..., in_channels, batch)
 *   w  (kernel..., in_channels / groups, out_channels): row-major OIHW
 *   b  out_channels elements, or a NULL buf for none
 *   y  (out_size..., out_channels, batch)
 * y[o, co, n] = b[co] + sum over g's input channels ci and window k of
 *   x[o * stride - pad_lo + k * dilation, ci, n] * w[k, ci - g * cin_g, co]
 * (g = co / (out_channels / groups), cin_g = in_channels / groups; x is 0
 * outside its bounds). Both channel counts are multiples of groups.
 * Backward: conv_backward_data writes dx (the size of x) from dy (the size
 * of y) and w; conv_backward_filter writes dw (the size of w) from x and
 * dy, and db = sum of dy over everything but its channel dim when db.buf is
 * set. conv_backward (minor 13, optional) writes dx, dw and db (when its
 * buf is set) in one call, as the two calls would: a backend may share
 * their work (the CPU's reorders each piece of dy once for both). */
typedef enum flx_conv_pass {
  FLX_CONV_FORWARD = 0,
  FLX_CONV_BACKWARD_DATA = 1,
  FLX_CONV_BACKWARD_FILTER = 2,
  FLX_CONV_BACKWARD = 3 /* minor 13: both backward passes (conv_backward) */
} flx_conv_pass;

typedef struct flx_conv_desc {
  uint32_t struct_size; /* sizeof(flx_conv_desc) as the caller was built */
  int32_t dtype;
  int32_t nspatial;
  int32_t groups;        /* >= 1 */
  int32_t deterministic; /* 1: algorithms whose results do not vary from run to run */
  int32_t reserved;      /* 0 */
  int64_t batch, in_channels, out_channels;
  int64_t in_size[FLX_DNN_MAX_SPATIAL], out_size[FLX_DNN_MAX_SPATIAL], kernel[FLX_DNN_MAX_SPATIAL];
  int64_t stride[FLX_DNN_MAX_SPATIAL], dilation[FLX_DNN_MAX_SPATIAL];
  int64_t pad_lo[FLX_DNN_MAX_SPATIAL], pad_hi[FLX_DNN_MAX_SPATIAL];
  flx_mem x, w, b, y;     /* forward: y = conv(x, w) + b */
  flx_mem dy, dx, dw, db; /* backward */
  flx_mem workspace;      /* of workspace_bytes, as conv_workspace said for this pass */
  uint64_t workspace_bytes;
} flx_conv_desc;

/* Pooling over windows of each channel:
 *   MAX   the largest element of the window; padding never wins (-Inf); a
 *         NaN in the window gives NaN. Backward sends dy to the first
 *         largest element of each window (the libraries' choice: cuDNN and
 *         oneDNN pick the first in row-major window order).
 *   MEAN  the window's sum divided by its full size, padding included
 *         (NNlib's meanpool, PyTorch's count_include_pad).
 * x (in_size..., channels, batch), y (out_size..., channels, batch).
 * pool_forward with training = 1 also fills `reserve` (pool_reserve_size
 * bytes) for pool_backward, which gets x, y, dy and that reserve and writes
 * dx. */
typedef enum flx_pool_mode {
  FLX_POOL_MAX = 0,
  FLX_POOL_MEAN = 1
} flx_pool_mode;

typedef struct flx_pool_desc {
  uint32_t struct_size; /* sizeof(flx_pool_desc) as the caller was built */
  int32_t dtype;
  int32_t mode; /* flx_pool_mode */
  int32_t nspatial;
  int32_t training; /* forward: 1 when pool_backward will follow */
  int64_t batch, channels;
  int64_t in_size[FLX_DNN_MAX_SPATIAL], out_size[FLX_DNN_MAX_SPATIAL], window[FLX_DNN_MAX_SPATIAL];
  int64_t stride[FLX_DNN_MAX_SPATIAL], pad_lo[FLX_DNN_MAX_SPATIAL], pad_hi[FLX_DNN_MAX_SPATIAL];
  flx_mem x, y, dy, dx;
  flx_mem reserve; /* of reserve_bytes: written by a training forward, read by backward */
  uint64_t reserve_bytes;
} flx_pool_desc;

/* Batch normalisation per channel of x (spatial, channels, batch), spatial
 * the product of the spatial sizes (1 after a Dense layer):
 *   training   mean and biased variance over (spatial, batch) of each
 *              channel; y = scale * (x - mean) / sqrt(var + epsilon) + bias;
 *              saved_mean and saved_invstd = 1 / sqrt(var + epsilon) are
 *              written for the backward call; when running_mean.buf is set
 *              the running statistics move as Flux's do:
 *                running_mean = (1 - momentum) * running_mean + momentum * mean
 *                running_var  = (1 - momentum) * running_var
 *                               + momentum * var * m / (m - 1)
 *              (m = spatial * batch, the unbiased variance; m = 1 keeps var)
 *   inference  y from running_mean and running_var.
 * scale and bias are NULL bufs for a BatchNorm without affine parameters
 * (1 and 0). The statistics, scale and bias (channels elements each) have
 * param_dtype: dtype for F32 and F64, F32 for F16 and BF16 (cuDNN's rule).
 * batchnorm_backward writes dx, and dscale and dbias when their bufs are
 * set, from x, dy, scale and the saved statistics of the training forward. */
typedef struct flx_batchnorm_desc {
  uint32_t struct_size; /* sizeof(flx_batchnorm_desc) as the caller was built */
  int32_t dtype;
  int32_t param_dtype;
  int32_t training;
  int32_t reserved; /* 0 */
  int64_t spatial, channels, batch;
  double epsilon, momentum;
  flx_mem x, y, scale, bias;
  flx_mem running_mean, running_var;
  flx_mem saved_mean, saved_invstd;
  flx_mem dy, dx, dscale, dbias;
} flx_batchnorm_desc;

/* A recurrent layer over a whole sequence (minor 6, optional: a backend
 * without these calls, or answering FLX_ERR_UNSUPPORTED, before queuing
 * anything, for a case it does not run, gets the layer as GEMMs and maps of
 * the compute table instead). One layer, one direction, sequences in flx's
 * layout (features, time, batch):
 *   x   (input, time, batch)
 *   h0, c0  (hidden, batch): the initial state (c0: LSTM only)
 *   wi  (gates * hidden, input), wh (gates * hidden, hidden): the gates'
 *       rows stacked in Flux's order, the first gate's on top
 *   b   gates * hidden elements, or a NULL buf for none
 *   y   (hidden, time, batch): every step's hidden state
 *   hn, cn  (hidden, batch): the last states; NULL bufs: not wanted
 * FLX_RNN_LSTM has 4 gates, i, f, g, o (PyTorch's and oneDNN's order too):
 *   c' = sigmoid(f) c + sigmoid(i) tanh(g),  h' = sigmoid(o) tanh(c').
 * FLX_RNN_GRU (minor 7) has 3 gates, r, z, n (PyTorch's order), with gx =
 * wi x + b and gh = wh h split in three and bh the candidate's recurrent
 * bias (hidden elements; a NULL buf: none, Flux's GRU v1):
 *   r = sigmoid(gx_r + gh_r), z = sigmoid(gx_z + gh_z),
 *   n = tanh(gx_n + r (gh_n + bh)),  h' = (1 - z) n + z h
 * (c0, cn, dcn and dc0 unused). Its backward writes dbh where that buf is set.
 * FLX_RNN_TANH and FLX_RNN_RELU (minor 7) have one gate, Flux's RNNCell:
 *   h' = act(wi x + wh h + b)  (c0, cn, dcn and dc0 unused).
 * rnn_forward with training = 1 also fills `reserve` (rnn_reserve_size
 * bytes for the same descriptor) for rnn_backward, which takes the
 * forward's fields (the same values and memory, y included) with that
 * reserve, dy (the size of y) and dhn, dcn (NULL bufs: zero), and writes dx,
 * dh0, dc0, dwi, dwh and db where their bufs are set (overwritten). A
 * backend that ran a training forward runs its backward. */
typedef enum flx_rnn_cell {
  FLX_RNN_LSTM = 0,
  FLX_RNN_GRU = 1,  /* minor 7 */
  FLX_RNN_TANH = 2, /* minor 7 */
  FLX_RNN_RELU = 3  /* minor 7 */
} flx_rnn_cell;

typedef struct flx_rnn_desc {
  uint32_t struct_size; /* sizeof(flx_rnn_desc) as the caller was built */
  int32_t dtype;
  int32_t cell;     /* flx_rnn_cell */
  int32_t training; /* forward: 1 when rnn_backward will follow */
  int64_t input, hidden, batch, time;
  flx_mem x, h0, c0, wi, wh, b, y, hn, cn;  /* forward */
  flx_mem dy, dhn, dcn;                     /* backward, in */
  flx_mem dx, dh0, dc0, dwi, dwh, db;       /* backward, out */
  flx_mem reserve; /* of reserve_bytes: written by a training forward, read by backward */
  uint64_t reserve_bytes;
  flx_mem bh, dbh; /* minor 7: FLX_RNN_GRU's candidate recurrent bias and its gradient */
} flx_rnn_desc;

/* Scaled dot-product attention whose scores are never held whole (minor 7,
 * optional: a backend without these calls, or answering FLX_ERR_UNSUPPORTED
 * before queuing anything for a case it does not run, gets attention as
 * tiles of keys through the compute table's GEMMs and maps instead,
 * src/ops/attention_tiled.cpp). Memory is linear in the lengths: the
 * forward keeps one log-sum-exp per query row, and the backward recomputes
 * the probabilities tile by tile from it.
 *
 * Per head h < nheads and batch b, every tensor contiguous in flx's
 * column-major layout (dq = head_dim_qk, dv = head_dim_v features a head):
 *   q  (dq, nheads, q_len, batch)      k  (dq, nheads, kv_len, batch)
 *   v  (dv, nheads, kv_len, batch)     o  (dv, nheads, q_len, batch)
 *   s[j, i] = scale * sum_d k[d, h, j, b] q[d, h, i, b] + bias[j, i, h, b]
 *   allowed(j, i) = mask[j, i, h, b] != 0 (when mask.buf is set)
 *                   and j <= i (when causal)
 *   lse[i, h, b] = log sum over allowed j of exp(s[j, i])
 *   p[j, i] = exp(s[j, i] - lse[i]) where allowed, else 0
 *   o[:, h, i, b] = sum_j p[j, i] * keep[j, i, h, b] / (1 - dropout) * v[:, h, j, b]
 * A row with no allowed key has lse = -Inf and an output of NaN (the
 * softmax of a row of -Inf). bias (dtype) and mask (Bool, one byte) are
 * read through element strides over (j, i, h, b), 0 to broadcast; a NULL
 * buf is none. Dropout (0 <= dropout < 1; 0: none): keep = 1 where element
 * e = j + kv_len * (i + q_len * (h + nheads * b)) of a uniform fill of dtype
 * drawn with (dropout_seed, dropout_offset) (the compute table's `random`,
 * FLX_RANDOM_UNIFORM on [0, 1)) is >= dropout, else 0, both compared as
 * dtype values (dropout rounded to dtype, as a map's scalar operand is);
 * a kept weight is multiplied by 1 / (1 - dropout) rounded to dtype. The
 * probabilities sum to one before it. A row whose lse is -Inf has NaN
 * gradients (as its output).
 * lse is Float32 (Float64 for F64), (q_len, nheads, batch); the forward
 * writes it when lse.buf is set (training), and attention_backward reads
 * it, with the forward's fields (the same values: q, k, v, o, mask, bias,
 * dropout), and dout (the size of o); it writes dq, dk and dv (the sizes
 * of q, k, v; overwritten) and, when dbias.buf is set, dbias = dloss/ds,
 * (kv_len, q_len, nheads, batch) contiguous of dtype (libflx sums it over
 * the dims a broadcast bias lacks). All sizes are >= 1 (libflx handles
 * empty ones); causal comes with q_len == kv_len. Scratch memory follows
 * "workspace and reserve space" above: attention_workspace says how many
 * bytes pass 0 (forward) or 1 (backward) of d needs. */
typedef struct flx_attention_desc {
  uint32_t struct_size; /* sizeof(flx_attention_desc) as the caller was built */
  int32_t dtype;
  int32_t causal;
  int32_t reserved; /* 0 */
  int64_t head_dim_qk, head_dim_v, nheads, q_len, kv_len, batch;
  double scale;   /* 1 / sqrt(head_dim_qk) in NNlib's dot_product_attention */
  double dropout; /* probability of dropping a weight, in [0, 1) */
  uint64_t dropout_seed, dropout_offset;
  int64_t mask_stride[4], bias_stride[4];  /* element strides over (j, i, h, b) */
  flx_mem q, k, v, mask, bias, o, lse;     /* forward */
  flx_mem dout;                            /* backward, in */
  flx_mem dq, dk, dv, dbias;               /* backward, out */
  flx_mem workspace; /* of workspace_bytes, as attention_workspace said for this pass */
  uint64_t workspace_bytes;
} flx_attention_desc;

/* Group normalisation (minor 10, optional: a backend without these calls,
 * or answering FLX_ERR_UNSUPPORTED before queuing anything for a case it
 * does not run, gets GroupNorm as batchnorm_* and maps). x is (spatial,
 * channels, batch), contiguous, with channels = groups * cpg. Each set
 * (g, n), the spatial * cpg values of channels g*cpg .. (g+1)*cpg - 1 of
 * sample n, is normalised with its own mean and biased variance:
 *   y[s, c, n] = (x[s, c, n] - mean[g, n]) * invstd[g, n] * scale[c] + bias[c]
 *   invstd = 1 / sqrt(var + epsilon)
 * scale and bias (channels elements of dtype) are NULL bufs for none (1 and
 * 0). groupnorm_forward writes y, and saved_mean and saved_invstd (groups *
 * batch elements of dtype, g fastest) when their bufs are set;
 * groupnorm_backward reads x, dy, scale and the saved statistics and writes
 * dx, and dscale and dbias when their bufs are set. All sizes are >= 1. */
typedef struct flx_groupnorm_desc {
  uint32_t struct_size; /* sizeof(flx_groupnorm_desc) as the caller was built */
  int32_t dtype;
  int64_t spatial, channels, groups, batch;
  double epsilon;
  flx_mem x, y, scale, bias, saved_mean, saved_invstd; /* forward */
  flx_mem dy;                                          /* backward, in */
  flx_mem dx, dscale, dbias;                           /* backward, out */
} flx_groupnorm_desc;

typedef struct flx_dnn_table {
  uint32_t struct_size; /* sizeof(flx_dnn_table) as the backend was built */
  uint32_t version;     /* FLX_TABLE_DNN_VERSION */
  /* bytes of workspace pass `pass` (flx_conv_pass) of d needs (d's memory
   * fields unset); may be NULL: no workspace */
  int (*conv_workspace)(void* ctx, int dev, const flx_conv_desc* d, int32_t pass, uint64_t* bytes);
  int (*conv_forward)(void* ctx, int dev, const flx_conv_desc* d, flx_stream s);
  int (*conv_backward_data)(void* ctx, int dev, const flx_conv_desc* d, flx_stream s);
  int (*conv_backward_filter)(void* ctx, int dev, const flx_conv_desc* d, flx_stream s);
  /* bytes of reserve a training pool_forward of d writes; may be NULL: none */
  int (*pool_reserve_size)(void* ctx, int dev, const flx_pool_desc* d, uint64_t* bytes);
  int (*pool_forward)(void* ctx, int dev, const flx_pool_desc* d, flx_stream s);
  int (*pool_backward)(void* ctx, int dev, const flx_pool_desc* d, flx_stream s);
  int (*batchnorm_forward)(void* ctx, int dev, const flx_batchnorm_desc* d, flx_stream s);
  int (*batchnorm_backward)(void* ctx, int dev, const flx_batchnorm_desc* d, flx_stream s);
#if FLX_BACKEND_TARGET_MINOR >= 6
  /* minor 6, optional: recurrent layers (flx_rnn_desc). Bytes of reserve a
   * training rnn_forward of d writes (d's memory fields unset). */
  int (*rnn_reserve_size)(void* ctx, int dev, const flx_rnn_desc* d, uint64_t* bytes);
  int (*rnn_forward)(void* ctx, int dev, const flx_rnn_desc* d, flx_stream s);
  int (*rnn_backward)(void* ctx, int dev, const flx_rnn_desc* d, flx_stream s);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 7
  /* minor 7, optional: attention without its scores (flx_attention_desc).
   * Bytes of workspace pass 0 (forward) or 1 (backward) of d needs (d's
   * memory fields unset); may be NULL: none. */
  int (*attention_workspace)(void* ctx, int dev, const flx_attention_desc* d, int32_t pass, uint64_t* bytes);
  int (*attention_forward)(void* ctx, int dev, const flx_attention_desc* d, flx_stream s);
  int (*attention_backward)(void* ctx, int dev, const flx_attention_desc* d, flx_stream s);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 10
  /* minor 10, optional: group normalisation (flx_groupnorm_desc) */
  int (*groupnorm_forward)(void* ctx, int dev, const flx_groupnorm_desc* d, flx_stream s);
  int (*groupnorm_backward)(void* ctx, int dev, const flx_groupnorm_desc* d, flx_stream s);
#endif
#if FLX_BACKEND_TARGET_MINOR >= 13
  /* minor 13, optional: both backward passes of a convolution (dx, dw, and
   * db when its buf is set) in one call; its workspace is conv_workspace's
   * for pass FLX_CONV_BACKWARD. libflx calls it only where it would call
   * both conv_backward_data and conv_backward_filter. */
  int (*conv_backward)(void* ctx, int dev, const flx_conv_desc* d, flx_stream s);
#endif
} flx_dnn_table;

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

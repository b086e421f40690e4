/* flx backend ABI: the compute table, get_table("compute", 1): fill,
 * random, cast, map, reduce, GEMM (and its epilogue), gather/scatter,
 * permute, softmax and the optimisers' element updates, with their
 * descriptors (include/flx/backend.h has the ABI's rules). Plain C. */
#ifndef FLX_BACKEND_COMPUTE_H
#define FLX_BACKEND_COMPUTE_H

#include "flx/backend_ops.h"
#include "flx/backend_rules.h"
#include "flx/backend_types.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_COMPUTE_H */

/* flx backend ABI — the boundary between libflx and a device backend.
 *
 * Plain C so that a backend can be built by any compiler and loaded with
 * dlopen: no C++ type and no exception crosses this line. A backend is one
 * struct of function pointers (flx_backend_iface) returned by the exported
 * entry point FLX_BACKEND_ENTRY_SYMBOL. The loader checks api_version and
 * struct_size before it calls anything else.
 *
 * Conventions
 *  - Every call takes the backend's own context pointer first.
 *  - Calls returning int return FLX_OK (0) or an flx_status; after a failure
 *    last_error() gives a human-readable message for the calling thread.
 *  - Device memory is an opaque flx_buffer plus a byte offset (flx_mem), so
 *    backends whose buffers are not pointers (OpenCL cl_mem) fit too.
 *  - Work is ordered on a stream (a CUDA stream, an OpenCL in-order queue);
 *    the NULL stream is the device's default stream. Backends that compute
 *    synchronously (the CPU) may ignore streams and events entirely.
 *  - Shapes are column-major (first index fastest); strides count elements;
 *    a stride of 0 broadcasts.
 *  - Every backend implements every compute call: libflx never falls back to
 *    the CPU in the middle of a device computation.
 */
#ifndef FLX_BACKEND_H
#define FLX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLX_BACKEND_API_VERSION 1u
#define FLX_BACKEND_ENTRY_SYMBOL "flx_backend_entry"
#define FLX_MAX_DIMS 8

typedef enum flx_dtype {
  FLX_F32 = 0,
  FLX_F64 = 1,
  FLX_F16 = 2,
  FLX_BF16 = 3,
  FLX_I32 = 4,
  FLX_I64 = 5,
  FLX_U8 = 6,
  FLX_BOOL = 7
} flx_dtype;

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
 * that dtype, or Bool for comparisons. alpha/beta parametrise some ops. */
typedef enum flx_map_op {
  /* unary */
  FLX_OP_COPY = 0,
  FLX_OP_NEG,
  FLX_OP_ABS,
  FLX_OP_SIGN,
  FLX_OP_SQUARE,
  FLX_OP_SQRT,
  FLX_OP_EXP,
  FLX_OP_LOG,
  FLX_OP_SIGMOID,
  FLX_OP_TANH,
  FLX_OP_RELU,
  FLX_OP_GELU,      /* tanh approximation, as NNlib.gelu */
  FLX_OP_LEAKYRELU, /* alpha = negative slope */
  FLX_OP_ELU,       /* alpha */
  FLX_OP_SWISH,
  FLX_OP_SOFTPLUS,
  FLX_OP_NOT,
  FLX_OP_CLAMP, /* clamp to [alpha, beta] */
  FLX_OP_RECIP,
  FLX_OP_GELU_ERF, /* exact form x/2 (1 + erf(x/sqrt 2)), as PyTorch's nn.GELU() */
  /* binary */
  FLX_OP_ADD = 32,
  FLX_OP_SUB,
  FLX_OP_MUL,
  FLX_OP_DIV,
  FLX_OP_POW,
  FLX_OP_MAX,
  FLX_OP_MIN,
  FLX_OP_XLOGY, /* x*log(y), 0 where x == 0 */
  FLX_OP_EQ,    /* comparisons write Bool */
  FLX_OP_NE,
  FLX_OP_LT,
  FLX_OP_LE,
  FLX_OP_GT,
  FLX_OP_GE,
  /* derivative products for activations: (x or y, upstream gradient g) */
  FLX_OP_RELU_GRAD = 64, /* (x, g) */
  FLX_OP_GELU_GRAD,      /* (x, g) */
  FLX_OP_LEAKYRELU_GRAD, /* (x, g), alpha */
  FLX_OP_ELU_GRAD,       /* (x, g), alpha */
  FLX_OP_SWISH_GRAD,     /* (x, g) */
  FLX_OP_SOFTPLUS_GRAD,  /* (x, g) */
  FLX_OP_SIGMOID_GRAD,   /* (y, g): g*y*(1-y) */
  FLX_OP_TANH_GRAD,      /* (y, g): g*(1-y^2) */
  FLX_OP_ABS_GRAD,       /* (x, g): g*sign(x) */
  FLX_OP_CLAMP_GRAD,     /* (x, g): g where alpha <= x <= beta */
  FLX_OP_GELU_ERF_GRAD,  /* (x, g) */
  /* ternary */
  FLX_OP_WHERE = 96 /* in0 (Bool) ? in1 : in2 */
} flx_map_op;

typedef struct flx_operand {
  flx_mem mem;
  int64_t strides[FLX_MAX_DIMS];
  int32_t is_scalar; /* use `scalar` instead of memory */
  double scalar;
} flx_operand;

typedef struct flx_map_desc {
  int32_t op;
  int32_t ndim;
  int64_t shape[FLX_MAX_DIMS]; /* output shape; the output is contiguous */
  int32_t ninputs;
  int32_t in_dtype;  /* dtype of every input (Bool for WHERE's in0 aside) */
  int32_t out_dtype;
  flx_operand in[3];
  flx_mem out;
  double alpha, beta;
} flx_map_desc;

/* ---- reductions ----------------------------------------------------------
 * Reduce the contiguous input over the dims whose bit is set in `mask`; the
 * contiguous output has the input's shape with those dims set to 1.
 * out = scale * reduce(in). ARGMAX/ARGMIN reduce exactly one dim and write
 * 0-based Int64 indices (first occurrence). */
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
  int32_t ndim;
  int64_t shape[FLX_MAX_DIMS];
  uint32_t mask;
  double scale;
  flx_mem in, out;
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

/* ---- permute: dst = permutedims(src, perm), dst contiguous --------------- */
typedef struct flx_permute_desc {
  int32_t dtype;
  int32_t ndim;
  int64_t shape[FLX_MAX_DIMS]; /* input shape */
  int32_t perm[FLX_MAX_DIMS];  /* output dim d is input dim perm[d] */
  flx_mem src, dst;
} flx_permute_desc;

/* ---- softmax over the middle axis of (inner, axis, outer) ---------------- */
typedef struct flx_softmax_desc {
  int32_t dtype;
  int32_t log; /* logsoftmax */
  int64_t inner, axis_len, outer;
  flx_mem x, y;           /* forward: y = softmax(x) */
  flx_mem dy, dx;         /* backward: dx from y and dy (x unused) */
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

typedef enum flx_random_dist {
  FLX_RANDOM_UNIFORM = 0, /* [a, b) */
  FLX_RANDOM_NORMAL = 1   /* mean a, std b */
} flx_random_dist;

typedef struct flx_backend_iface {
  uint32_t api_version; /* FLX_BACKEND_API_VERSION */
  uint32_t struct_size; /* sizeof(flx_backend_iface) the backend was built with */
  const char* name;     /* "CPU", "CUDA", "OpenCL", ... */
  void* ctx;

  /* discovery: score > 0 when usable; otherwise 0 and a reason. */
  int (*functional)(void* ctx, char* reason, size_t reason_cap);
  int (*device_count)(void* ctx);
  int (*device_props)(void* ctx, int dev, flx_device_props* out);
  const char* (*last_error)(void* ctx);

  /* memory */
  int (*alloc)(void* ctx, int dev, size_t bytes, flx_buffer* out);
  void (*free)(void* ctx, int dev, flx_buffer buf);
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

  /* copies (asynchronous on s when the host side is pinned) */
  int (*copy_h2d)(void* ctx, int dev, flx_mem dst, const void* src, size_t bytes, flx_stream s);
  int (*copy_d2h)(void* ctx, int dev, void* dst, flx_mem src, size_t bytes, flx_stream s);
  int (*copy_d2d)(void* ctx, int dev, flx_mem dst, flx_mem src, size_t bytes, flx_stream s);
  int (*copy_peer)(void* ctx, int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes,
                   flx_stream s);

  /* compute */
  int (*fill)(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s);
  int (*random)(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed,
                uint64_t offset, double a, double b, flx_stream s);
  int (*cast)(void* ctx, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype,
              size_t n, flx_stream s);
  int (*map)(void* ctx, int dev, const flx_map_desc* d, flx_stream s);
  int (*reduce)(void* ctx, int dev, const flx_reduce_desc* d, flx_stream s);
  int (*gemm)(void* ctx, int dev, const flx_gemm_desc* d, flx_stream s);
  int (*gather)(void* ctx, int dev, const flx_index_desc* d, flx_stream s);
  int (*scatter_add)(void* ctx, int dev, const flx_index_desc* d, flx_stream s);
  int (*permute)(void* ctx, int dev, const flx_permute_desc* d, flx_stream s);
  int (*softmax)(void* ctx, int dev, const flx_softmax_desc* d, flx_stream s);
  int (*softmax_backward)(void* ctx, int dev, const flx_softmax_desc* d, flx_stream s);
  int (*optim_step)(void* ctx, int dev, const flx_optim_desc* d, flx_stream s);
} flx_backend_iface;

/* The one symbol a plugin exports. Returns NULL when the backend cannot
 * serve the requested ABI version. */
typedef const flx_backend_iface* (*flx_backend_entry_fn)(uint32_t requested_api_version);

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_H */

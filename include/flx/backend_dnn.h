/* flx backend ABI: the dnn table, get_table("dnn", 1) (minor 5):
 * convolution, pooling, batch and group normalisation, recurrent layers and
 * attention, as cuDNN and oneDNN offer them (include/flx/backend.h has the
 * ABI's rules). Plain C. */
#ifndef FLX_BACKEND_DNN_H
#define FLX_BACKEND_DNN_H

#include "flx/backend_types.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_DNN_H */

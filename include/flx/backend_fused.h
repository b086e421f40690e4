/* flx backend ABI: the fused table, get_table("fused", 1) (minor 14): every
 * fused op (a kernel that does what a composition of other ops would) by its
 * code, through three calls that never change. A new fused op is a new line
 * of FLX_FUSED_OPS, with a descriptor of its own where none fits: no table
 * grows, no struct changes its layout, and the call needs no new minor,
 * since libflx asks supports() before it runs an op and a backend answers
 * FLX_ERR_UNSUPPORTED for a code it does not know (libflx then composes the
 * op of others, or raises NotImplemented where it has no composition).
 *
 * The fused ops that came before this table are also the dnn table's calls
 * and the compute table's gemm_epilogue and rule_step (their codes name the
 * call); libflx uses those calls for a backend older than minor 14.
 * include/flx/backend.h has the ABI's rules. Plain C. */
#ifndef FLX_BACKEND_FUSED_H
#define FLX_BACKEND_FUSED_H

#include "flx/backend_compute.h"
#include "flx/backend_dnn.h"
#include "flx/backend_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLX_TABLE_FUSED "fused" /* fused ops by code (minor 14) */
#define FLX_TABLE_FUSED_VERSION 1u

/* Every fused op, once: X(NAME, code, descriptor, table, call), its code
 * FLX_FUSED_<NAME> and its descriptor type; `table` and `call` name the
 * older table's call that runs it for a backend before minor 14 (dnn or
 * compute), or are `none` for an op that came with or after this table.
 * A descriptor's workspace (conv, attention) or reserve (pool, rnn) is
 * sized by scratch_bytes with the op's code. */
#define FLX_FUSED_OPS(X)                                                  \
  X(CONV_FORWARD, 1, flx_conv_desc, dnn, conv_forward)                    \
  X(CONV_BACKWARD_DATA, 2, flx_conv_desc, dnn, conv_backward_data)        \
  X(CONV_BACKWARD_FILTER, 3, flx_conv_desc, dnn, conv_backward_filter)    \
  X(CONV_BACKWARD, 4, flx_conv_desc, dnn, conv_backward)                  \
  X(POOL_FORWARD, 5, flx_pool_desc, dnn, pool_forward)                    \
  X(POOL_BACKWARD, 6, flx_pool_desc, dnn, pool_backward)                  \
  X(BATCHNORM_FORWARD, 7, flx_batchnorm_desc, dnn, batchnorm_forward)     \
  X(BATCHNORM_BACKWARD, 8, flx_batchnorm_desc, dnn, batchnorm_backward)   \
  X(RNN_FORWARD, 9, flx_rnn_desc, dnn, rnn_forward)                       \
  X(RNN_BACKWARD, 10, flx_rnn_desc, dnn, rnn_backward)                    \
  X(ATTENTION_FORWARD, 11, flx_attention_desc, dnn, attention_forward)    \
  X(ATTENTION_BACKWARD, 12, flx_attention_desc, dnn, attention_backward)  \
  X(GROUPNORM_FORWARD, 13, flx_groupnorm_desc, dnn, groupnorm_forward)    \
  X(GROUPNORM_BACKWARD, 14, flx_groupnorm_desc, dnn, groupnorm_backward)  \
  X(GEMM_EPILOGUE, 15, flx_gemm_epilogue_desc, compute, gemm_epilogue)    \
  X(RULE_STEP, 16, flx_rule_desc, compute, rule_step)

#define FLX_FUSED_ENUMERATOR_(NAME, code, desc, table, call) FLX_FUSED_##NAME = code,
typedef enum flx_fused_op { FLX_FUSED_OPS(FLX_FUSED_ENUMERATOR_) } flx_fused_op;
#undef FLX_FUSED_ENUMERATOR_

/* The scratch an op's descriptor carries: a workspace (freed right after the
 * call) or a reserve (written by a training forward op, kept with the
 * autodiff record for the backward op): backend.h, "workspace and reserve
 * space". */
typedef enum flx_fused_scratch {
  FLX_FUSED_WORKSPACE = 0,
  FLX_FUSED_RESERVE = 1
} flx_fused_scratch;

typedef struct flx_fused_table {
  uint32_t struct_size; /* sizeof(flx_fused_table) as the backend was built */
  uint32_t version;     /* FLX_TABLE_FUSED_VERSION */
  /* FLX_OK when dev runs op (a flx_fused_op) for d, whose memory fields are
   * unset; FLX_ERR_UNSUPPORTED when it does not (an unknown code, a dtype
   * or case it lacks). libflx asks before every run of a case. */
  int (*supports)(void* ctx, int dev, int32_t op, const void* d);
  /* Bytes of scratch `kind` (a flx_fused_scratch) op needs for d (d's
   * memory fields unset): 0 for none. */
  int (*scratch_bytes)(void* ctx, int dev, int32_t op, const void* d, int32_t kind, uint64_t* bytes);
  /* Runs op on d's operands, ordered on s. FLX_ERR_UNSUPPORTED declines the
   * case (then the op's outputs are left to be overwritten). */
  int (*run)(void* ctx, int dev, int32_t op, const void* d, flx_stream s);
} flx_fused_table;

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_FUSED_H */

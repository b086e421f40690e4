// The fused ops of FLX_FUSED_OPS (include/flx/backend_fused.h) run through
// the older tables' calls that the list names: what a backend's fused table
// is made of (each backend serves it with these three functions over its own
// dnn and compute tables), and what libflx uses for a backend older than
// minor 14, which has no fused table. Written once, for both.
#pragma once

#include <cstdint>

#include "flx/backend.h"

namespace flx::abi {

// The older call of a fused op: its table (dnn or compute, or none for an
// op that came with the fused table) and whether that table sets it.
struct FusedTables {
  const flx_dnn_table* dnn = nullptr;          // null: no dnn table
  const flx_compute_table* compute = nullptr;  // null: none (a test's)
};

#define FLX_FUSED_HAS_dnn_(call) (t.dnn && t.dnn->call)
#define FLX_FUSED_HAS_compute_(call) (t.compute && t.compute->call)
#define FLX_FUSED_HAS_none_(call) false
#define FLX_FUSED_CALL_dnn_(call, Desc) t.dnn->call(ctx, dev, static_cast<const Desc*>(d), s)
#define FLX_FUSED_CALL_compute_(call, Desc) t.compute->call(ctx, dev, static_cast<const Desc*>(d), s)
#define FLX_FUSED_CALL_none_(call, Desc) FLX_ERR_UNSUPPORTED

// FLX_OK where the older tables run op (d is not read), else
// FLX_ERR_UNSUPPORTED.
inline int fused_supports(const FusedTables& t, int32_t op) {
  switch (op) {
#define FLX_FUSED_SUPPORTS_(NAME, code, Desc, table, call) \
  case code: return FLX_FUSED_HAS_##table##_(call) ? FLX_OK : FLX_ERR_UNSUPPORTED;
    FLX_FUSED_OPS(FLX_FUSED_SUPPORTS_)
#undef FLX_FUSED_SUPPORTS_
  }
  return FLX_ERR_UNSUPPORTED;
}

// op on d through its older call, ordered on s.
inline int fused_run(const FusedTables& t, void* ctx, int dev, int32_t op, const void* d, flx_stream s) {
  switch (op) {
#define FLX_FUSED_RUN_(NAME, code, Desc, table, call) \
  case code: return FLX_FUSED_HAS_##table##_(call) ? FLX_FUSED_CALL_##table##_(call, Desc) : FLX_ERR_UNSUPPORTED;
    FLX_FUSED_OPS(FLX_FUSED_RUN_)
#undef FLX_FUSED_RUN_
  }
  return FLX_ERR_UNSUPPORTED;
}

// The scratch op asks for through the older queries: a convolution's and
// attention's workspace (by pass), pooling's and the recurrent op's reserve.
inline int fused_scratch_bytes(const FusedTables& t, void* ctx, int dev, int32_t op, const void* d, int32_t kind,
                               uint64_t* bytes) {
  *bytes = 0;
  const bool workspace = kind == FLX_FUSED_WORKSPACE;
  auto conv = [&](flx_conv_pass pass) {
    return workspace && t.dnn && t.dnn->conv_workspace
               ? t.dnn->conv_workspace(ctx, dev, static_cast<const flx_conv_desc*>(d), int32_t(pass), bytes)
               : FLX_OK;
  };
  auto attention = [&](int32_t pass) {
    return workspace && t.dnn && t.dnn->attention_workspace
               ? t.dnn->attention_workspace(ctx, dev, static_cast<const flx_attention_desc*>(d), pass, bytes)
               : FLX_OK;
  };
  switch (op) {
    case FLX_FUSED_CONV_FORWARD: return conv(FLX_CONV_FORWARD);
    case FLX_FUSED_CONV_BACKWARD_DATA: return conv(FLX_CONV_BACKWARD_DATA);
    case FLX_FUSED_CONV_BACKWARD_FILTER: return conv(FLX_CONV_BACKWARD_FILTER);
    case FLX_FUSED_CONV_BACKWARD: return conv(FLX_CONV_BACKWARD);
    case FLX_FUSED_ATTENTION_FORWARD: return attention(0);
    case FLX_FUSED_ATTENTION_BACKWARD: return attention(1);
    case FLX_FUSED_POOL_FORWARD:
      return !workspace && t.dnn && t.dnn->pool_reserve_size
                 ? t.dnn->pool_reserve_size(ctx, dev, static_cast<const flx_pool_desc*>(d), bytes)
                 : FLX_OK;
    case FLX_FUSED_RNN_FORWARD:
      return !workspace && t.dnn && t.dnn->rnn_reserve_size
                 ? t.dnn->rnn_reserve_size(ctx, dev, static_cast<const flx_rnn_desc*>(d), bytes)
                 : FLX_OK;
    default: return FLX_OK;
  }
}

#undef FLX_FUSED_HAS_dnn_
#undef FLX_FUSED_HAS_compute_
#undef FLX_FUSED_HAS_none_
#undef FLX_FUSED_CALL_dnn_
#undef FLX_FUSED_CALL_compute_
#undef FLX_FUSED_CALL_none_

}  // namespace flx::abi

// Inside a backend's namespace: its fused table (minor 14), made of its dnn
// table (or nullptr) and compute table: `const flx_fused_table fused_table =
// FLX_FUSED_TABLE_OF(&dnn_table, &compute_table);`, then served with the
// others (FLX_SERVE_TABLES). A fused op of the backend's own (a code with no
// older call) goes into a run and supports of its own that handle its code
// and pass the others to flx::abi::fused_run / fused_supports.
#define FLX_FUSED_TABLE_OF(dnn_ptr, compute_ptr)                                                                   \
  [] {                                                                                                            \
    auto t = ::flx::abi::table_header<flx_fused_table>();                                                         \
    t.supports = [](void*, int, int32_t op, const void*) {                                                        \
      return ::flx::abi::fused_supports({dnn_ptr, compute_ptr}, op);                                              \
    };                                                                                                            \
    t.scratch_bytes = [](void* ctx, int dev, int32_t op, const void* d, int32_t kind, uint64_t* bytes) {          \
      return ::flx::abi::fused_scratch_bytes({dnn_ptr, compute_ptr}, ctx, dev, op, d, kind, bytes);               \
    };                                                                                                            \
    t.run = [](void* ctx, int dev, int32_t op, const void* d, flx_stream s) {                                     \
      return ::flx::abi::fused_run({dnn_ptr, compute_ptr}, ctx, dev, op, d, s);                                   \
    };                                                                                                            \
    return t;                                                                                                     \
  }()

// Scaled dot-product attention whose scores are never held whole
// (dot_product_attention with .scores = false): one recorded op whose
// memory grows linearly with the sequence. The backend's own kernel runs it
// where it has one (the dnn table's attention_*, ABI minor 7: the CPU's
// backends/cpu/cpu_dnn_attention.cpp); elsewhere, or where the backend
// declines the case, tiles of keys through the compute table's GEMMs, maps
// and reductions (attention_tiled.cpp). Not installed.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "ops_internal.hpp"

namespace flx::ops {

// One call's operands, checked by the caller (src/layers/attention.cpp):
//   q (dq·nheads, q_len, batch), k (dq·nheads, kv_len, batch),
//   v (dv·nheads, kv_len, batch), of one floating dtype on one device;
//   mask: Bool, broadcastable to (kv_len, q_len, nheads, batch), or none;
//   bias: of q's dtype, broadcastable likewise, or none (differentiable);
//   dropout: the probability of dropping a weight, in [0, 1) (0: none), with
//   the (seed, offset) of the uniform fill the materialising path's Dropout
//   would have drawn (detail::next_fill_stream).
struct AttentionArgs {
  Tensor q, k, v;
  int64_t nheads = 1;
  Tensor mask;
  bool causal = false;
  Tensor bias;
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
};

// The output (dv·nheads, q_len, batch), recorded with one autodiff node
// (first order) whose backward recomputes the probabilities from one
// log-sum-exp per query row. Sizes of 0 are handled here, without the
// backend: no key gives zeros (as the materialising path's empty product).
Tensor attention_linear(const AttentionArgs& a);

// FLX_ATTENTION_LIBRARY=0 in the environment (read once) runs the tiled
// path even where the backend has its own kernel, to compare them; tests
// switch it here. set_attention_key_tile(n) makes the tiled path's tiles n
// keys (tests: ragged tiles at short lengths); 0 restores the default.
bool attention_library_enabled();
void set_attention_library(bool on);
int64_t attention_key_tile();
void set_attention_key_tile(int64_t keys);

// ---- shared by attention.cpp and attention_tiled.cpp --------------------------

// The sizes of a call, as flx_attention_desc names them.
struct AttentionDims {
  int64_t dq = 0, dv = 0, nheads = 1, q_len = 0, kv_len = 0, batch = 0;
  double scale = 1;
  int64_t groups() const { return nheads * batch; }
};
AttentionDims attention_dims(const AttentionArgs& a);

// A broadcastable operand's element strides over (j, i, h, b), 0 where it
// broadcasts (mask and bias).
std::array<int64_t, 4> broadcast_strides(const Tensor& t);

// The tiled path (attention_tiled.cpp). What its backward needs from the
// forward: q, k and v permuted to (d, len, nheads, batch) in the compute
// type (Float64 for Float64, else Float32: halves are computed in float),
// the output in that layout and type, and the log-sum-exp per query row.
struct TiledSaved {
  Tensor qp, kp, vp, op, lse;
};
// The forward: o in flx's layout and a's dtype; *saved filled when not null.
Tensor tiled_forward(const AttentionArgs& a, TiledSaved* saved);
// The gradients (dq, dk, dv in the inputs' shapes and dtype; dbias in the
// bias's shape) from the output's gradient do, each where need[0..3] asks.
void tiled_backward(const AttentionArgs& a, const TiledSaved& s, const Tensor& dout, const bool* need, Tensor* grads);

}  // namespace flx::ops

namespace flx::detail {
// The (seed, offset) of the next random fill of the global generator, which
// it consumes as rand() does (one call's worth): dropout drawn in pieces
// then equals dropout drawn whole.
std::pair<uint64_t, uint64_t> next_fill_stream();
}  // namespace flx::detail

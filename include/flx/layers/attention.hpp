// Attention (Flux's attention.jl and NNlib's dot_product_attention): the
// multi-head dot-product attention of Transformers, as Flux's
// MultiHeadAttention, over (features, length, batch) sequences.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <ostream>
#include <utility>

#include "flx/functor.hpp"
#include "flx/layers/basic.hpp"
#include "flx/layers/normalise.hpp"

namespace flx {

// How attention may look, and what it returns:
//  - `mask` (Bool, broadcastable to (kv_len, q_len, nheads, batch)) is true
//    where a query may attend to a key; `causal` lets query i attend to keys
//    0..i only (make_causal_mask). Both may be given.
//  - `bias` (floating, broadcastable to (kv_len, q_len, nheads, batch)) is
//    added to the logits before the mask and the softmax, as NNlib's `bias`
//    (a relative-position bias, ALiBi); differentiable, its gradient summed
//    over the dims it broadcasts along.
//  - `scores = false`: the attention weights α are not returned (the second
//    result is an undefined tensor) and never held whole, forward or
//    backward: the output comes from one fused op (the backend's own kernel,
//    or tiles of keys through the compute table) that keeps one
//    log-sum-exp per query row, so memory grows linearly with the sequence
//    (docs/attention.md).
struct FLX_API AttentionOptions {
  Tensor mask;
  bool causal = false;
  Tensor bias;
  bool scores = true;
};

// NNlib's dot_product_attention: q (qk, q_len, batch), k (qk, kv_len,
// batch), v (v, kv_len, batch), split into nheads heads along the feature
// dim; returns the output (v, q_len, batch) and the attention weights
// α = softmax over keys of kᵀq / √(qk / nheads) + bias, masked, (kv_len,
// q_len, nheads, batch) (undefined with `.scores = false`). dropout:
// applied to α when training (Flux's fdrop); with `.scores = false` the
// same weights are dropped for the same seed.
FLX_API std::pair<Tensor, Tensor> dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                                                        const AttentionOptions& o = {}, const Dropout* dropout = nullptr);

// NNlib's make_causal_mask: a (len, len) Bool mask, true where key j <=
// query i, for x's sequence dim (dim 1 of (features, len, batch)).
FLX_API Tensor make_causal_mask(const Tensor& x);

// The dims of a MultiHeadAttention, Flux's general form
// (q_in, k_in, v_in) => (qk, v) => out.
struct FLX_API AttentionDims {
  int64_t q_in, k_in, v_in, qk, v, out;
  // Flux's MultiHeadAttention(dims::Int): every dim the same.
  static AttentionDims all(int64_t d) { return {d, d, d, d, d, d}; }
};

struct FLX_API MultiHeadAttentionOptions {
  int64_t nheads = 8;
  bool bias = false;           // biases in the four Dense projections
  double dropout_prob = 0.0;   // dropout on the attention weights, when training
};

// Flux's MultiHeadAttention: q, k and v projected by Dense layers (no bias
// by default, Glorot-uniform weights), dot-product attention over nheads
// heads, then an output projection. mha(q, k, v) returns (y, α): y is
// (out, q_len, batch), α the attention weights (kv_len, q_len, nheads,
// batch), undefined with `.scores = false` (mha(x, {.causal = true,
// .scores = false}): memory linear in the length); mha(x) is
// self-attention, mha(q, kv) uses kv as keys and values. An additive bias
// on the logits goes in as mha(q, k, v, bias) (Flux's) or {.bias = bias}.
struct FLX_API MultiHeadAttention {
  int64_t nheads = 8;
  Dense q_proj, k_proj, v_proj;
  Dropout attn_drop;
  Dense out_proj;

  explicit MultiHeadAttention(int64_t dim, const MultiHeadAttentionOptions& o = {});
  MultiHeadAttention(const AttentionDims& dims, const MultiHeadAttentionOptions& o = {});

  std::pair<Tensor, Tensor> operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& o = {}) const;
  // Flux's mha(q, k, v, bias; mask): the additive bias on the logits given
  // as the fourth argument (the same as o.bias, which must then be unset):
  // floating, broadcastable to (kv_len, q_len, nheads, batch) (an ALiBi or
  // relative-position bias), differentiable.
  std::pair<Tensor, Tensor> operator()(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                                       const AttentionOptions& o = {}) const;
  std::pair<Tensor, Tensor> operator()(const Tensor& q, const Tensor& kv, const AttentionOptions& o = {}) const {
    return (*this)(q, kv, kv, o);
  }
  std::pair<Tensor, Tensor> operator()(const Tensor& qkv, const AttentionOptions& o = {}) const {
    return (*this)(qkv, qkv, qkv, o);
  }
};
FLX_FUNCTOR(MultiHeadAttention, q_proj, k_proj, v_proj, attn_drop, out_proj)

// One line, as the other layers: MultiHeadAttention(64 => 64 => 64, nheads=8)
// (the general form when the input dims differ); `os << mha` adds the count.
FLX_API void show_compact(std::ostream& os, const MultiHeadAttention& m);
// The shape of y (the first result) for queries, keys and values of these
// shapes (outputsize.hpp): (out, q_len, batch).
FLX_API Shape outputsize(const MultiHeadAttention& m, const Shape& q, const Shape& k, const Shape& v);
inline Shape outputsize(const MultiHeadAttention& m, const Shape& q, const Shape& kv) { return outputsize(m, q, kv, kv); }
inline Shape outputsize(const MultiHeadAttention& m, const Shape& qkv) { return outputsize(m, qkv, qkv, qkv); }

}  // namespace flx

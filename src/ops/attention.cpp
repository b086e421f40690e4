// Attention without its scores (attention.hpp): the choice between the
// backend's own kernel and the tiled path, the empty cases, and the one
// autodiff record whose backward runs where the forward ran.
#include "attention.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include "backend_common/env_switch.hpp"

namespace flx::ops {
namespace {

// -1: not set by a test, FLX_ATTENTION_LIBRARY decides.
std::atomic<int> g_library{-1};
std::atomic<int64_t> g_key_tile{0};
constexpr int64_t kDefaultKeyTile = 256;  // attention_tiled.cpp says why

bool library_from_environment() {
  static const bool on = backend_common::env_switch("FLX_ATTENTION_LIBRARY", true);
  return on;
}

Tensor filled(DType t, const Shape& s, Device d, double v) {
  Tensor out = empty(t, s, d);
  if (out.numel()) fill(out, v);
  return out;
}

// The descriptor of a forward (and of its backward, which adds dout and
// the gradients).
flx_attention_desc describe(const AttentionArgs& a, const AttentionDims& d, const Tensor& o, const Tensor& lse) {
  flx_attention_desc r{};
  r.dtype = int32_t(a.q.dtype());
  r.causal = a.causal;
  r.head_dim_qk = d.dq;
  r.head_dim_v = d.dv;
  r.nheads = d.nheads;
  r.q_len = d.q_len;
  r.kv_len = d.kv_len;
  r.batch = d.batch;
  r.scale = d.scale;
  r.dropout = a.dropout;
  r.dropout_seed = a.seed;
  r.dropout_offset = a.offset;
  r.q = detail::mem(a.q);
  r.k = detail::mem(a.k);
  r.v = detail::mem(a.v);
  if (a.mask.defined()) {
    r.mask = detail::mem(a.mask);
    const auto s = broadcast_strides(a.mask);
    std::copy(s.begin(), s.end(), r.mask_stride);
  }
  if (a.bias.defined()) {
    r.bias = detail::mem(a.bias);
    const auto s = broadcast_strides(a.bias);
    std::copy(s.begin(), s.end(), r.bias_stride);
  }
  r.o = detail::mem(o);
  if (lse.defined()) r.lse = detail::mem(lse);
  return r;
}

// No query, key, value feature or sequence: zeros (the materialising path's
// empty products), with zero gradients.
Tensor empty_case(const AttentionArgs& a, const AttentionDims& d) {
  const Device dev = a.q.device();
  const DType t = a.q.dtype();
  Tensor o = filled(t, Shape{d.dv * d.nheads, d.q_len, d.batch}, dev, 0);
  autograd::record("dot_product_attention", autograd::Order::FirstOnly, o, {a.q, a.k, a.v, a.bias},
                   [t, dev, shapes = std::array<Shape, 4>{a.q.shape(), a.k.shape(), a.v.shape(),
                                                          a.bias.defined() ? a.bias.shape() : Shape{}},
                    bias_t = a.bias.defined() ? a.bias.dtype() : t](const Tensor&, const bool* need, Tensor* gi) {
                     for (int i = 0; i < 4; ++i)
                       if (need[i]) gi[i] = filled(i == 3 ? bias_t : t, shapes[size_t(i)], dev, 0);
                   });
  return o;
}

// The backend's gradients of a forward it ran.
void backend_backward(const AttentionArgs& a, const AttentionDims& d, const Tensor& o, const Tensor& lse,
                      const Tensor& g, const bool* need, Tensor* gi) {
  const DType t = a.q.dtype();
  const Tensor dout = g.to(t);
  flx_attention_desc r = describe(a, d, o, lse);
  r.dout = detail::mem(dout);
  // The call writes all three; the rule hands on those asked for.
  Tensor dq = empty(t, a.q.shape(), a.q.device()), dk = empty(t, a.k.shape(), a.q.device()),
         dv = empty(t, a.v.shape(), a.q.device()), dbias;
  r.dq = detail::mem(dq);
  r.dk = detail::mem(dk);
  r.dv = detail::mem(dv);
  if (need[3] && a.bias.defined()) {
    dbias = empty(t, Shape{d.kv_len, d.q_len, d.nheads, d.batch}, a.q.device());
    r.dbias = detail::mem(dbias);
  }
  const bool ran = detail::be(a.q).attention_backward(detail::dev(a.q), r);
  FLX_CHECK(ran, NotImplemented, "dot_product_attention (gradient) of ", t, " on ", a.q.device(),
            ": the backend ran the forward pass but declined its backward (FLX_ERR_UNSUPPORTED); a backend that "
            "runs attention_forward for a case must run attention_backward for it too. Set "
            "FLX_ATTENTION_LIBRARY=0 to run attention through the compute table instead");
  if (need[0]) gi[0] = dq;
  if (need[1]) gi[1] = dk;
  if (need[2]) gi[2] = dv;
  if (dbias.defined()) gi[3] = sum_to(dbias, a.bias.shape());
}

}  // namespace

bool attention_library_enabled() {
  const int v = g_library.load();
  return v < 0 ? library_from_environment() : v != 0;
}
void set_attention_library(bool on) { g_library = on ? 1 : 0; }
int64_t attention_key_tile() {
  const int64_t t = g_key_tile.load();
  return t > 0 ? t : kDefaultKeyTile;
}
void set_attention_key_tile(int64_t keys) { g_key_tile = keys > 0 ? keys : 0; }

AttentionDims attention_dims(const AttentionArgs& a) {
  AttentionDims d;
  d.nheads = a.nheads;
  d.dq = a.q.shape()[0] / a.nheads;
  d.dv = a.v.shape()[0] / a.nheads;
  d.q_len = a.q.shape()[1];
  d.kv_len = a.k.shape()[1];
  d.batch = a.q.shape()[2];
  d.scale = d.dq > 0 ? 1.0 / std::sqrt(double(d.dq)) : 1.0;  // no feature: every score is 0
  return d;
}

std::array<int64_t, 4> broadcast_strides(const Tensor& t) {
  std::array<int64_t, 4> s{};
  int64_t stride = 1;
  for (int k = 0; k < t.ndims() && k < 4; ++k) {
    s[size_t(k)] = t.shape()[k] == 1 ? 0 : stride;
    stride *= t.shape()[k];
  }
  return s;
}

Tensor attention_linear(const AttentionArgs& a) {
  const AttentionDims d = attention_dims(a);
  if (d.q_len == 0 || d.kv_len == 0 || d.batch == 0 || d.dv == 0) return empty_case(a, d);
  const bool training = detail::is_recording() && (autograd::tracked(a.q) || autograd::tracked(a.k) ||
                                                   autograd::tracked(a.v) || autograd::tracked(a.bias));
  const auto& be = detail::be(a.q);
  const Device dev = a.q.device();
  Tensor o, lse;
  TiledSaved saved;
  bool on_backend = false;
  // The backend's own kernel; sizes of 0 (a head of no query/key feature)
  // stay here, as the ABI asks.
  if (attention_library_enabled() && d.dq > 0 &&
      // (the composition below differentiates once as well)
      use_kernel(a.q, {FLX_FUSED_ATTENTION_FORWARD, FLX_FUSED_ATTENTION_BACKWARD}, autograd::Order::Higher)) {
    o = empty(a.q.dtype(), Shape{d.dv * d.nheads, d.q_len, d.batch}, dev);
    if (training) lse = empty(a.q.dtype() == Float64 ? Float64 : Float32, Shape{d.q_len, d.nheads, d.batch}, dev);
    on_backend = be.attention_forward(detail::dev(a.q), describe(a, d, o, lse));
  }
  if (!on_backend) {
    lse = Tensor{};
    o = tiled_forward(a, training ? &saved : nullptr);
  }
  if (!training) return o;
  // One node for the whole op: its backward runs where the forward ran, from
  // the inputs as they were (detached: the rule runs fused kernels, so it is
  // first order only).
  AttentionArgs kept = a;
  kept.q = a.q.detach();
  kept.k = a.k.detach();
  kept.v = a.v.detach();
  if (a.bias.defined()) kept.bias = a.bias.detach();
  autograd::record("dot_product_attention", autograd::Order::FirstOnly, o, {a.q, a.k, a.v, a.bias},
                   [kept, d, on_backend, o_saved = o.detach(), lse, saved](const Tensor& g, const bool* need,
                                                                           Tensor* gi) {
                     if (on_backend) return backend_backward(kept, d, o_saved, lse, g, need, gi);
                     bool want[4] = {need[0], need[1], need[2], need[3] && kept.bias.defined()};
                     tiled_backward(kept, saved, g.to(kept.q.dtype()), want, gi);
                   });
  return o;
}

}  // namespace flx::ops

// A Dense layer's act(W x .+ b) as one GEMM with a fused epilogue (bias and
// activation), where the backend offers gemm_epilogue (ABI minor 2), and its
// backward rule with the bias gradient fused into the weight gradient's
// GEMM. Whatever the backend declines runs as the unfused ops would, on the
// same device; the results are those of matmul, + and the activation, to
// rounding.
#include <cstdlib>
#include <cstring>

#include "ops_internal.hpp"
#include "backend_common/env_switch.hpp"

namespace flx::ops {
namespace {

// FLX_DENSE_FUSED=0 turns the fused path off (to compare timings, or to
// rule it out when hunting a bug); read once.
bool fused_enabled() {
  static const bool on = backend_common::env_switch("FLX_DENSE_FUSED", true);
  return on;
}

// C (m×n) = op(A) op(B) for contiguous matrices, as a one-product GEMM.
flx_gemm_desc gemm_desc(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c) {
  flx_gemm_desc d{};
  d.dtype = int32_t(c.dtype());
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = c.shape()[0];
  d.n = c.shape()[1];
  d.k = ta ? a.shape()[0] : a.shape()[1];
  d.alpha = 1;
  d.beta = 0;
  d.a = detail::mem(a);
  d.b = detail::mem(b);
  d.c = detail::mem(c);
  d.lda = a.shape()[0];
  d.ldb = b.shape()[0];
  d.ldc = c.shape()[0];
  d.batch = 1;
  return d;
}

// dW = dh xᵀ and db = the row sums of dh in one GEMM; false (nothing run)
// when the backend does not fuse it.
bool fused_weight_and_bias_grad(const Tensor& dh, const Tensor& x, Tensor* dw, Tensor* db) {
  const int64_t m = dh.shape()[0], k = x.shape()[0];
  Tensor w_grad = empty(dh.dtype(), Shape{m, k}, dh.device());
  Tensor b_grad = empty(dh.dtype(), Shape{m}, dh.device());
  flx_gemm_epilogue_desc d{};
  d.gemm = gemm_desc(dh, false, x, true, w_grad);
  d.epilogue = FLX_EPILOGUE_BGRADA;
  d.bias = detail::mem(b_grad);
  if (!detail::be(dh).gemm_epilogue(detail::dev(dh), d)) return false;
  *dw = std::move(w_grad);
  *db = std::move(b_grad);
  return true;
}

}  // namespace

Tensor dense_fused(const Tensor& w, const Tensor& x, const Tensor& b, DenseAct act) {
  if (!w.defined() || !x.defined() || !b.defined() || !fused_enabled()) return {};
  if (w.ndims() != 2 || x.ndims() != 2 || b.ndims() != 1) return {};
  const DType t = w.dtype();
  if (!is_floating(t) || x.dtype() != t || b.dtype() != t) return {};
  if (x.device() != w.device() || b.device() != w.device()) return {};
  const int64_t m = w.shape()[0], k = w.shape()[1], n = x.shape()[1];
  if (x.shape()[0] != k || b.shape()[0] != m || m == 0 || n == 0 || k == 0) return {};
  // Gelu's derivative is the kernel's own (FirstOnly); identity's and relu's
  // rules are built of recorded ops.
  const auto order = act == DenseAct::Gelu ? autograd::Order::FirstOnly : autograd::Order::Higher;
  if (!use_kernel(w, {FLX_FUSED_GEMM_EPILOGUE}, order)) return {};
  const auto& be = detail::be(w);

  const bool track =
      detail::is_recording() && (autograd::tracked(w) || autograd::tracked(x) || autograd::tracked(b));
  Tensor y = empty(t, Shape{m, n}, w.device());
  Tensor h;  // gelu's pre-activation, for its derivative
  flx_gemm_epilogue_desc d{};
  d.gemm = gemm_desc(w, false, x, false, y);
  d.epilogue = act == DenseAct::Relu   ? FLX_EPILOGUE_BIAS_RELU
               : act == DenseAct::Gelu ? FLX_EPILOGUE_BIAS_GELU
                                       : FLX_EPILOGUE_BIAS;
  d.bias = detail::mem(b);
  if (act == DenseAct::Gelu && track) {
    h = empty(t, Shape{m, n}, w.device());
    d.aux = detail::mem(h);
    d.aux_ld = m;
  }
  if (!be.gemm_epilogue(detail::dev(w), d)) return {};
  if (!track) return y;

  // The rule of matmul, + and the activation together. relu' comes from the
  // output (y > 0 exactly where W x + b > 0, NaN aside in both), gelu' from
  // the pre-activation. Like the unfused rules it is built of recorded ops
  // (gemm, *, sum_to) when an enclosing gradient call records the backward
  // pass, except gelu's, which is first order as gelu's own rule is.
  using autograd::Order;
  const char* op = act == DenseAct::Gelu ? "gelu" : act == DenseAct::Relu ? "relu" : "Dense";
  autograd::record(op, act == DenseAct::Gelu ? Order::FirstOnly : Order::Higher, y, {w, x, b},
                   [w, x, bshape = b.shape(), act, y = y.detach(), h](const Tensor& g0, const bool* need, Tensor* gi) {
                     const bool recorded = detail::is_recording();
                     const Tensor g = g0.to(y.dtype());
                     Tensor dh;
                     switch (act) {
                       case DenseAct::Identity: dh = g; break;
                       case DenseAct::Relu:
                         dh = recorded ? g * (y > 0.0).to(y.dtype()) : raw_binary(FLX_OP_RELU_GRAD, y, g);
                         break;
                       case DenseAct::Gelu: dh = raw_binary(FLX_OP_GELU_GRAD, h, g); break;
                     }
                     if (need[0] && need[2] && !recorded)
                       fused_weight_and_bias_grad(dh, x.detach(), &gi[0], &gi[2]);
                     if (need[0] && !gi[0].defined()) gi[0] = gemm(dh, false, x, true);
                     if (need[2] && !gi[2].defined()) gi[2] = sum_to(dh, bshape);
                     if (need[1]) gi[1] = gemm(w, true, dh, false);
                   });
  return y;
}

Tensor dense(const Tensor& w, const Tensor& x, const Tensor& b, const Activation& act) {
  using Kind = Activation::Kind;
  const Kind kind = act.kind();
  if (b.defined() && (kind == Kind::Identity || kind == Kind::Relu || kind == Kind::Gelu)) {
    const DenseAct fused = kind == Kind::Relu ? DenseAct::Relu : kind == Kind::Gelu ? DenseAct::Gelu : DenseAct::Identity;
    if (Tensor y = dense_fused(w, x, b, fused); y.defined()) return y;
  }
  Tensor h = matmul(w, x);
  if (b.defined()) h = h + b;
  return act(h);
}

}  // namespace flx::ops

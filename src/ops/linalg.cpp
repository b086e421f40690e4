// matmul: matrix×vector, matrix×matrix and batched products through the
// backend's GEMM, with the usual backward rules.
#include "ops_internal.hpp"

namespace flx {
namespace {

// The batch dims (2+) of `s`, padded with 1s to n dims.
Shape batch_dims(const Shape& s, int n) {
  Shape b;
  for (int k = 2; k < 2 + n; ++k) b.push_back(k < s.ndims() ? s[k] : 1);
  return b;
}

// An operand of a batched product whose batch dims are neither all 1 nor
// the output's (a (m, k, 1, 4) times a (k, n, 3, 1)): broadcast it to the
// output's batch dims, so that one strided batched GEMM serves.
Tensor expand_batch(const Tensor& x, const Shape& batch, const Shape& out_batch) {
  if (batch == out_batch || batch.numel() == 1) return x;
  Shape full{x.shape()[0], x.shape()[1]};
  for (auto e : out_batch) full.push_back(e);
  return ops::raw_map(FLX_OP_COPY, x.dtype(), x.dtype(), full, {{&x}});
}

}  // namespace

// C = op(A) op(B), batched over dims 2+; batch dims broadcast (size 1 or
// missing dims stretch), as in NNlib's batched_mul and torch.matmul.
Tensor ops::raw_gemm(const Tensor& a0, bool ta, const Tensor& b0, bool tb) {
  const Shape &sa0 = a0.shape(), &sb0 = b0.shape();
  int64_t m = ta ? sa0[1] : sa0[0], ka = ta ? sa0[0] : sa0[1];
  int64_t kb = tb ? sb0[1] : sb0[0], n = tb ? sb0[0] : sb0[1];
  FLX_CHECK(ka == kb, DimensionMismatch, "matmul: shapes ", sa0, " and ", sb0,
            " do not fit (inner dimensions ", ka, " and ", kb, " differ)");
  int nb = std::max(sa0.ndims(), sb0.ndims()) - 2;
  Shape bat_a = batch_dims(sa0, nb), bat_b = batch_dims(sb0, nb), bat;
  for (int k = 0; k < nb; ++k) {
    FLX_CHECK(bat_a[k] == bat_b[k] || bat_a[k] == 1 || bat_b[k] == 1, DimensionMismatch, "matmul: batch dims of ",
              sa0, " and ", sb0, " do not broadcast (dim ", k + 2, ": ", bat_a[k], " and ", bat_b[k],
              "; each must be equal or 1)");
    bat.push_back(bat_a[k] == 1 ? bat_b[k] : bat_a[k]);  // 1 stretches, to 0 too
  }
  Shape out{m, n};
  for (auto e : bat) out.push_back(e);
  Tensor c = empty(a0.dtype(), out, a0.device());
  if (c.numel() == 0) return c;
  Tensor a = expand_batch(a0, bat_a, bat), b = expand_batch(b0, bat_b, bat);
  const Shape &sa = a.shape(), &sb = b.shape();
  int64_t ba = sa.numel() / std::max<int64_t>(sa[0] * sa[1], 1), bb = sb.numel() / std::max<int64_t>(sb[0] * sb[1], 1);
  if (ka == 0) {
    ops::fill(c, 0.0);
    return c;
  }
  flx_gemm_desc d{};
  d.dtype = int32_t(a.dtype());
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = m;
  d.n = n;
  d.k = ka;
  d.alpha = 1;
  d.beta = 0;
  d.a = detail::mem(a);
  d.b = detail::mem(b);
  d.c = detail::mem(c);
  d.lda = std::max<int64_t>(sa[0], 1);
  d.ldb = std::max<int64_t>(sb[0], 1);
  d.ldc = std::max<int64_t>(m, 1);
  d.batch = bat.numel();
  d.stride_a = ba > 1 ? sa[0] * sa[1] : 0;
  d.stride_b = bb > 1 ? sb[0] * sb[1] : 0;
  d.stride_c = m * n;
  const auto& be = detail::be(a);
  be.gemm(detail::dev(a), d);
  return c;
}

// raw_gemm, recorded; its rule is made of gemm, so products differentiate to
// any order. dA = dC op(B)ᵀ, dB = op(A)ᵀ dC (transposed back where A or B
// was); a broadcast operand sums over the batch dims it stretched along.
Tensor ops::gemm(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  Tensor c = raw_gemm(a, ta, b, tb);
  autograd::record("matmul", autograd::Order::Higher, c, {a, b},
                   [a, ta, b, tb](const Tensor& g, const bool* n, Tensor* gi) {
                     if (n[0]) gi[0] = ops::sum_to(ta ? gemm(b, tb, g, true) : gemm(g, false, b, !tb), a.shape());
                     if (n[1]) gi[1] = ops::sum_to(tb ? gemm(g, true, a, ta) : gemm(a, !ta, g, false), b.shape());
                   });
  return c;
}

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  ops::check_defined(a0, "matmul");
  ops::check_defined(b0, "matmul");
  ops::check_same_device(a0, b0, "matmul");
  FLX_CHECK(a0.ndims() >= 2 && b0.ndims() >= 1, DimensionMismatch, "matmul: expected a matrix (or batch of matrices) times a vector or matrix; got shapes ",
            a0.shape(), " and ", b0.shape());
  if (b0.ndims() == 1) {  // matrix × vector
    FLX_CHECK(a0.ndims() == 2, DimensionMismatch, "matmul: a batched matrix times a vector is ambiguous; reshape the vector to (k, 1); got ", a0.shape(), " and ", b0.shape());
    return reshape(matmul(a0, reshape(b0, Shape{b0.shape()[0], 1})), Shape{a0.shape()[0]});
  }
  DType t = promote_types(a0.dtype(), b0.dtype());
  if (!is_floating(t)) t = DType::Float32;
  Tensor a = a0.to(t), b = b0.to(t);
  return ops::gemm(a, false, b, false);
}

// NNlib's batched_mul: matmul, with NNlib's cases stated: a batch of
// matrices (3+ dims) on at least one side, the other a batch or one matrix
// shared by every product; batch dims equal, or 1 on one side.
Tensor batched_mul(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "batched_mul");
  ops::check_defined(b, "batched_mul");
  FLX_CHECK(a.ndims() >= 2 && b.ndims() >= 2 && std::max(a.ndims(), b.ndims()) >= 3, DimensionMismatch,
            "batched_mul: expected batches of matrices (m, k, batch...) and (k, n, batch...), one side possibly a ",
            "single matrix; got shapes ", a.shape(), " and ", b.shape());
  FLX_CHECK(a.size(1) == b.size(0), DimensionMismatch, "batched_mul: shapes ", a.shape(), " and ", b.shape(),
            " do not fit (inner dimensions ", a.size(1), " and ", b.size(0), " differ)");
  if (a.ndims() >= 3 && b.ndims() >= 3)
    for (int k = 2; k < std::max(a.ndims(), b.ndims()); ++k)
      FLX_CHECK(a.size(k) == b.size(k) || a.size(k) == 1 || b.size(k) == 1, DimensionMismatch,
                "batched_mul: the batch dims of ", a.shape(), " and ", b.shape(), " differ (dim ", k, ": ", a.size(k),
                " and ", b.size(k), "; each must be equal or 1)");
  return matmul(a, b);
}

}  // namespace flx

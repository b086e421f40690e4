// matmul: matrix×vector, matrix×matrix and batched products through the
// backend's GEMM, with the usual backward rules.
#include "ops_internal.hpp"

namespace flx {
namespace {

// C = op(A) op(B), batched over dims 2+ (a 2-d operand broadcasts).
Tensor raw_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const Shape &sa = a.shape(), &sb = b.shape();
  int64_t m = ta ? sa[1] : sa[0], ka = ta ? sa[0] : sa[1];
  int64_t kb = tb ? sb[1] : sb[0], n = tb ? sb[0] : sb[1];
  FLX_CHECK(ka == kb, DimensionMismatch, "matmul: shapes ", sa, " and ", sb,
            " do not fit (inner dimensions ", ka, " and ", kb, " differ)");
  int64_t ba = sa.numel() / std::max<int64_t>(sa[0] * sa[1], 1), bb = sb.numel() / std::max<int64_t>(sb[0] * sb[1], 1);
  Shape out{m, n};
  const Shape& batch_src = sa.ndims() > 2 ? sa : sb;
  if (sa.ndims() > 2 && sb.ndims() > 2) {
    FLX_CHECK(sa.ndims() == sb.ndims() && std::equal(sa.begin() + 2, sa.end(), sb.begin() + 2), DimensionMismatch,
              "matmul: batch dims of ", sa, " and ", sb, " differ");
  }
  for (int k = 2; k < batch_src.ndims(); ++k) out.push_back(batch_src[k]);
  Tensor c = empty(a.dtype(), out, a.device());
  if (c.numel() == 0) return c;
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
  d.batch = std::max(ba, bb);
  d.stride_a = ba > 1 ? sa[0] * sa[1] : 0;
  d.stride_b = bb > 1 ? sb[0] * sb[1] : 0;
  d.stride_c = m * n;
  const auto& be = detail::be(a);
  be.check(be.f->gemm(be.f->ctx, detail::dev(a), &d, nullptr), "gemm");
  return c;
}

// raw_gemm, recorded; its rule is made of gemm, so products differentiate to
// any order. dA = dC op(B)ᵀ, dB = op(A)ᵀ dC (transposed back where A or B
// was); a broadcast (2-d) operand sums over the batch.
Tensor gemm(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  Tensor c = raw_gemm(a, ta, b, tb);
  autograd::record("matmul", autograd::Order::Higher, c, {a, b},
                   [a, ta, b, tb](const Tensor& g, const bool* n, Tensor* gi) {
                     if (n[0]) gi[0] = ops::sum_to(ta ? gemm(b, tb, g, true) : gemm(g, false, b, !tb), a.shape());
                     if (n[1]) gi[1] = ops::sum_to(tb ? gemm(g, true, a, ta) : gemm(a, !ta, g, false), b.shape());
                   });
  return c;
}

}  // namespace

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
  return gemm(a, false, b, false);
}

}  // namespace flx

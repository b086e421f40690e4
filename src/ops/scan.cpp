// cumsum: a prefix sum along one dim, as log2(n) elementwise additions
// (Hillis and Steele's scan): after the pass with shift s, element j holds
// the sum of the 2s elements ending at j. Each pass is one contiguous map
// (ADD) from one buffer into another: the dim is made the last one (a
// permute, when any dim after it is not 1), so that the scanned rows sit
// after s zeros in one contiguous block, and element j - s of a row is
// simply s rows earlier in memory; reading before the row's start reads the
// zeros. The reversed scan (sums from j to the end: cumsum's gradient) puts
// the zeros after the rows instead.
//
// Why not a GEMM with a triangular matrix of ones: 0 * Inf is NaN, so one
// Inf or NaN would spoil the sums before it too; here each output adds only
// the elements it sums. Every addition is one correctly rounded map op, so
// halves give the same bits on every device (their order of additions is
// the scan's, not Julia's left-to-right one).
#include <algorithm>

#include "flx/arrays.hpp"
#include "ops_internal.hpp"

namespace flx {
namespace ops {
namespace {

flx_mem at_element(const Tensor& t, int64_t elements) {
  flx_mem m = detail::mem(t);
  m.offset += uint64_t(elements) * dtype_size(t.dtype());
  return m;
}

// out[0:n] = a[0:n] + b[0:n], memory at element offsets.
void add_shifted(const Tensor& buf_out, int64_t out_at, const Tensor& buf_in, int64_t a_at, int64_t b_at, int64_t n) {
  flx_map_desc d{};
  d.op = FLX_OP_ADD;
  d.ninputs = 2;
  d.in_dtype = d.out_dtype = int32_t(buf_in.dtype());
  d.ndim = 1;
  d.shape[0] = n;
  d.in[0].mem = at_element(buf_in, a_at);
  d.in[0].strides[0] = 1;
  d.in[1].mem = at_element(buf_in, b_at);
  d.in[1].strides[0] = 1;
  d.out = at_element(buf_out, out_at);
  detail::be(buf_out).map(detail::dev(buf_out), d);
}

// (inner, n, outer) to (inner, outer, n) or back (swap = {0, 2, 1}).
Tensor raw_swap(const Tensor& x, const Shape& s3) {
  const int32_t perm[3] = {0, 2, 1};
  Tensor out = empty(x.dtype(), Shape{s3[0], s3[2], s3[1]}, x.device());
  flx_permute_desc d = detail::permute_desc(int32_t(x.dtype()), 3, s3.data(), perm, detail::mem(x), detail::mem(out));
  detail::be(x).permute(detail::dev(x), d);
  return out;
}

Tensor raw_scan(const Tensor& x, int dim, bool reversed) {
  const Around a = around(x.shape(), dim);
  if (x.numel() == 0 || a.n == 1) {  // a new record (the node goes on it), not x's
    Tensor out = empty(x.dtype(), x.shape(), x.device());
    if (x.numel())
      detail::be(x).copy_d2d(detail::dev(x), detail::mem(out), detail::mem(x), size_t(x.numel()) * dtype_size(x.dtype()));
    return out;
  }
  const bool swap = a.outer > 1;  // else (inner, n): the row index is already the fastest
  const Tensor rows = swap ? raw_swap(x, Shape{a.inner, a.n, a.outer}) : x;
  const int64_t r = a.inner * a.outer, n = a.n;  // r rows of n, row index fastest
  int64_t S = 1;
  while (2 * S < n) S *= 2;  // the largest shift: 2S >= n
  // Two buffers of (r, S + n), the zeros first (or last, reversed).
  const int64_t data_at = reversed ? 0 : S * r, zeros_at = reversed ? n * r : 0;
  Tensor buf[2];
  const auto& be = detail::be(x);
  for (Tensor& b : buf) {
    b = empty(x.dtype(), Shape{r * (S + n)}, x.device());
    be.fill(detail::dev(b), at_element(b, zeros_at), b.dtype(), size_t(S * r), 0.0);
  }
  be.copy_d2d(detail::dev(x), at_element(buf[0], data_at), detail::mem(rows), size_t(r * n) * dtype_size(x.dtype()));
  int cur = 0;
  for (int64_t s = 1; s <= S; s *= 2, cur ^= 1)
    add_shifted(buf[cur ^ 1], data_at, buf[cur], data_at, data_at + (reversed ? s : -s) * r, r * n);
  Tensor result = detail::share(buf[cur], swap ? Shape{a.inner, a.outer, n} : x.shape(),
                                buf[cur].impl()->offset + uint64_t(data_at) * dtype_size(x.dtype()));
  return swap ? raw_swap(result, Shape{a.inner, a.outer, n}) : result;
}

}  // namespace

// Recorded: the gradient of a prefix sum is the suffix sum of g, and back.
Tensor scan(const Tensor& x, int dim, bool reversed) {
  Tensor out = raw_scan(x, dim, reversed);
  if (out.shape() != x.shape()) out = detail::share(out, x.shape(), out.impl()->offset);
  autograd::record(reversed ? "cumsum (reversed)" : "cumsum", autograd::Order::Higher, out, {x},
                   [dim, reversed](const Tensor& g, const bool*, Tensor* gi) { gi[0] = scan(g, dim, !reversed); });
  return out;
}

}  // namespace ops

Tensor cumsum(const Tensor& x0, int dim) {
  ops::check_defined(x0, "cumsum");
  FLX_CHECK(dim >= 0 && dim < x0.ndims(), DimensionMismatch, "cumsum: dim ", dim,
            " is out of range for a tensor of shape ", x0.shape(), " (dims are 0-based: 0 to ", x0.ndims() - 1, ")");
  const DType t = is_floating(x0.dtype()) ? x0.dtype() : DType::Int64;  // as sum: integers in Int64
  return ops::scan(x0.to(t), dim, false);
}

Tensor cumsum(const Tensor& x) {
  ops::check_defined(x, "cumsum");
  FLX_CHECK(x.ndims() == 1, DimensionMismatch, "cumsum: a tensor of shape ", x.shape(),
            " needs the dim to sum along, cumsum(x, dim); only a vector does without");
  return cumsum(x, 0);
}

}  // namespace flx

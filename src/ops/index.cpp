// Indexing along the last (observation) dimension: gather, NNlib's name for
// x[.., idx], and its adjoint scatter-add. DataLoader batches with it, so a
// shuffled batch of data already on a device is gathered there.
#include <algorithm>
#include <optional>

#include "ops_internal.hpp"

namespace flx {

namespace {

// The backend descriptor viewing x as (inner, axis, 1) along its last dim.
flx_index_desc last_dim_desc(const Tensor& x, const Tensor& idx) {
  flx_index_desc d{};
  d.dtype = int32_t(x.dtype());
  d.axis_len = x.ndims() ? x.shape()[x.ndims() - 1] : 1;
  d.inner = d.axis_len ? x.numel() / d.axis_len : 0;
  d.outer = 1;
  d.nidx = idx.numel();
  d.idx = detail::mem(idx);
  return d;
}

// Indices must lie in [0, n): checked here so that no backend ever reads out
// of bounds.
void check_indices(const Tensor& idx, int64_t n, const char* op) {
  if (auto bad = ops::index_outside(idx, n))
    FLX_CHECK(false, ArgumentError, op, ": indices must lie in 0:", n - 1, " (0-based, along the last dim); found ",
              *bad);
}

Tensor int64_indices(const Tensor& idx0, const Tensor& x, const char* op) {
  ops::check_defined(idx0, op);
  FLX_CHECK(is_integral(idx0.dtype()), TypeError, op, ": indices must be integers; got ", idx0.dtype());
  ops::check_same_device(x, idx0, op);
  return idx0.to(DType::Int64);
}

// dx[.., idx[j]] += g[.., j], into a zero tensor of shape s.
Tensor scatter_add_last(const Tensor& g, const Tensor& idx, const Shape& s) {
  Tensor dx = empty(g.dtype(), s, g.device());
  ops::fill(dx, 0.0);
  if (g.numel()) {
    flx_index_desc d = last_dim_desc(dx, idx);
    d.src = detail::mem(g);
    d.dst = detail::mem(dx);
    const auto& b = detail::be(dx);
    b.scatter_add(detail::dev(dx), d);
  }
  return dx;
}

}  // namespace

namespace ops {

std::optional<int64_t> index_outside(const Tensor& idx, int64_t n) {
  if (!idx.numel()) return std::nullopt;
  int64_t lo, hi;
  if (auto* p = static_cast<const int64_t*>(detail::host_data(idx))) {
    lo = hi = p[0];
    for (int64_t k = 1; k < idx.numel(); ++k) lo = std::min(lo, p[k]), hi = std::max(hi, p[k]);
  } else {
    // On a device: one count read back (a single round trip; the minimum
    // and maximum, two more, only when some index is out of range).
    if (sum((idx < int64_t(0)) + (idx >= n)).item<int64_t>() == 0) return std::nullopt;
    lo = minimum(idx).item<int64_t>();
    hi = maximum(idx).item<int64_t>();
  }
  if (lo < 0) return lo;
  if (hi >= n) return hi;
  return std::nullopt;
}

Tensor gather_checked(const Tensor& x, const Tensor& idx) {
  Shape os;
  for (int k = 0; k + 1 < x.ndims(); ++k) os.push_back(x.shape()[k]);
  for (auto e : idx.shape()) os.push_back(e);
  Tensor out = empty(x.dtype(), os, x.device());
  if (out.numel()) {
    flx_index_desc d = last_dim_desc(x, idx);
    d.src = detail::mem(x);
    d.dst = detail::mem(out);
    const auto& b = detail::be(x);
    b.gather(detail::dev(x), d);
  }
  autograd::record("gather", autograd::Order::FirstOnly, out, {x},
                   [idx, xs = x.shape()](const Tensor& g, const bool*, Tensor* gi) {
    gi[0] = scatter_add_last(g, idx, xs);
  });
  return out;
}

}  // namespace ops

Tensor gather(const Tensor& x, const Tensor& idx0) {
  ops::check_defined(x, "gather");
  FLX_CHECK(x.ndims() >= 1, DimensionMismatch, "gather: expected a tensor with at least one dim; got shape ", x.shape());
  Tensor idx = int64_indices(idx0, x, "gather");
  check_indices(idx, x.shape()[x.ndims() - 1], "gather");
  return ops::gather_checked(x, idx);
}

}  // namespace flx

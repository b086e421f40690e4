// Ops that pick elements along one dim by index: gather_dim and its
// adjoint scatter_dim (the backend's gather and scatter_add along an axis,
// which view a tensor as (inner, axis, outer)), and on them reverse and the
// paddings that copy x's own elements (reflect, symmetric, repeat,
// circular). Constant padding is a concatenation (array_slices.cpp).
#include <algorithm>
#include <functional>

#include "flx/arrays.hpp"
#include "ops_internal.hpp"
#include "util/checked_size.hpp"
#include "util/host_vector.hpp"

namespace flx {
namespace ops {

namespace {

flx_index_desc axis_desc(const Tensor& big, int dim, const Tensor& idx) {
  const Around a = around(big.shape(), dim);
  flx_index_desc d{};
  d.dtype = int32_t(big.dtype());
  d.inner = a.inner;
  d.axis_len = a.n;
  d.outer = a.outer;
  d.nidx = idx.numel();
  d.idx = detail::mem(idx);
  return d;
}

}  // namespace

Tensor gather_dim(const Tensor& x, int dim, const Tensor& idx) {
  Shape s = x.shape();
  s[dim] = idx.numel();
  Tensor out = empty(x.dtype(), s, x.device());
  if (out.numel()) {
    flx_index_desc d = axis_desc(x, dim, idx);
    d.src = detail::mem(x);
    d.dst = detail::mem(out);
    detail::be(x).gather(detail::dev(x), d);
  }
  autograd::record("gather", autograd::Order::Higher, out, {x},
                   [dim, idx, n = x.size(dim)](const Tensor& g, const bool*, Tensor* gi) {
                     gi[0] = scatter_dim(g, dim, idx, n);
                   });
  return out;
}

// Each destination element adds its sources in index order on every backend
// (backend.h), so repeated indices sum to the same bits everywhere.
Tensor scatter_dim(const Tensor& g, int dim, const Tensor& idx, int64_t n) {
  Shape s = g.shape();
  s[dim] = n;
  Tensor out = empty(g.dtype(), s, g.device());
  if (out.numel()) {
    fill(out, 0.0);
    if (g.numel()) {
      flx_index_desc d = axis_desc(out, dim, idx);
      d.src = detail::mem(g);
      d.dst = detail::mem(out);
      detail::be(out).scatter_add(detail::dev(out), d);
    }
  }
  autograd::record("scatter_add", autograd::Order::Higher, out, {g},
                   [dim, idx](const Tensor& d, const bool*, Tensor* gi) { gi[0] = gather_dim(d, dim, idx); });
  return out;
}

}  // namespace ops

namespace {

void check_dim(const Tensor& x, int dim, const char* op) {
  FLX_CHECK(dim >= 0 && dim < x.ndims(), DimensionMismatch, op, ": dim ", dim, " is out of range for a tensor of shape ",
            x.shape(), " (dims are 0-based: 0 to ", x.ndims() - 1, ")");
}

// The (lo, hi) pairs of a padding, checked: one pair per leading dim.
std::vector<std::pair<int64_t, int64_t>> pad_pairs(const Tensor& x, const std::vector<int64_t>& pad, const char* op) {
  ops::check_defined(x, op);
  FLX_CHECK(pad.size() % 2 == 0, ArgumentError, op, ": pad holds (lo, hi) pairs, {lo0, hi0, lo1, hi1, ...}: an even ",
            "number of values; got ", pad.size());
  FLX_CHECK(int(pad.size() / 2) <= x.ndims(), DimensionMismatch, op, ": ", pad.size() / 2,
            " (lo, hi) pairs for a tensor of shape ", x.shape(), " (", x.ndims(), " dims)");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t k = 0; k < pad.size(); k += 2) {
    FLX_CHECK(pad[k] >= 0 && pad[k + 1] >= 0, ArgumentError, op, ": padding must be >= 0; got (", pad[k], ", ",
              pad[k + 1], ") for dim ", k / 2);
    out.emplace_back(pad[k], pad[k + 1]);
  }
  // The padded shape, each sum and the element count checked.
  Shape padded = x.shape();
  for (size_t k = 0; k < out.size(); ++k) {
    const auto [lo, hi] = out[k];
    const int d = int(k);
    padded[d] = detail::checked_sum({lo, x.size(d), hi}, op, ": dim ", d, " of shape ", x.shape(), " padded by (", lo,
                                    ", ", hi, ")");
  }
  (void)detail::checked_numel(padded, op);
  return out;
}

// NNlib's integer padding: both sides of every dim, or of the spatial ones
// (all but the last two).
std::vector<int64_t> uniform_pad(const Tensor& x, int64_t pad, bool spatial, const char* op) {
  ops::check_defined(x, op);
  const int n = spatial ? x.ndims() - 2 : x.ndims();
  return std::vector<int64_t>(size_t(2 * std::max(n, 0)), pad);
}

// A padding made of x's own elements: for each padded dim, the index (in
// 0..n-1) of x that output position p - lo shows, checked by `fits`.
using SourceIndex = std::function<int64_t(int64_t p, int64_t n)>;
Tensor pad_by_index(const Tensor& x0, const std::vector<int64_t>& pad, const char* op, const SourceIndex& source,
                    const std::function<bool(int64_t side, int64_t n)>& fits, const char* limit) {
  const auto pairs = pad_pairs(x0, pad, op);
  Tensor x = x0;
  for (int k = 0; k < int(pairs.size()); ++k) {
    const auto [lo, hi] = pairs[size_t(k)];
    if (lo == 0 && hi == 0) continue;
    const int64_t n = x.size(k);
    FLX_CHECK(fits(lo, n) && fits(hi, n), ArgumentError, op, ": padding (", lo, ", ", hi, ") of dim ", k,
              " does not fit its size ", n, " in a tensor of shape ", x0.shape(), ": ", limit);
    auto idx = detail::host_vector<int64_t>(size_t(lo + n + hi), op);
    for (int64_t j = 0; j < int64_t(idx.size()); ++j) idx[size_t(j)] = source(j - lo, n);
    x = ops::gather_dim(x, k, ops::index_tensor(idx, x));
  }
  return x;
}

}  // namespace

Tensor reverse(const Tensor& x, int dim) {
  ops::check_defined(x, "reverse");
  check_dim(x, dim, "reverse");
  const int64_t n = x.size(dim);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) idx[size_t(j)] = n - 1 - j;
  return ops::gather_dim(x, dim, ops::index_tensor(idx, x));
}

Tensor reverse(const Tensor& x) {  // every dim: the column-major order reversed
  ops::check_defined(x, "reverse");
  if (x.ndims() == 0) return x;
  return reshape(reverse(reshape(x, Shape{x.numel()}), 0), x.shape());
}

Tensor pad_constant(const Tensor& x0, const std::vector<int64_t>& pad, double value) {
  const auto pairs = pad_pairs(x0, pad, "pad_constant");
  Tensor x = x0;
  for (int k = 0; k < int(pairs.size()); ++k) {
    const auto [lo, hi] = pairs[size_t(k)];
    if (lo == 0 && hi == 0) continue;
    if (value == 0) {
      x = ops::pad_dim(x, k, lo, hi);
      continue;
    }
    // The value in blocks before and after x: a concatenation.
    std::vector<Tensor> parts;
    for (int64_t side : {lo, int64_t(-1), hi}) {
      if (side < 0) {
        parts.push_back(x);
        continue;
      }
      if (side == 0) continue;
      Shape s = x.shape();
      s[k] = side;
      Tensor block = empty(x.dtype(), s, x.device());
      if (block.numel()) ops::fill(block, value);
      parts.push_back(block);
    }
    x = cat(parts, k);
  }
  return x;
}
Tensor pad_constant(const Tensor& x, int64_t pad, double value) {
  return pad_constant(x, uniform_pad(x, pad, false, "pad_constant"), value);
}
Tensor pad_zeros(const Tensor& x, const std::vector<int64_t>& pad) {
  pad_pairs(x, pad, "pad_zeros");  // its own name in messages
  return pad_constant(x, pad, 0);
}
Tensor pad_zeros(const Tensor& x, int64_t pad) { return pad_zeros(x, uniform_pad(x, pad, false, "pad_zeros")); }

Tensor pad_reflect(const Tensor& x, const std::vector<int64_t>& pad) {
  return pad_by_index(
      x, pad, "pad_reflect",
      [](int64_t p, int64_t n) { return p < 0 ? -p : p >= n ? 2 * (n - 1) - p : p; },
      [](int64_t side, int64_t n) { return side == 0 || side <= n - 1; },
      "each side may pad at most size - 1 (the edge is not repeated)");
}
Tensor pad_reflect(const Tensor& x, int64_t pad) {
  return pad_reflect(x, uniform_pad(x, pad, true, "pad_reflect"));
}

Tensor pad_symmetric(const Tensor& x, const std::vector<int64_t>& pad) {
  return pad_by_index(
      x, pad, "pad_symmetric",
      [](int64_t p, int64_t n) { return p < 0 ? -p - 1 : p >= n ? 2 * n - 1 - p : p; },
      [](int64_t side, int64_t n) { return side <= n; }, "each side may pad at most size");
}
Tensor pad_symmetric(const Tensor& x, int64_t pad) {
  return pad_symmetric(x, uniform_pad(x, pad, true, "pad_symmetric"));
}

Tensor pad_repeat(const Tensor& x, const std::vector<int64_t>& pad) {
  return pad_by_index(
      x, pad, "pad_repeat", [](int64_t p, int64_t n) { return std::clamp<int64_t>(p, 0, n - 1); },
      [](int64_t side, int64_t n) { return side == 0 || n > 0; }, "an empty dim has no edge to repeat");
}
Tensor pad_repeat(const Tensor& x, int64_t pad) {
  return pad_repeat(x, uniform_pad(x, pad, true, "pad_repeat"));
}

Tensor pad_circular(const Tensor& x, const std::vector<int64_t>& pad) {
  return pad_by_index(
      x, pad, "pad_circular", [](int64_t p, int64_t n) { return ((p % n) + n) % n; },
      [](int64_t side, int64_t n) { return side <= n; }, "each side may pad at most size");
}
Tensor pad_circular(const Tensor& x, int64_t pad) {
  return pad_circular(x, uniform_pad(x, pad, true, "pad_circular"));
}

}  // namespace flx

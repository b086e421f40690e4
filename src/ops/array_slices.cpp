// Slicing and concatenating along one dim: slice_dim and pad_dim (each the
// other's backward rule), and on them selectdim, slice, unstack, chunk,
// cat, vcat, hcat and stack.
//
// A tensor viewed around dim d is (inner, n, outer), column-major. A range
// of d is contiguous when outer is 1 (d is the last dim that is not 1): a
// slice there is a view and a concatenation is one copy per piece. Along
// any other dim, a slice reads through strides (the map kernel's COPY with
// a strided operand) and a concatenation writes through the one strided
// write the backends have, scatter_add along an axis, onto a tensor filled
// with -0.0: -0.0 + v is v for every v, -0.0 and NaN included (0 + -0.0 is
// +0.0), so every element arrives unchanged, in any dtype (halves add in
// float and round back exactly). Each output element receives exactly one
// addition, so no order question arises either.
#include <algorithm>
#include <numeric>

#include "flx/arrays.hpp"
#include "ops_internal.hpp"

namespace flx {
namespace ops {

Around around(const Shape& s, int dim) {
  Around a;
  for (int k = 0; k < s.ndims(); ++k) (k < dim ? a.inner : k == dim ? a.n : a.outer) *= s[k];
  return a;
}

namespace {

size_t esize(const Tensor& t) { return dtype_size(t.dtype()); }

flx_mem at_element(const Tensor& t, int64_t elements) {
  flx_mem m = detail::mem(t);
  m.offset += uint64_t(elements) * esize(t);
  return m;
}

// out (contiguous, (inner, m, outer)) = the elements of x at [start,
// start + m) along its dim, read through x's strides.
void copy_range(const Tensor& out, const Tensor& x, const Around& a, int64_t start, int64_t m) {
  flx_map_desc d{};
  d.op = FLX_OP_COPY;
  d.ninputs = 1;
  d.in_dtype = d.out_dtype = int32_t(x.dtype());
  d.ndim = 3;
  d.shape[0] = a.inner;
  d.shape[1] = m;
  d.shape[2] = a.outer;
  d.in[0].mem = at_element(x, start * a.inner);
  d.in[0].strides[0] = 1;
  d.in[0].strides[1] = a.inner;
  d.in[0].strides[2] = a.inner * a.n;
  d.out = detail::mem(out);
  detail::be(x).map(detail::dev(x), d);
}

// Fill out with -0.0 (0 for integers) where write_at will add.
void zero_for_writes(const Tensor& out) { fill(out, is_floating(out.dtype()) ? -0.0 : 0.0); }

// Write x into out (of x's shape but for dim) at [at, at + n) along dim: one
// contiguous copy when outer is 1; else scatter_add onto out, which must
// hold -0.0 (or 0) there (zero_for_writes).
void write_at(const Tensor& out, const Tensor& x, int dim, int64_t at) {
  if (x.numel() == 0) return;
  const Around a = around(out.shape(), dim), ax = around(x.shape(), dim);
  const auto& be = detail::be(out);
  if (a.outer == 1) {
    be.copy_d2d(detail::dev(out), at_element(out, at * a.inner), detail::mem(x), size_t(x.numel()) * esize(x));
    return;
  }
  std::vector<int64_t> idx(static_cast<size_t>(ax.n));
  std::iota(idx.begin(), idx.end(), at);
  const Tensor it = index_tensor(idx, out);
  flx_index_desc d{};
  // Bool adds as UInt8 (its bytes are 0 and 1): scatter_add takes no Bool.
  d.dtype = int32_t(x.dtype() == DType::Bool ? DType::UInt8 : x.dtype());
  d.inner = a.inner;
  d.axis_len = a.n;
  d.outer = a.outer;
  d.nidx = ax.n;
  d.src = detail::mem(x);
  d.dst = detail::mem(out);
  d.idx = detail::mem(it);
  be.scatter_add(detail::dev(out), d);
}

}  // namespace

Tensor index_tensor(const std::vector<int64_t>& idx, const Tensor& like) {
  return tensor(idx, Shape{int64_t(idx.size())}).to(like.device());
}

Tensor slice_dim(const Tensor& x, int dim, int64_t start, int64_t stop) {
  const Around a = around(x.shape(), dim);
  Shape s = x.shape();
  s[dim] = stop - start;
  Tensor out;
  if (a.outer == 1 || s.numel() == 0) {
    out = detail::share(x, s, x.impl()->offset + uint64_t(start * a.inner) * esize(x));
  } else {
    out = empty(x.dtype(), s, x.device());
    copy_range(out, x, a, start, stop - start);
  }
  autograd::record("slice", autograd::Order::Higher, out, {x},
                   [dim, start, hi = a.n - stop](const Tensor& g, const bool*, Tensor* gi) {
                     gi[0] = pad_dim(g, dim, start, hi);
                   });
  return out;
}

Tensor pad_dim(const Tensor& x, int dim, int64_t lo, int64_t hi) {
  Shape s = x.shape();
  s[dim] += lo + hi;
  Tensor out = empty(x.dtype(), s, x.device());
  const Around a = around(s, dim);
  if (a.outer == 1) {  // the padding is a block before and one after: fill those only
    const auto& be = detail::be(out);
    if (lo > 0 && a.inner > 0) be.fill(detail::dev(out), detail::mem(out), out.dtype(), size_t(lo * a.inner), 0.0);
    if (hi > 0 && a.inner > 0)
      be.fill(detail::dev(out), at_element(out, (a.n - hi) * a.inner), out.dtype(), size_t(hi * a.inner), 0.0);
    write_at(out, x, dim, lo);
  } else if (out.numel()) {
    // Blocks of +0.0 written as x is (onto -0.0, which keeps x's -0.0s):
    // padding of -0.0 would print as such.
    zero_for_writes(out);
    for (const auto& [at, len] : {std::pair{int64_t(0), lo}, std::pair{lo + x.size(dim), hi}}) {
      if (len == 0) continue;
      Shape bs = s;
      bs[dim] = len;
      Tensor block = empty(x.dtype(), bs, x.device());
      fill(block, 0.0);
      write_at(out, block, dim, at);
    }
    write_at(out, x, dim, lo);
  }
  autograd::record("pad", autograd::Order::Higher, out, {x},
                   [dim, lo, n = x.size(dim)](const Tensor& g, const bool*, Tensor* gi) {
                     gi[0] = slice_dim(g, dim, lo, lo + n);
                   });
  return out;
}

}  // namespace ops

namespace {

void check_dim(const Tensor& x, int dim, const char* op) {
  FLX_CHECK(dim >= 0 && dim < x.ndims(), DimensionMismatch, op, ": dim ", dim, " is out of range for a tensor of shape ",
            x.shape(), " (dims are 0-based: 0 to ", x.ndims() - 1, ")");
}

// x's shape with the dims past its own as 1s, to n dims.
Shape extended(const Shape& s, int n) {
  Shape out = s;
  while (out.ndims() < n) out.push_back(1);
  return out;
}

}  // namespace

Tensor slice(const Tensor& x, int dim, int64_t start, int64_t stop) {
  ops::check_defined(x, "slice");
  check_dim(x, dim, "slice");
  const int64_t n = x.size(dim);
  FLX_CHECK(0 <= start && start <= stop && stop <= n, ArgumentError, "slice: the range [", start, ", ", stop,
            ") is not within dim ", dim, " (size ", n, ") of a tensor of shape ", x.shape(),
            "; expected 0 <= start <= stop <= ", n);
  return ops::slice_dim(x, dim, start, stop);
}

Tensor selectdim(const Tensor& x, int dim, int64_t i) {
  ops::check_defined(x, "selectdim");
  check_dim(x, dim, "selectdim");
  const int64_t n = x.size(dim);
  FLX_CHECK(0 <= i && i < n, ArgumentError, "selectdim: index ", i, " is out of range for dim ", dim, " (size ", n,
            ") of a tensor of shape ", x.shape(), "; expected 0 to ", n - 1);
  Shape s;
  for (int k = 0; k < x.ndims(); ++k)
    if (k != dim) s.push_back(x.shape()[k]);
  return reshape(ops::slice_dim(x, dim, i, i + 1), s);
}

std::vector<Tensor> unstack(const Tensor& x, int dim) {
  ops::check_defined(x, "unstack");
  check_dim(x, dim, "unstack");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(dim); ++i) out.push_back(selectdim(x, dim, i));
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n, int dim) {
  ops::check_defined(x, "chunk");
  check_dim(x, dim, "chunk");
  FLX_CHECK(n >= 1, ArgumentError, "chunk: the number of pieces must be at least 1; got ", n);
  // MLUtils: pieces of cld(len, n) (so fewer than n when n > len), written
  // so that no n near INT64_MAX overflows.
  const int64_t len = x.size(dim), size = len / n + (len % n != 0);
  std::vector<Tensor> out;
  for (int64_t start = 0; start < len; start += size)
    out.push_back(ops::slice_dim(x, dim, start, std::min(len, start + size)));
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n) {
  ops::check_defined(x, "chunk");
  FLX_CHECK(x.ndims() > 0, DimensionMismatch, "chunk: a 0-dim tensor has no dim to split");
  return chunk(x, n, x.ndims() - 1);
}

namespace {

// The body of cat, with the op's name for messages (vcat, hcat, stack).
Tensor concatenate(const std::vector<Tensor>& xs0, int dim, const char* op) {
  FLX_CHECK(!xs0.empty(), ArgumentError, op, ": no tensors to concatenate");
  FLX_CHECK(dim >= 0 && dim < Shape::max_dims, DimensionMismatch, op, ": dim ", dim,
            " is out of range (dims are 0-based, below ", Shape::max_dims, ")");
  int nd = dim + 1;
  DType t = DType::Bool;
  for (size_t i = 0; i < xs0.size(); ++i) {
    ops::check_defined(xs0[i], op);
    ops::check_same_device(xs0[0], xs0[i], op);
    nd = std::max(nd, xs0[i].ndims());
    t = i ? promote_types(t, xs0[i].dtype()) : xs0[i].dtype();
  }
  // Every tensor with nd dims and the promoted type (recorded, so their
  // gradients flow back through the reshape and the cast).
  std::vector<Tensor> xs;
  std::vector<int64_t> offsets{0};
  const Shape first = extended(xs0[0].shape(), nd);
  for (size_t i = 0; i < xs0.size(); ++i) {
    const Shape s = extended(xs0[i].shape(), nd);
    for (int k = 0; k < nd; ++k)
      FLX_CHECK(k == dim || s[k] == first[k], DimensionMismatch, op, ": along dim ", dim,
                ", every tensor needs the first one's extent in every other dim; tensor 0 has shape ", xs0[0].shape(),
                ", tensor ", i, " has shape ", xs0[i].shape(), " (dim ", k, ": ", first[k], " vs ", s[k], ")");
    xs.push_back(reshape(xs0[i].to(t), s));
    offsets.push_back(offsets.back() + s[dim]);
  }
  if (xs.size() == 1) return xs[0];
  Shape s = first;
  s[dim] = offsets.back();
  Tensor out = empty(t, s, xs[0].device());
  if (out.numel() && ops::around(s, dim).outer != 1) ops::zero_for_writes(out);
  for (size_t i = 0; i < xs.size(); ++i) ops::write_at(out, xs[i], dim, offsets[i]);
  // Each input's gradient is its range of g (a view where contiguous).
  autograd::record(op, autograd::Order::Higher, out, xs,
                   [dim, offsets](const Tensor& g, const bool* need, Tensor* gi) {
                     for (size_t i = 0; i + 1 < offsets.size(); ++i)
                       if (need[i]) gi[i] = ops::slice_dim(g, dim, offsets[i], offsets[i + 1]);
                   });
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int dim) { return concatenate(xs, dim, "cat"); }
Tensor vcat(const std::vector<Tensor>& xs) { return concatenate(xs, 0, "vcat"); }
Tensor hcat(const std::vector<Tensor>& xs) { return concatenate(xs, 1, "hcat"); }

Tensor stack(const std::vector<Tensor>& xs, int dim) {
  FLX_CHECK(!xs.empty(), ArgumentError, "stack: no tensors to stack");
  for (const Tensor& x : xs) ops::check_defined(x, "stack");
  const Shape& s0 = xs[0].shape();
  FLX_CHECK(dim >= 0 && dim <= s0.ndims(), DimensionMismatch, "stack: dim ", dim, " is out of range for tensors of shape ",
            s0, " (the new dim goes at 0 to ", s0.ndims(), ")");
  FLX_CHECK(s0.ndims() < Shape::max_dims, DimensionMismatch, "stack: tensors of shape ", s0,
            " already have the most dims a tensor can have (", Shape::max_dims, ")");
  std::vector<Tensor> ys;
  for (size_t i = 0; i < xs.size(); ++i) {
    FLX_CHECK(xs[i].shape() == s0, DimensionMismatch, "stack: every tensor needs the first one's shape ", s0,
              "; tensor ", i, " has shape ", xs[i].shape());
    Shape s;
    for (int k = 0; k <= s0.ndims(); ++k) s.push_back(k < dim ? s0[k] : k == dim ? 1 : s0[k - 1]);
    ys.push_back(reshape(xs[i], s));
  }
  return concatenate(ys, dim, "stack");
}

Tensor stack(const std::vector<Tensor>& xs) {
  FLX_CHECK(!xs.empty(), ArgumentError, "stack: no tensors to stack");
  ops::check_defined(xs[0], "stack");
  return stack(xs, xs[0].ndims());
}

}  // namespace flx

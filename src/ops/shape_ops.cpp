// Shape ops (reshape, permutedims), one-hot encoding and softmax.
#include <numeric>

#include "../util/host_vector.hpp"
#include "flx/activations.hpp"
#include "ops_internal.hpp"

namespace flx {

Tensor reshape(const Tensor& x, const Shape& s0) {
  ops::check_defined(x, "reshape");
  Shape s = s0;
  int infer = -1;
  for (int k = 0; k < s.ndims(); ++k) {
    if (s[k] == -1) {
      FLX_CHECK(infer < 0, DimensionMismatch, "reshape: at most one dim may be -1; got ", s0.str());
      infer = k;
    }
  }
  if (infer >= 0) {
    s[infer] = 1;
    int64_t known = s.numel();  // overflow-checked
    FLX_CHECK(known > 0 && x.numel() % known == 0, DimensionMismatch, "reshape: cannot infer the -1 in ", s0.str(),
              " for a tensor of shape ", x.shape());
    s[infer] = x.numel() / known;
  }
  FLX_CHECK(s.numel() == x.numel(), DimensionMismatch, "reshape: a tensor of shape ", x.shape(), " (", x.numel(),
            " elements) cannot be reshaped to ", s, " (", s.numel(), " elements)");
  if (s == x.shape()) return x;
  Tensor out = detail::share(x, s, x.impl()->offset);
  autograd::record("reshape", autograd::Order::Higher, out, {x},
                   [xs = x.shape()](const Tensor& g, const bool*, Tensor* gi) { gi[0] = reshape(g, xs); });
  return out;
}

Tensor permutedims(const Tensor& x, const std::vector<int>& perm) {
  ops::check_defined(x, "permutedims");
  int n = x.ndims();
  FLX_CHECK(int(perm.size()) == n, DimensionMismatch, "permutedims: a permutation of ", n,
            " dims is needed for shape ", x.shape(), "; got ", perm.size());
  std::vector<int> inv(size_t(n), -1);
  for (int k = 0; k < n; ++k) {
    FLX_CHECK(perm[size_t(k)] >= 0 && perm[size_t(k)] < n && inv[size_t(perm[size_t(k)])] < 0, ArgumentError,
              "permutedims: perm must hold each of 0..", n - 1, " once");
    inv[size_t(perm[size_t(k)])] = k;
  }
  Shape os;
  for (int k = 0; k < n; ++k) os.push_back(x.shape()[perm[size_t(k)]]);
  Tensor out = empty(x.dtype(), os, x.device());
  if (x.numel()) {
    int32_t p[FLX_MAX_DIMS];
    for (int k = 0; k < n; ++k) p[k] = perm[size_t(k)];
    flx_permute_desc d = detail::permute_desc(int32_t(x.dtype()), n, x.shape().data(), p, detail::mem(x),
                                              detail::mem(out));
    detail::be(x).permute(detail::dev(x), d);
  }
  autograd::record("permutedims", autograd::Order::Higher, out, {x},
                   [inv](const Tensor& g, const bool*, Tensor* gi) { gi[0] = permutedims(g, inv); });
  return out;
}

namespace ops {
Tensor stack_last(const std::vector<Tensor>& xs) {
  FLX_CHECK(!xs.empty(), ArgumentError, "stack: no tensors to stack");
  for (const Tensor& x : xs) check_defined(x, "stack");
  const Tensor& x0 = xs.front();
  for (const Tensor& x : xs) {
    FLX_CHECK(x.shape() == x0.shape() && x.dtype() == x0.dtype(), DimensionMismatch,
              "stack: every tensor needs the first one's shape and element type, ", x0.shape(), " ", x0.dtype(),
              "; got ", x.shape(), " ", x.dtype());
    check_same_device(x0, x, "stack");
  }
  Shape s = x0.shape();
  s.push_back(int64_t(xs.size()));
  Tensor out = empty(x0.dtype(), s, x0.device());
  const size_t bytes = size_t(x0.numel()) * dtype_size(x0.dtype());
  if (bytes) {
    flx_mem dst = detail::mem(out);
    for (const Tensor& x : xs) {
      detail::be(out).copy_d2d(detail::dev(out), dst, detail::mem(x), bytes);
      dst.offset += bytes;
    }
  }
  // Each input's gradient is its slot of g: a view, so the rule is free.
  autograd::record("stack", autograd::Order::Higher, out, xs,
                   [shape = x0.shape(), n = xs.size()](const Tensor& g, const bool* need, Tensor* gi) {
                     for (size_t i = 0; i < n; ++i)
                       if (need[i]) gi[i] = reshape(g.slice_last(int64_t(i), int64_t(i) + 1), shape);
                   });
  return out;
}
}  // namespace ops

Tensor transpose(const Tensor& x) {
  FLX_CHECK(x.ndims() == 2, DimensionMismatch, "transpose: expected a matrix; got shape ", x.shape());
  return permutedims(x, {1, 0});
}

Tensor onehotbatch(const Tensor& labels0, int64_t nclasses) {
  ops::check_defined(labels0, "onehotbatch");
  FLX_CHECK(is_integral(labels0.dtype()), TypeError, "onehotbatch: labels must be integers (0-based); got ",
            labels0.dtype());
  FLX_CHECK(nclasses > 0, ArgumentError, "onehotbatch: nclasses must be positive; got ", nclasses);
  Tensor labels = labels0.to(DType::Int64);
  if (labels.numel()) {
    auto lo = minimum(labels).item<int64_t>(), hi = maximum(labels).item<int64_t>();
    FLX_CHECK(lo >= 0 && hi < nclasses, ArgumentError, "onehotbatch: labels must lie in 0:", nclasses - 1, "; found ",
              lo < 0 ? lo : hi);
  }
  auto iota = detail::host_vector<int64_t>(static_cast<size_t>(nclasses), "onehotbatch");
  std::iota(iota.begin(), iota.end(), 0);
  Tensor classes = tensor(iota).to(labels.device());
  Shape ls{1};
  for (auto e : labels.shape()) ls.push_back(e);
  return classes == reshape(labels, ls);
}

Tensor onehotbatch(const std::vector<int64_t>& labels, int64_t nclasses) {
  return onehotbatch(tensor(labels), nclasses);
}

Tensor detail::softmax(const Tensor& x, int dim, bool log) {
  const char* name = log ? "logsoftmax" : "softmax";
  ops::check_defined(x, name);
  FLX_CHECK(is_floating(x.dtype()), TypeError, name, ": expected floating input; got ", x.dtype());
  FLX_CHECK(dim >= 0 && dim < std::max(1, x.ndims()), DimensionMismatch, name, ": dim ", dim,
            " is out of range for shape ", x.shape());
  flx_softmax_desc d{};
  d.dtype = int32_t(x.dtype());
  d.log = log;
  d.inner = 1;
  d.outer = 1;
  for (int k = 0; k < x.ndims(); ++k) (k < dim ? d.inner : d.outer) *= k == dim ? 1 : x.shape()[k];
  d.axis_len = x.size(dim);
  Tensor y = empty(x.dtype(), x.shape(), x.device());
  d.x = detail::mem(x);
  d.y = detail::mem(y);
  const auto& b = detail::be(x);
  if (x.numel()) b.softmax(detail::dev(x), d);
  // The fused backward kernel is first order (its gradient refuses a second derivative).
  autograd::record(name, autograd::Order::FirstOnly, y, {x},
                   [d, yd = y.detach()](const Tensor& g0, const bool*, Tensor* gi) mutable {
    Tensor g = g0.to(yd.dtype());
    Tensor dx = empty(yd.dtype(), yd.shape(), yd.device());
    d.y = detail::mem(yd);
    d.dy = detail::mem(g);
    d.dx = detail::mem(dx);
    const auto& be = detail::be(yd);
    if (yd.numel()) be.softmax_backward(detail::dev(yd), d);
    gi[0] = dx;
  });
  return y;
}

}  // namespace flx

// Reductions (sum, mean, maximum, minimum, argmax) and their backward rules.
#include "ops_internal.hpp"

namespace flx {
namespace ops {

uint32_t dims_mask(const Tensor& x, const Dims& dims, const char* op) {
  uint32_t mask = 0;
  for (int d : dims) {
    FLX_CHECK(d >= 0 && d < std::max(x.ndims(), 1), DimensionMismatch, op, ": dim ", d,
              " is out of range for a tensor of shape ", x.shape(), " (dims are 0-based)");
    mask |= 1u << d;
  }
  return mask;
}

static Shape reduced_shape(const Shape& s, uint32_t mask) {
  Shape out = s;
  for (int k = 0; k < s.ndims(); ++k)
    if ((mask >> k) & 1u) out[k] = 1;
  return out;
}

Tensor raw_reduce(int op, const Tensor& x, uint32_t mask, double scale) {
  bool arg = op == FLX_REDUCE_ARGMAX || op == FLX_REDUCE_ARGMIN;
  Tensor out = empty(arg ? DType::Int64 : x.dtype(), reduced_shape(x.shape(), mask), x.device());
  flx_reduce_desc d = detail::reduce_desc(op, int32_t(x.dtype()), x.ndims(), x.shape().data(), mask, scale,
                                          detail::mem(x), detail::mem(out));
  detail::be(x).reduce(detail::dev(x), d);
  return out;
}

}  // namespace ops

namespace {

uint32_t all_mask(const Tensor& x) { return x.ndims() ? (1u << x.ndims()) - 1 : 0; }

// The reductions keep reduced dims as size 1, as Julia's `sum(x; dims)`
// does, even when every dim is reduced; only the forms without dims
// (`sum(x)`) return a 0-dim tensor.
constexpr bool kDropDims = true;

// Sum-like reductions: sum and mean (scale 1/n).
Tensor sum_like(const Tensor& x0, uint32_t mask, bool mean, const char* name, bool drop = false) {
  ops::check_defined(x0, name);
  DType t = x0.dtype();
  if (!is_floating(t)) t = mean ? DType::Float32 : DType::Int64;
  Tensor x = x0.to(t);
  int64_t n = 1;
  for (int k = 0; k < x.ndims(); ++k)
    if ((mask >> k) & 1u) n *= x.shape()[k];
  double scale = mean ? 1.0 / double(std::max<int64_t>(n, 1)) : 1.0;
  if (mean) FLX_CHECK(n > 0, ArgumentError, name, ": mean of an empty collection of shape ", x.shape());
  Tensor out = x.ndims() == 0 ? ops::raw_unary(FLX_OP_COPY, x) : ops::raw_reduce(FLX_REDUCE_SUM, x, mask, scale);
  if (drop) out = detail::share(out, Shape{}, out.impl()->offset);  // before any node is attached
  autograd::record(name, autograd::Order::Higher, out, {x},
                   [s = x.shape(), scale](const Tensor& g, const bool*, Tensor* gi) {
                     gi[0] = ops::broadcast_to(scale == 1.0 ? g : g * scale, s);
                   });
  return out;
}

Tensor extremum(const Tensor& x, uint32_t mask, bool is_max, const char* name, bool drop = false) {
  ops::check_defined(x, name);
  for (int k = 0; k < x.ndims(); ++k)
    FLX_CHECK(!((mask >> k) & 1u) || x.shape()[k] > 0, ArgumentError, name,
              ": reducing over an empty dimension of shape ", x.shape(), " has no answer");
  Tensor out = x.ndims() == 0 ? ops::raw_unary(FLX_OP_COPY, x)
                              : ops::raw_reduce(is_max ? FLX_REDUCE_MAX : FLX_REDUCE_MIN, x, mask);
  if (drop) out = detail::share(out, Shape{}, out.impl()->offset);  // before any node is attached
  if (is_floating(x.dtype()))
    autograd::record(name, autograd::Order::Higher, out, {x},
                     [x = x.detach(), y = out.detach(), mask](const Tensor& g, const bool*, Tensor* gi) {
                       // Gradient shared equally among the elements that attain the extremum
                       // (a constant factor: its own derivative is zero almost everywhere).
                       Tensor hit = (x == y).to(x.dtype());
                       Tensor count = x.ndims() ? ops::raw_reduce(FLX_REDUCE_SUM, hit, mask) : hit;
                       gi[0] = hit * (g / count);
                     });
  return out;
}

}  // namespace

namespace ops {

// Both differentiable, each the other's backward rule, to any order.
Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  uint32_t mask = 0;
  for (int k = 0; k < g.ndims(); ++k) {
    int64_t e = k < shape.ndims() ? shape[k] : 1;
    if (e == 1 && g.shape()[k] != 1) mask |= 1u << k;
  }
  return reshape(mask ? sum_like(g, mask, false, "sum") : g, shape);
}
Tensor broadcast_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  Tensor out = raw_map(FLX_OP_COPY, g.dtype(), g.dtype(), shape, {{&g}});
  autograd::record("broadcast", autograd::Order::Higher, out, {g},
                   [gs = g.shape()](const Tensor& d, const bool*, Tensor* gi) { gi[0] = sum_to(d, gs); });
  return out;
}

}  // namespace ops

Tensor sum(const Tensor& x) { return sum_like(x, all_mask(x), false, "sum", kDropDims); }
Tensor sum(const Tensor& x, const Dims& dims) { return sum_like(x, ops::dims_mask(x, dims, "sum"), false, "sum"); }
Tensor mean(const Tensor& x) { return sum_like(x, all_mask(x), true, "mean", kDropDims); }
Tensor mean(const Tensor& x, const Dims& dims) { return sum_like(x, ops::dims_mask(x, dims, "mean"), true, "mean"); }
Tensor maximum(const Tensor& x) { return extremum(x, all_mask(x), true, "maximum", kDropDims); }
Tensor maximum(const Tensor& x, const Dims& dims) {
  return extremum(x, ops::dims_mask(x, dims, "maximum"), true, "maximum");
}
Tensor minimum(const Tensor& x) { return extremum(x, all_mask(x), false, "minimum", kDropDims); }
Tensor minimum(const Tensor& x, const Dims& dims) {
  return extremum(x, ops::dims_mask(x, dims, "minimum"), false, "minimum");
}

Tensor argmax(const Tensor& x, int dim) {
  ops::check_defined(x, "argmax");
  FLX_CHECK(x.ndims() > 0, DimensionMismatch, "argmax: a 0-dim tensor has no dim ", dim,
            "; reshape it to (1) or call it on a vector or matrix");
  uint32_t mask = ops::dims_mask(x, {dim}, "argmax");
  FLX_CHECK(x.size(dim) > 0, ArgumentError, "argmax: dim ", dim, " of shape ", x.shape(), " is empty");
  Tensor r = ops::raw_reduce(FLX_REDUCE_ARGMAX, x, mask);
  Shape s;
  for (int k = 0; k < x.ndims(); ++k)
    if (k != dim) s.push_back(x.shape()[k]);
  return reshape(r, s);
}

Tensor onecold(const Tensor& x) {
  ops::check_defined(x, "onecold");
  FLX_CHECK(x.ndims() > 0, DimensionMismatch,
            "onecold: expected a vector of class scores or a (classes, N) array; got a 0-dim tensor");
  return argmax(x, 0);
}

}  // namespace flx

// The public activation function objects (flx/activations.hpp): each is
// its map op from the op list (include/flx/backend_ops.h); the autodiff
// rule is the generic one of its fused derivative (elementwise.cpp). rrelu
// while training is the binary op RRELU of x and slopes drawn for it, with
// its rule here; glu is two slices and sigmoid.
#include "flx/activations.hpp"

#include "dnn_internal.hpp"  // detail::rand_on
#include "flx/arrays.hpp"
#include "ops_internal.hpp"

namespace flx {

Tensor Sigmoid::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SIGMOID, x); }
Tensor Relu::operator()(const Tensor& x) const { return ops::activate(FLX_OP_RELU, x); }
Tensor Tanh::operator()(const Tensor& x) const { return ops::activate(FLX_OP_TANH, x); }
Tensor Gelu::operator()(const Tensor& x) const { return ops::activate(FLX_OP_GELU, x); }
Tensor GeluErf::operator()(const Tensor& x) const { return ops::activate(FLX_OP_GELU_ERF, x); }
Tensor Swish::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SWISH, x); }
Tensor Softplus::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SOFTPLUS, x); }
Tensor Softsign::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SOFTSIGN, x); }
Tensor GeluSigmoid::operator()(const Tensor& x) const { return ops::activate(FLX_OP_GELU_SIGMOID, x); }
Tensor HardSigmoid::operator()(const Tensor& x) const { return ops::activate(FLX_OP_HARDSIGMOID, x); }
Tensor HardTanh::operator()(const Tensor& x) const { return ops::activate(FLX_OP_HARDTANH, x); }
Tensor Relu6::operator()(const Tensor& x) const { return ops::activate(FLX_OP_RELU6, x); }
Tensor HardSwish::operator()(const Tensor& x) const { return ops::activate(FLX_OP_HARDSWISH, x); }
Tensor Selu::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SELU, x); }
Tensor LogSigmoid::operator()(const Tensor& x) const { return ops::activate(FLX_OP_LOGSIGMOID, x); }
Tensor LogCosh::operator()(const Tensor& x) const { return ops::activate(FLX_OP_LOGCOSH, x); }
Tensor Mish::operator()(const Tensor& x) const { return ops::activate(FLX_OP_MISH, x); }
Tensor TanhShrink::operator()(const Tensor& x) const { return ops::activate(FLX_OP_TANHSHRINK, x); }
Tensor Lisht::operator()(const Tensor& x) const { return ops::activate(FLX_OP_LISHT, x); }
Tensor TanhFast::operator()(const Tensor& x) const { return ops::activate(FLX_OP_TANH, x); }
Tensor SigmoidFast::operator()(const Tensor& x) const { return ops::activate(FLX_OP_SIGMOID, x); }
Tensor Softshrink::operator()(const Tensor& x, double lambda) const {
  FLX_CHECK(lambda >= 0, ArgumentError, "softshrink: λ must be non-negative; got ", lambda);
  return ops::activate(FLX_OP_SOFTSHRINK, x, lambda);
}
Tensor Trelu::operator()(const Tensor& x, double theta) const { return ops::activate(FLX_OP_TRELU, x, theta); }

Tensor Rrelu::operator()(const Tensor& x, double lo, double hi) const {
  return (*this)(x, lo, hi, detail::is_recording());
}
Tensor Rrelu::operator()(const Tensor& x0, double lo, double hi, bool training) const {
  ops::check_defined(x0, "rrelu");
  FLX_CHECK(lo <= hi, ArgumentError, "rrelu: expected lo <= hi; got ", lo, " > ", hi);
  if (!training) return ops::activate(FLX_OP_LEAKYRELU, x0, (lo + hi) / 2);
  const Tensor x = is_floating(x0.dtype()) ? x0 : x0.to(DType::Float32);
  // One slope per element, uniform in [lo, hi), drawn as dropout's mask.
  const Tensor slope = (detail::rand_on(x.dtype(), x.shape(), x.device()) * (hi - lo) + lo).detach();
  Tensor out = ops::raw_binary(FLX_OP_RRELU, x, slope);
  autograd::record("rrelu", autograd::Order::Higher, out, {x}, [x = x.detach(), slope](const Tensor& g, const bool*, Tensor* gi) {
    gi[0] = where(x > 0.0, g, g * slope);
  });
  return out;
}

namespace {
// glu's output shape: dim halved, checked.
Shape glu_shape(const Shape& x, int dim) {
  FLX_CHECK(dim >= 0 && dim < x.ndims(), ArgumentError, "glu: dim ", dim, " is out of range for shape ", x);
  FLX_CHECK(x[dim] % 2 == 0, DimensionMismatch, "glu: dim ", dim, " of shape ", x,
            " must have an even size, to split in two halves; got ", x[dim]);
  Shape y = x;
  y[dim] /= 2;
  return y;
}
}  // namespace

Tensor Glu::operator()(const Tensor& x, int dim) const {
  ops::check_defined(x, "glu");
  const int64_t half = glu_shape(x.shape(), dim)[dim];
  return slice(x, dim, 0, half) * sigmoid(slice(x, dim, half, 2 * half));
}

Shape outputsize(const Glu&, const Shape& x) { return glu_shape(x, 0); }

Tensor LeakyRelu::operator()(const Tensor& x, double a) const { return ops::activate(FLX_OP_LEAKYRELU, x, a); }
Tensor Elu::operator()(const Tensor& x, double alpha) const { return ops::activate(FLX_OP_ELU, x, alpha); }
Tensor Celu::operator()(const Tensor& x, double alpha) const {
  FLX_CHECK(alpha != 0, ArgumentError, "celu: alpha must be non-zero (it divides x); got 0");
  return ops::activate(FLX_OP_CELU, x, alpha);
}

}  // namespace flx

// The public activation function objects (flx/activations.hpp): each is
// its map op from the op list (include/flx/backend_ops.h); the autodiff
// rule is the generic one of its fused derivative (elementwise.cpp).
#include "flx/activations.hpp"

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
Tensor LeakyRelu::operator()(const Tensor& x, double a) const { return ops::activate(FLX_OP_LEAKYRELU, x, a); }
Tensor Elu::operator()(const Tensor& x, double alpha) const { return ops::activate(FLX_OP_ELU, x, alpha); }
Tensor Celu::operator()(const Tensor& x, double alpha) const {
  FLX_CHECK(alpha != 0, ArgumentError, "celu: alpha must be non-zero (it divides x); got 0");
  return ops::activate(FLX_OP_CELU, x, alpha);
}

}  // namespace flx

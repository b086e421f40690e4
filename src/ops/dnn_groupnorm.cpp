// Group normalisation, GroupNorm's and InstanceNorm's arithmetic: the dnn
// table's groupnorm_* (ABI minor 10) where the backend has them, else
// composed from batchnorm and maps.
#include <algorithm>

#include "dnn_internal.hpp"

namespace flx::ops {

namespace {

// cuDNN's least batch-norm epsilon (CUDNN_BN_MIN_EPSILON): every backend's
// batchnorm takes epsilons from here up.
constexpr double least_batchnorm_epsilon = 1e-5;

// x seen as (rows, sets), each set (column) normalised with its own mean and
// biased variance. That is batch normalisation in training mode of x seen as
// (rows, sets, 1), one "channel" per set: a fused kernel of two passes each
// way on every backend, where mean, -, square, sqrt and / take eight passes
// forward. Epsilons below the least every backend's batchnorm takes use
// those, and so do a backend without the dnn table (CUDA without cuDNN) and
// a nested gradient call (recording_depth() >= 2, where a second derivative
// may be asked for): the fused kernel differentiates once, the maps to any
// order.
Tensor standardise_sets(const Tensor& x, int64_t rows, int64_t sets, double epsilon, const std::string& layer) {
  if (x.numel() == 0) return x;  // nothing to standardise
  if (epsilon >= least_batchnorm_epsilon &&
      use_kernel(x, {FLX_FUSED_BATCHNORM_FORWARD, FLX_FUSED_BATCHNORM_BACKWARD}, autograd::Order::FirstOnly))
    return reshape(batchnorm(reshape(x, Shape{rows, sets, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1,
                             epsilon, layer.c_str()),
                   x.shape());
  const Tensor x2 = reshape(x, Shape{rows, sets});
  const Tensor centred = x2 - mean(x2, Dims{0});
  return reshape(centred / sqrt(mean(square(centred), Dims{0}) + epsilon), x.shape());
}

// The backend's groupnorm_* with its autodiff rule; undefined when the
// backend declines the case.
Tensor fused(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, double epsilon) {
  const int nd = x.ndims();
  flx_groupnorm_desc d{};
  d.channels = x.shape()[nd - 2];
  d.batch = x.shape()[nd - 1];
  d.spatial = x.numel() / (d.channels * d.batch);
  d.groups = groups;
  d.dtype = int32_t(x.dtype());
  d.epsilon = epsilon;
  Tensor y = empty(x.dtype(), x.shape(), x.device());
  const Tensor saved_mean = empty(x.dtype(), Shape{groups, d.batch}, x.device());
  const Tensor saved_invstd = empty(x.dtype(), Shape{groups, d.batch}, x.device());
  d.x = detail::mem(x);
  d.y = detail::mem(y);
  d.scale = mem_or_null(scale);
  d.bias = mem_or_null(bias);
  d.saved_mean = detail::mem(saved_mean);
  d.saved_invstd = detail::mem(saved_invstd);
  if (!detail::be(x).groupnorm_forward(detail::dev(x), d)) return Tensor();
  autograd::record("group_norm", autograd::Order::FirstOnly, y, {x, scale, bias},
                   [d, xs = x.detach(), sc = scale.defined() ? scale.detach() : Tensor(), saved_mean,
                    saved_invstd](const Tensor& g0, const bool* needs, Tensor* gi) mutable {
    const Tensor g = g0.dtype() == xs.dtype() ? g0 : g0.to(xs.dtype());
    Tensor dx = empty(xs.dtype(), xs.shape(), xs.device());
    Tensor dscale = needs[1] ? empty(xs.dtype(), Shape{d.channels}, xs.device()) : Tensor();
    Tensor dbias = needs[2] ? empty(xs.dtype(), Shape{d.channels}, xs.device()) : Tensor();
    d.x = detail::mem(xs);
    d.scale = mem_or_null(sc);
    d.saved_mean = detail::mem(saved_mean);
    d.saved_invstd = detail::mem(saved_invstd);
    d.y = {};
    d.dy = detail::mem(g);
    d.dx = detail::mem(dx);
    d.dscale = mem_or_null(dscale);
    d.dbias = mem_or_null(dbias);
    detail::be(xs).groupnorm_backward(detail::dev(xs), d);
    gi[0] = dx;
    if (needs[1]) gi[1] = dscale;
    if (needs[2]) gi[2] = dbias;
  });
  return y;
}

}  // namespace

// The backend's fused kernel where use_kernel says so, else the composition.
Tensor group_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, double epsilon,
                  const std::string& layer) {
  const int nd = x.ndims();
  const int64_t channels = x.shape()[nd - 2], batch = x.shape()[nd - 1];
  const int64_t spatial = x.numel() / std::max<int64_t>(channels * batch, 1);
  if (x.numel() > 0 &&
      use_kernel(x, {FLX_FUSED_GROUPNORM_FORWARD, FLX_FUSED_GROUPNORM_BACKWARD}, autograd::Order::FirstOnly)) {
    if (Tensor y = fused(x, scale, bias, groups, epsilon); y.defined()) return y;
  }
  // (spatial · channels / groups, groups · batch): statistics over each column.
  Tensor z = reshape(standardise_sets(x, spatial * (channels / groups), groups * batch, epsilon, layer),
                     Shape{spatial, channels, batch});
  const Shape per_channel{1, channels, 1};
  if (scale.defined()) z = z * reshape(scale, per_channel);
  if (bias.defined()) z = z + reshape(bias, per_channel);
  return reshape(z, x.shape());
}

}  // namespace flx::ops

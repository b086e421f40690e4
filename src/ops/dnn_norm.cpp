// Batch normalisation (through the dnn table), dropout and flatten, with
// their autodiff rules.
#include <cmath>
#include <string>

#include "dnn_internal.hpp"

namespace flx {

namespace {

// The statistics' dtype for inputs of dtype t (backend.h: halves keep Float32
// statistics, as cuDNN does).
DType param_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

void check_param(const Tensor& p, const Tensor& x, int64_t channels, const char* what, const char* layer) {
  if (!p.defined()) return;
  FLX_CHECK(p.shape() == Shape{channels}, DimensionMismatch, layer, ": the ", what, " must have shape (", channels,
            ") for an input with ", channels, " channels (its second last dim); got ", p.shape(),
            " for an input of shape ", x.shape());
  FLX_CHECK(p.dtype() == param_dtype(x.dtype()), TypeError, layer, ": the ", what, " is ", p.dtype(), " but a ",
            x.dtype(), " input needs ", param_dtype(x.dtype()), " statistics and parameters; convert them (f16(model) ",
            "and bf16(model) keep BatchNorm's in Float32, f32 and f64 convert them with the rest)");
  FLX_CHECK(p.device() == x.device(), DeviceMismatch, layer, ": the ", what, " is on ", p.device(),
            " but the input is on ", x.device(), "; move both to one device (model | device)");
}

// Shape of a per-channel vector broadcast against x (1, ..., C, 1).
Shape channel_shape(const Tensor& x) {
  std::vector<int64_t> s(size_t(x.ndims()), 1);
  s[size_t(x.ndims() - 2)] = x.shape()[x.ndims() - 2];
  return Shape(s);
}
Dims all_but_channels(const Tensor& x) {
  Dims d;
  for (int i = 0; i < x.ndims(); ++i)
    if (i != x.ndims() - 2) d.push_back(i);
  return d;
}

}  // namespace

Tensor batchnorm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& running_mean,
                 const Tensor& running_var, bool training, double momentum, double epsilon, const char* layer) {
  ops::check_defined(x, layer);
  FLX_CHECK(x.ndims() >= 2, DimensionMismatch, layer,
            ": expected an input with channels in its second last dim ((features, batch) or (spatial..., channels, "
            "batch)); got shape ", x.shape());
  FLX_CHECK(is_floating(x.dtype()), TypeError, layer, ": expected a floating input; got ", x.dtype());
  const int64_t channels = x.shape()[x.ndims() - 2], batch = x.shape()[x.ndims() - 1];
  check_param(scale, x, channels, "scale (γ)", layer);
  check_param(bias, x, channels, "bias (β)", layer);
  check_param(running_mean, x, channels, "running mean (μ)", layer);
  check_param(running_var, x, channels, "running variance (σ²)", layer);
  FLX_CHECK(running_mean.defined() == running_var.defined(), ArgumentError, layer,
            ": give both running statistics or neither");
  FLX_CHECK(training || running_mean.defined(), ArgumentError, layer,
            ": inference needs running statistics (track_stats=true), or use the batch's (trainmode)");
  FLX_CHECK(epsilon > 0 && momentum >= 0 && momentum <= 1, ArgumentError, layer,
            ": expected epsilon > 0 and momentum in [0, 1]; got ", epsilon, " and ", momentum);
  flx_batchnorm_desc d{};
  d.dtype = int32_t(x.dtype());
  d.param_dtype = int32_t(param_dtype(x.dtype()));
  d.training = training;
  d.channels = channels;
  d.batch = batch;
  d.spatial = channels ? x.numel() / std::max<int64_t>(channels * batch, 1) : 0;
  d.epsilon = epsilon;
  d.momentum = momentum;
  Tensor y = empty(x.dtype(), x.shape(), x.device());
  Tensor saved_mean, saved_invstd;
  if (training) {
    FLX_CHECK(d.spatial * batch > 0 || x.numel() == 0, ArgumentError, layer, ": no values to take statistics of");
    saved_mean = empty(param_dtype(x.dtype()), Shape{channels}, x.device());
    saved_invstd = empty(param_dtype(x.dtype()), Shape{channels}, x.device());
  }
  if (x.numel()) {
    d.x = detail::mem(x);
    d.y = detail::mem(y);
    d.scale = ops::mem_or_null(scale);
    d.bias = ops::mem_or_null(bias);
    d.running_mean = ops::mem_or_null(running_mean);
    d.running_var = ops::mem_or_null(running_var);
    d.saved_mean = ops::mem_or_null(saved_mean);
    d.saved_invstd = ops::mem_or_null(saved_invstd);
    detail::be(x).batchnorm_forward(detail::dev(x), d);
  }
  if (training) {
    autograd::record(layer, autograd::Order::FirstOnly, y, {x, scale, bias},
                     [d, xs = x.detach(), sc = scale.defined() ? scale.detach() : Tensor(), saved_mean,
                      saved_invstd](const Tensor& g0, const bool* needs, Tensor* gi) mutable {
      const Tensor g = g0.dtype() == xs.dtype() ? g0 : g0.to(xs.dtype());
      const DType pt = DType(d.param_dtype);
      Tensor dx = empty(xs.dtype(), xs.shape(), xs.device());
      Tensor dscale = needs[1] ? empty(pt, Shape{d.channels}, xs.device()) : Tensor();
      Tensor dbias = needs[2] ? empty(pt, Shape{d.channels}, xs.device()) : Tensor();
      if (xs.numel()) {
        d.x = detail::mem(xs);
        d.dy = detail::mem(g);
        d.dx = detail::mem(dx);
        d.scale = ops::mem_or_null(sc);
        d.saved_mean = detail::mem(saved_mean);
        d.saved_invstd = detail::mem(saved_invstd);
        d.dscale = ops::mem_or_null(dscale);
        d.dbias = ops::mem_or_null(dbias);
        d.y = {};
        d.running_mean = d.running_var = {};
        detail::be(xs).batchnorm_backward(detail::dev(xs), d);
      } else {
        if (dscale.defined()) ops::fill(dscale, 0);
        if (dbias.defined()) ops::fill(dbias, 0);
      }
      gi[0] = dx;
      if (needs[1]) gi[1] = dscale;
      if (needs[2]) gi[2] = dbias;
    });
  } else {
    // Inference is affine in x, scale and bias: its gradient from ops, to any order.
    autograd::record(layer, autograd::Order::Higher, y, {x, scale, bias},
                     [xs = x, scale, rm = running_mean.detach(), rv = running_var.detach(),
                      epsilon](const Tensor& g, const bool* needs, Tensor* gi) {
      const Shape cs = channel_shape(xs);
      const Tensor invstd = reshape(1.0 / sqrt(rv + epsilon), cs).to(xs.dtype());
      if (needs[0]) gi[0] = scale.defined() ? g * (reshape(scale, cs).to(xs.dtype()) * invstd) : g * invstd;
      const Dims dims = all_but_channels(xs);
      if (needs[1]) gi[1] = reshape(sum(g * ((xs - reshape(rm, cs).to(xs.dtype())) * invstd), dims), Shape{xs.shape()[xs.ndims() - 2]});
      if (needs[2]) gi[2] = reshape(sum(g, dims), Shape{xs.shape()[xs.ndims() - 2]});
    });
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, const std::vector<int>& dims) {
  ops::check_defined(x, "dropout");
  FLX_CHECK(p >= 0 && p <= 1, ArgumentError, "dropout: the probability must lie in [0, 1]; got ", p);
  FLX_CHECK(is_floating(x.dtype()), TypeError, "dropout: expected a floating input; got ", x.dtype());
  if (p == 0) return x;
  // A dropped element is exactly 0 whatever it held (NNlib's ifelse), so
  // never x × 0: that is NaN for an Inf or a NaN, in the value and, through
  // an Inf gradient, in the gradient too. `where` gives 0 in both.
  const Tensor zero = zeros(x.dtype(), Shape{}).to(x.device());
  if (p == 1) return where(zeros(DType::Bool, Shape{}).to(x.device()), x, zero);  // every element dropped
  // Flux's dims: the mask varies along `dims` only (size 1 elsewhere).
  std::vector<int64_t> ms(size_t(x.ndims()), 1);
  for (int i = 0; i < x.ndims(); ++i) ms[size_t(i)] = dims.empty() ? x.shape()[i] : 1;
  for (int d : dims) {
    FLX_CHECK(d >= 0 && d < x.ndims(), ArgumentError, "dropout: dim ", d, " is out of range for shape ", x.shape());
    ms[size_t(d)] = x.shape()[d];
  }
  const Tensor r = detail::rand_on(x.dtype(), Shape(ms), x.device());
  const Tensor kept = r >= p;
  // The kept elements as before (x × mask, the mask 1 / (1 - p) there).
  const Tensor mask = kept.to(x.dtype()) * (1.0 / (1.0 - p));
  return where(kept, x * mask, zero);
}

Tensor alphadropout(const Tensor& x, double p) {
  ops::check_defined(x, "alphadropout");
  FLX_CHECK(p >= 0 && p <= 1, ArgumentError, "alphadropout: the probability must lie in [0, 1]; got ", p);
  FLX_CHECK(is_floating(x.dtype()), TypeError, "alphadropout: expected a floating input; got ", x.dtype());
  if (p == 0) return x;
  if (p == 1) return sign(x) * 0.0;  // Flux's special case
  // Flux's constants (Klambauer et al. 2017): α' = selu(-Inf), and A, B
  // restore mean 0 and variance 1 after a fraction p is set to α'.
  const double alpha = -1.7580993408473766;
  const double a = 1.0 / std::sqrt((1 - p) * (1 + p * alpha * alpha));
  const double b = -a * alpha * p;
  const Tensor kept = detail::rand_on(x.dtype(), x.shape(), x.device()) > p;
  return where(kept, x, full(x.dtype(), alpha, Shape{}).to(x.device())) * a + b;
}

Shape ops::flatten_shape(const Shape& x) {
  FLX_CHECK(x.ndims() >= 1, DimensionMismatch, "flatten: expected at least one dim; got shape ", x);
  // The rows counted, not inferred: an empty batch has no -1 to infer.
  int64_t rows = 1;
  for (int i = 0; i + 1 < x.ndims(); ++i) rows *= x[i];
  return Shape{rows, x[x.ndims() - 1]};
}

Tensor Flatten::operator()(const Tensor& x) const {
  ops::check_defined(x, "flatten");
  return reshape(x, ops::flatten_shape(x.shape()));
}

}  // namespace flx

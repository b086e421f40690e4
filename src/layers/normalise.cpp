// BatchNorm, LayerNorm, Dropout and AlphaDropout: Flux's defaults, modes and
// printing.
#include "flx/layers/normalise.hpp"

#include <sstream>

#include "flx/autodiff.hpp"
#include "flx/error.hpp"
#include "flx/layers/basic.hpp"
#include "flx/ops.hpp"
#include "autograd.hpp"
#include "layers/layer_input.hpp"
#include "ops/ops_internal.hpp"

namespace flx {

namespace detail {
bool training_now(const std::optional<bool>& active) { return active.value_or(is_recording()); }
}  // namespace detail

BatchNorm::BatchNorm(int64_t c, Activation a, const BatchNormOptions& o) : act(std::move(a)), options(o), channels(c) {
  FLX_CHECK(c >= 1, ArgumentError, "BatchNorm: the channel count must be positive; got ", c);
  FLX_CHECK(o.epsilon > 0 && o.momentum >= 0 && o.momentum <= 1, ArgumentError,
            "BatchNorm: expected epsilon > 0 and momentum in [0, 1]; got ", o.epsilon, " and ", o.momentum);
  if (o.affine) {
    bias = zeros(c);
    scale = ones(c);
  }
  if (o.track_stats) {
    running_mean = zeros(c);
    running_var = ones(c);
  }
}

Shape outputsize(const BatchNorm& l, const Shape& x) {
  FLX_CHECK(x.ndims() >= 2 && x[x.ndims() - 2] == l.channels, DimensionMismatch, detail::layer_string(l),
            ": expected ", l.channels, " channels in the second last dim of the input; got shape ", x.str());
  return x;
}

Tensor BatchNorm::operator()(const Tensor& x) const {
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(
      *this, x, {.arrays = {{"the scale (γ)", &scale}, {"the bias (β)", &bias}, {"the running mean", &running_mean},
                           {"the running variance", &running_var}}});
  (void)outputsize(*this, x.shape());
  // Without running statistics the batch's serve in inference too (Flux).
  const bool training = detail::training_now(active) || !options.track_stats;
  return act(batchnorm(x, scale, bias, running_mean, running_var, training, options.momentum, options.epsilon,
                       layer.c_str()));
}

namespace {
// The normalised size, each dim checked here so that a bad one is named as
// LayerNorm's (a Shape would reject a negative one in its own words).
Shape layernorm_size(const std::vector<int64_t>& dims) {
  bool positive = !dims.empty();
  for (int64_t e : dims) positive = positive && e >= 1;
  if (!positive) {
    std::ostringstream got;
    for (size_t k = 0; k < dims.size(); ++k) got << (k ? ", " : "") << dims[k];
    FLX_THROW(ArgumentError, "LayerNorm: the normalised size must be one or more positive dims; got (", got.str(),
              ")");
  }
  return Shape(dims);
}
}  // namespace

LayerNorm::LayerNorm(int64_t d, Activation a, const LayerNormOptions& o)
    : LayerNorm(layernorm_size({d}), std::move(a), o) {}
LayerNorm::LayerNorm(std::initializer_list<int64_t> s, Activation a, const LayerNormOptions& o)
    : LayerNorm(layernorm_size(std::vector<int64_t>(s)), std::move(a), o) {}

LayerNorm::LayerNorm(const Shape& s, Activation a, const LayerNormOptions& o)
    : act(std::move(a)), options(o), size(s) {
  bool positive = s.ndims() >= 1;
  for (int64_t e : s) positive = positive && e >= 1;
  FLX_CHECK(positive, ArgumentError, "LayerNorm: the normalised size must be one or more positive dims; got ", s);
  FLX_CHECK(o.epsilon >= 0, ArgumentError, "LayerNorm: expected epsilon >= 0; got ", o.epsilon);
  if (o.affine) {
    scale = ones(s);
    bias = zeros(s);
  }
}

Shape outputsize(const LayerNorm& l, const Shape& x) {
  bool leading = x.ndims() >= l.size.ndims();
  for (int k = 0; leading && k < l.size.ndims(); ++k) leading = x[k] == l.size[k];
  const std::string expected =
      l.size.ndims() == 1 ? "dim is " + std::to_string(l.size[0]) : "dims are (" + l.size.str() + ")";
  FLX_CHECK(leading, DimensionMismatch, detail::layer_string(l), ": expected an input whose first ", expected,
            " (the normalised size), then any others; got shape ", x);
  return x;
}

// Flux's normalise: each set of the normalised dims brought to mean 0 and
// biased variance 1, then scale, bias and the activation.
Tensor LayerNorm::operator()(const Tensor& x) const {
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(
      *this, x, {.floating = true, .arrays = {{"the scale (γ)", &scale}, {"the bias (β)", &bias}}});
  (void)outputsize(*this, x.shape());
  // Float16 and BFloat16 inputs are normalised in Float32 (statistics,
  // scale and bias) and the result rounded once, as PyTorch's layer_norm
  // does: in the halves, x - μ alone would lose the digits that a large
  // mean leaves to the spread.
  const bool half = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  const Tensor xw = half ? x.to(DType::Float32) : x;
  // Each set of size.numel() values standardised: group normalisation with
  // one group, the backend's fused kernel or a composition as ops::group_norm
  // chooses (two passes each way where the composed form takes about ten:
  // the char-transformer's step 13 % faster on the CPU's kernel).
  const int64_t rows = size.numel(), sets = rows ? xw.numel() / rows : 0;
  Tensor y = reshape(ops::group_norm(reshape(xw, Shape{rows, 1, sets}), Tensor(), Tensor(), 1, options.epsilon, layer),
                     xw.shape());
  if (scale.defined()) y = y * (half ? scale.to(DType::Float32) : scale);
  if (bias.defined()) y = y + (half ? bias.to(DType::Float32) : bias);
  y = act(y);
  return half ? y.to(x.dtype()) : y;
}

// ---- GroupNorm and InstanceNorm ----------------------------------------------------

namespace {

// x normalised over `dims` with its own mean and biased variance (Flux's
// _norm_layer_forward), or with given statistics (broadcast to x).
Tensor normalised(const Tensor& x, const Tensor& mu, const Tensor& var, double eps) {
  return (x - mu) / sqrt(var + eps);
}

// scale and bias (one per channel, or undefined) of x (spatial..., C, N) in
// x's working type, shaped to broadcast along its channels.
Tensor per_channel(const Tensor& p, const Tensor& x) {
  Shape s;
  for (int k = 0; k < x.ndims(); ++k) s.push_back(k == x.ndims() - 2 ? x.shape()[k] : 1);
  return reshape(p.dtype() == x.dtype() ? p : p.to(x.dtype()), s);
}

bool half_type(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// p (per channel, or undefined) in dtype t.
Tensor in_type(const Tensor& p, DType t) { return p.defined() && p.dtype() != t ? p.to(t) : p; }

}  // namespace

GroupNorm::GroupNorm(int64_t c, int64_t g, Activation a, const GroupNormOptions& o)
    : act(std::move(a)), options(o), channels(c), groups(g) {
  FLX_CHECK(c >= 1 && g >= 1, ArgumentError, "GroupNorm: the channel and group counts must be positive; got ", c,
            " channels and ", g, " groups");
  FLX_CHECK(c % g == 0, ArgumentError, "GroupNorm: the number of groups (", g,
            ") must divide the number of channels (", c, ")");
  FLX_CHECK(o.epsilon >= 0 && o.momentum >= 0 && o.momentum <= 1, ArgumentError,
            "GroupNorm: expected epsilon >= 0 and momentum in [0, 1]; got ", o.epsilon, " and ", o.momentum);
  if (o.affine) {
    bias = zeros(c);
    scale = ones(c);
  }
}

Shape outputsize(const GroupNorm& l, const Shape& x) {
  FLX_CHECK(x.ndims() >= 2 && x[x.ndims() - 2] == l.channels, DimensionMismatch, detail::layer_string(l), ": expected ",
            l.channels, " channels in the second last dim of the input ((spatial..., channels, batch) or (channels, "
            "batch)); got shape ", x.str());
  return x;
}

Tensor GroupNorm::operator()(const Tensor& x) const {
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(
      *this, x, {.floating = true, .arrays = {{"the scale (γ)", &scale}, {"the bias (β)", &bias}}});
  (void)outputsize(*this, x.shape());
  const bool half = half_type(x.dtype());
  const Tensor xw = half ? x.to(DType::Float32) : x;
  const Tensor y = act(ops::group_norm(xw, in_type(scale, xw.dtype()), in_type(bias, xw.dtype()), groups,
                                       options.epsilon, layer));
  return half ? y.to(x.dtype()) : y;
}

InstanceNorm::InstanceNorm(int64_t c, Activation a, const InstanceNormOptions& o)
    : act(std::move(a)), options(o), channels(c) {
  FLX_CHECK(c >= 1, ArgumentError, "InstanceNorm: the channel count must be positive; got ", c);
  FLX_CHECK(o.epsilon >= 0 && o.momentum >= 0 && o.momentum <= 1, ArgumentError,
            "InstanceNorm: expected epsilon >= 0 and momentum in [0, 1]; got ", o.epsilon, " and ", o.momentum);
  if (o.affine) {
    bias = zeros(c);
    scale = ones(c);
  }
  if (o.track_stats) {
    running_mean = zeros(c);
    running_var = ones(c);
  }
}

Shape outputsize(const InstanceNorm& l, const Shape& x) {
  FLX_CHECK(x.ndims() >= 3 && x[x.ndims() - 2] == l.channels, DimensionMismatch, detail::layer_string(l),
            ": expected an input (spatial..., channels, batch) with at least one spatial dim and ", l.channels,
            " channels in the second last dim; got shape ", x.str());
  return x;
}

Tensor InstanceNorm::operator()(const Tensor& x) const {
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(
      *this, x,
      {.floating = true,
       .arrays = {{"the scale (γ)", &scale}, {"the bias (β)", &bias}, {"the running mean", &running_mean},
                  {"the running variance", &running_var}}});
  (void)outputsize(*this, x.shape());
  const int nd = x.ndims();
  const bool half = half_type(x.dtype());
  const Tensor xw = half ? x.to(DType::Float32) : x;
  Dims spatial;
  for (int k = 0; k + 2 < nd; ++k) spatial.push_back(k);
  const bool training = detail::training_now(active);
  const DType t = xw.dtype();
  Tensor y;
  if (!training && options.track_stats) {
    y = normalised(xw, per_channel(running_mean, xw), per_channel(running_var, xw), options.epsilon);
    if (scale.defined()) y = y * per_channel(scale, y);
    if (bias.defined()) y = y + per_channel(bias, y);
  } else {
    // m: the elements of one slice (a channel of one observation).
    int64_t m = 1;
    for (int k : spatial) m *= x.shape()[k];
    // An unbiased variance of one element is 0 / 0: the running variance
    // would become NaN, and with it every later inference. PyTorch refuses
    // the input; so does flx, where the statistics are tracked.
    FLX_CHECK(!(options.track_stats && training) || m != 1, DimensionMismatch, layer,
              ": training with track_stats needs more than one spatial element per channel (the running variance is ",
              "unbiased, × m / (m - 1)); got shape ", x.shape().str(),
              ". Use a larger input, testmode, or track_stats=false");
    // InstanceNorm is GroupNorm with a group per channel.
    y = ops::group_norm(xw, in_type(scale, t), in_type(bias, t), channels, options.epsilon, layer);
    if (options.track_stats && training && x.numel() > 0) {
      // Flux's _track_stats!: the batch's mean of the slices' means and of
      // their variances made unbiased (× m / (m - 1)), moved by momentum; no
      // gradient flows through them. An empty batch leaves them as they are.
      const Tensor xd = xw.detach();
      const Tensor mu = mean(xd, spatial);
      const Tensor var = mean(square(xd - mu), spatial);
      const Dims batch{nd - 1};
      const Tensor mu_new = reshape(mean(mu, batch), Shape{channels});
      const Tensor var_new = reshape(mean(var, batch), Shape{channels});
      const double mom = options.momentum, unbias = double(m) / double(m - 1);
      const Tensor rm = running_mean.detach(), rv = running_var.detach();
      const Tensor new_mean = (rm * (1 - mom) + mu_new.to(rm.dtype()) * mom).detach();
      const Tensor new_var = (rv * (1 - mom) + var_new.to(rv.dtype()) * (mom * unbias)).detach();
      ops::raw_map_into(running_mean, FLX_OP_COPY, running_mean.dtype(), {{&new_mean}});
      ops::raw_map_into(running_var, FLX_OP_COPY, running_var.dtype(), {{&new_var}});
    }
  }
  y = act(y);
  return half ? y.to(x.dtype()) : y;
}

Dropout::Dropout(double q, std::vector<int> d) : p(q), dims(std::move(d)) {
  FLX_CHECK(q >= 0 && q <= 1, ArgumentError, "Dropout: the probability must lie in [0, 1]; got ", q);
  for (int k : dims)
    FLX_CHECK(k >= 0, ArgumentError, "Dropout: dims are 0-based dims of the input, so at least 0; got ", k);
}

Tensor Dropout::operator()(const Tensor& x) const { return detail::training_now(active) ? dropout(x, p, dims) : x; }

AlphaDropout::AlphaDropout(double q) : p(q) {
  FLX_CHECK(q >= 0 && q <= 1, ArgumentError, "AlphaDropout: the probability must lie in [0, 1]; got ", q);
}

Tensor AlphaDropout::operator()(const Tensor& x) const {
  return detail::training_now(active) ? alphadropout(x, p) : x;
}

void show_compact(std::ostream& os, const BatchNorm& l) {
  os << "BatchNorm(" << l.channels;
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.options.affine) os << ", affine=false";
  if (!l.options.track_stats) os << ", track_stats=false";
  if (l.active) os << ", active=" << (*l.active ? "true" : "false");
  os << ")";
}
void show_compact(std::ostream& os, const LayerNorm& l) {
  os << "LayerNorm(";
  for (int k = 0; k < l.size.ndims(); ++k) os << (k ? ", " : "") << l.size[k];
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.options.affine) os << ", affine=false";
  os << ")";
}
void show_compact(std::ostream& os, const GroupNorm& l) {
  os << "GroupNorm(" << l.channels << ", " << l.groups;
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.options.affine) os << ", affine=false";
  if (l.active) os << ", active=" << (*l.active ? "true" : "false");
  os << ")";
}
void show_compact(std::ostream& os, const InstanceNorm& l) {
  os << "InstanceNorm(" << l.channels;
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.options.affine) os << ", affine=false";  // Flux's default, and it says so
  if (l.active) os << ", active=" << (*l.active ? "true" : "false");
  os << ")";
}
void show_compact(std::ostream& os, const Dropout& l) {
  os << "Dropout(" << l.p;
  if (!l.dims.empty()) {
    os << ", dims=";
    if (l.dims.size() == 1) os << l.dims[0] + 1;  // Flux's dims count from 1
    else {
      os << "(";
      for (size_t i = 0; i < l.dims.size(); ++i) os << (i ? ", " : "") << l.dims[i] + 1;
      os << ")";
    }
  }
  if (l.active) os << ", active=" << (*l.active ? "true" : "false");
  os << ")";
}

void show_compact(std::ostream& os, const AlphaDropout& l) {
  os << "AlphaDropout(" << l.p;
  if (l.active) os << ", active=" << (*l.active ? "true" : "false");
  os << ")";
}

}  // namespace flx

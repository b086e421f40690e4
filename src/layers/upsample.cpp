// Upsample and PixelShuffle: their checks (one shape rule each, shared by
// the forward pass and outputsize), forward passes on the array ops, and
// Flux's printing.
#include "flx/layers/upsample.hpp"

#include <cmath>
#include <sstream>

#include "flx/error.hpp"
#include "layers/layer_input.hpp"
#include "ops/ops_internal.hpp"
#include "util/checked_size.hpp"

namespace flx {

namespace {

const std::string& mode_of(const UpsampleOptions& o) {
  static const std::string nearest = "nearest";
  return o.mode.empty() ? nearest : o.mode;
}

// The spatial dims a mode needs (0: any number).
int spatial_dims_of(const std::string& mode) { return mode == "bilinear" ? 2 : mode == "trilinear" ? 3 : 0; }

// The options for an input of `nd` dims: one scale expanded to every spatial dim.
UpsampleOptions expanded(const UpsampleOptions& o, int nd) {
  UpsampleOptions e = o;
  e.mode = mode_of(o);
  if (e.scale.size() == 1 && nd > 3) e.scale.assign(size_t(nd - 2), o.scale[0]);
  return e;
}

void show_number(std::ostream& os, double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) os << int64_t(v);
  else os << v;
}

template <class T>
void show_values(std::ostream& os, const std::vector<T>& v) {
  if (v.size() == 1) {
    show_number(os, double(v[0]));
    return;
  }
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ", ";
    show_number(os, double(v[i]));
  }
  os << ")";
}

}  // namespace

Upsample::Upsample(UpsampleOptions o) : options(std::move(o)) {
  const std::string& mode = mode_of(options);
  FLX_CHECK(mode == "nearest" || mode == "bilinear" || mode == "trilinear", ArgumentError, "Upsample: mode=:", mode,
            " is not supported (\"nearest\", \"bilinear\" or \"trilinear\")");
  FLX_CHECK(options.scale.empty() != options.size.empty(), ArgumentError,
            "Upsample: either .scale or .size should be given (but not both); got ",
            options.scale.empty() ? "neither" : "both");
  for (double s : options.scale) {
    FLX_CHECK(s > 0 && std::isfinite(s), ArgumentError, "Upsample: scales must be > 0; got ", s);
    FLX_CHECK(mode != "nearest" || s == std::floor(s), ArgumentError,
              "Upsample: nearest upsampling takes whole scales; got ", s, " (use .mode = \"bilinear\")");
  }
  for (int64_t s : options.size) FLX_CHECK(s >= 1, ArgumentError, "Upsample: sizes must be >= 1; got ", s);
}

Upsample::Upsample(double scale, std::string mode) : Upsample(UpsampleOptions{.mode = std::move(mode), .scale = {scale}}) {}

Shape outputsize(const Upsample& l, const Shape& x) {
  const std::string name = detail::layer_string(l);
  const std::string& mode = mode_of(l.options);
  const int nd = x.ndims();
  FLX_CHECK(nd >= 3, DimensionMismatch, name, ": expected an input (spatial..., channels, batch), at least 3 dims; ",
            "got shape ", x.str());
  const int spatial = nd - 2, need = spatial_dims_of(mode);
  FLX_CHECK(need == 0 || spatial == need, DimensionMismatch, name, ": ", mode, " upsampling needs ", need,
            " spatial dims (an input of ", need + 2, " dims); got shape ", x.str());
  const UpsampleOptions o = expanded(l.options, nd);
  const bool by_scale = !o.scale.empty();
  const size_t n = by_scale ? o.scale.size() : o.size.size();
  if (by_scale)
    FLX_CHECK(n == size_t(spatial), DimensionMismatch, name, ": expected one scale, or one per spatial dim (", spatial,
              "), for an input of shape ", x.str(), "; got ", n);
  else
    FLX_CHECK(n == size_t(spatial), DimensionMismatch, name, ": expected one size per spatial dim (", spatial,
              ") of an input of shape ", x.str(), "; got ", n);
  Shape y = x;
  for (int k = 0; k < spatial; ++k) {
    if (by_scale) {
      y[k] = ops::scaled_size(o.scale[size_t(k)], x[k], name, k);
    } else {
      y[k] = o.size[size_t(k)];
      FLX_CHECK(mode != "nearest" || (x[k] > 0 && y[k] % x[k] == 0), DimensionMismatch, name, ": size ", y[k],
                " of dim ", k, " is not a whole multiple of the input's ", x[k], " (input shape ", x.str(), ")");
    }
    FLX_CHECK(x[k] > 0 || y[k] == 0, DimensionMismatch, name, ": dim ", k, " of the input (shape ", x.str(),
              ") is empty: there is nothing to upsample");
  }
  (void)detail::checked_numel(y, name);
  return y;
}

Tensor Upsample::operator()(const Tensor& x) const {
  detail::check_layer_input(*this, x);
  (void)outputsize(*this, x.shape());
  const UpsampleOptions o = expanded(options, x.ndims());
  return mode_of(options) == "nearest" ? upsample_nearest(x, o) : upsample_bilinear(x, o);
}

PixelShuffle::PixelShuffle(int64_t factor) : r(factor) {
  FLX_CHECK(factor >= 1, ArgumentError, "PixelShuffle: the upscale factor r must be >= 1; got ", factor);
}

Shape outputsize(const PixelShuffle& l, const Shape& x) {
  const std::string name = detail::layer_string(l);
  const int nd = x.ndims(), d = nd - 2;
  FLX_CHECK(d >= 1 && d <= 3, DimensionMismatch, name, ": expected an input (spatial..., channels, batch) with 1 to ",
            "3 spatial dims; got shape ", x.str());
  const int64_t rd = ops::upscale_channels(l.r, d, name);
  FLX_CHECK(x[d] % rd == 0, DimensionMismatch, name, ": expected channels (dim ", d, ") a multiple of r^", d, " = ",
            rd, "; got ", x[d], " in an input of shape ", x.str());
  Shape y = x;
  for (int k = 0; k < d; ++k)
    y[k] = detail::checked_mul(x[k], l.r, name, ": dim ", k, " of shape ", x.str(), " times r = ", l.r);
  y[d] = x[d] / rd;
  return y;
}

Tensor PixelShuffle::operator()(const Tensor& x) const {
  detail::check_layer_input(*this, x);
  (void)outputsize(*this, x.shape());
  return pixel_shuffle(x, r);
}

void show_compact(std::ostream& os, const Upsample& l) {
  os << "Upsample(:" << mode_of(l.options);
  if (!l.options.scale.empty()) {
    os << ", scale = ";
    show_values(os, l.options.scale);
  }
  if (!l.options.size.empty()) {
    os << ", size = ";
    show_values(os, l.options.size);
  }
  if (!l.options.align_corners && mode_of(l.options) != "nearest") os << ", align_corners = false";
  os << ")";
}

void show_compact(std::ostream& os, const PixelShuffle& l) { os << "PixelShuffle(" << l.r << ")"; }

}  // namespace flx

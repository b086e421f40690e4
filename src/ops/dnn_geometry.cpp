// Options of convolutions and pools (PerDim, Padding) resolved to one value
// per spatial dim and side, as NNlib's DenseConvDims / PoolDims do.
#include <string>

#include "dnn_internal.hpp"

namespace flx {

std::vector<int64_t> PerDim::expand(int n, const char* what, const char* layer, int64_t min) const {
  FLX_CHECK(values.size() == 1 || values.size() == size_t(n), ArgumentError, layer, ": ", what,
            " takes one value or one per spatial dim (", n, "); got ", values.size());
  std::vector<int64_t> out(size_t(n), values[0]);
  if (values.size() == size_t(n)) out = values;
  for (int64_t v : out)
    FLX_CHECK(v >= min, ArgumentError, layer, ": ", what, " must be at least ", min, "; got ", v);
  return out;
}

namespace ops {

void resolve_padding(const Padding& p, WindowGeometry& g, const char* layer) {
  const size_t n = size_t(g.nspatial);
  g.pad_lo.assign(n, 0);
  g.pad_hi.assign(n, 0);
  if (p.same) {
    // SamePad: the dilated kernel's extent less one, its larger half first
    // (Flux's calc_padding); the stride does not enter.
    for (size_t i = 0; i < n; ++i) {
      const int64_t total = (g.kernel[i] - 1) * g.dilation[i];
      g.pad_lo[i] = (total + 1) / 2;
      g.pad_hi[i] = total / 2;
    }
    return;
  }
  const auto& v = p.values;
  FLX_CHECK(v.size() == 1 || v.size() == n || v.size() == 2 * n, ArgumentError, layer,
            ": pad takes one value, one per spatial dim (", n, ") or two per spatial dim (", 2 * n,
            ", low then high side of each); got ", v.size());
  for (size_t i = 0; i < n; ++i) {
    g.pad_lo[i] = v.size() == 1 ? v[0] : v.size() == n ? v[i] : v[2 * i];
    g.pad_hi[i] = v.size() == 1 ? v[0] : v.size() == n ? v[i] : v[2 * i + 1];
    FLX_CHECK(g.pad_lo[i] >= 0 && g.pad_hi[i] >= 0, ArgumentError, layer, ": padding must not be negative; got ",
              g.pad_lo[i], " and ", g.pad_hi[i], " for spatial dim ", i + 1);
  }
}

std::vector<int64_t> output_sizes(const WindowGeometry& g, const Shape& in, const char* layer, const char* what) {
  std::vector<int64_t> out(size_t(g.nspatial));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t extent = g.dilation[i] * (g.kernel[i] - 1) + 1, padded = in[int(i)] + g.pad_lo[i] + g.pad_hi[i];
    FLX_CHECK(padded >= extent, DimensionMismatch, layer, ": the input of shape ", in, " is smaller than the ", what,
              " in spatial dim ", i + 1, " (", in[int(i)], " + padding ", g.pad_lo[i] + g.pad_hi[i], " < ", extent,
              "); use a larger input, padding or a smaller ", what);
    out[i] = (padded - extent) / g.stride[i] + 1;
  }
  return out;
}

}  // namespace ops

WindowGeometry conv_geometry(const std::vector<int64_t>& kernel, const ConvOptions& o, const char* layer) {
  const int n = int(kernel.size());
  FLX_CHECK(n >= 1 && n <= FLX_DNN_MAX_SPATIAL, ArgumentError, layer, ": the kernel has ", n,
            " spatial dims; flx convolves over 1 to ", FLX_DNN_MAX_SPATIAL);
  WindowGeometry g;
  g.nspatial = n;
  g.kernel = kernel;
  for (int64_t k : kernel) FLX_CHECK(k >= 1, ArgumentError, layer, ": kernel sizes must be positive; got ", k);
  g.stride = o.stride.expand(n, "stride", layer, 1);
  g.dilation = o.dilation.expand(n, "dilation", layer, 1);
  ops::resolve_padding(o.pad, g, layer);
  return g;
}

}  // namespace flx

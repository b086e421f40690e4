// Options of convolutions and pools (PerDim, Padding) resolved to one value
// per spatial dim and side, as NNlib's DenseConvDims / PoolDims do.
#include <cstdint>
#include <limits>
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

void resolve_padding(const Padding& p, WindowGeometry& g, const char* layer, bool transposed) {
  const size_t n = size_t(g.nspatial);
  g.pad_lo.assign(n, 0);
  g.pad_hi.assign(n, 0);
  if (p.same) {
    // SamePad: the dilated kernel's extent less one, its larger half first
    // (Flux's calc_padding); the stride does not enter. A transposed
    // convolution pads (kernel - stride) × dilation instead (Flux's
    // calc_padding(ConvTranspose, ...)), so that its output is the input
    // times the stride.
    for (size_t i = 0; i < n; ++i) {
      FLX_CHECK(!transposed || g.kernel[i] >= g.stride[i], ArgumentError, layer,
                ": SamePad() pads a transposed convolution by (kernel - stride) × dilation, which needs a kernel at "
                "least the stride; got kernel ", g.kernel[i], " and stride ", g.stride[i], " in dim ", i,
                "; give .pad explicitly (0), or a kernel of at least ", g.stride[i]);
      // (kernel - 1) × dilation fits: conv_geometry checked the extent.
      const int64_t total = (g.kernel[i] - (transposed ? g.stride[i] : 1)) * g.dilation[i];
      g.pad_lo[i] = total - total / 2;
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
              g.pad_lo[i], " and ", g.pad_hi[i], " for dim ", i);
    int64_t total = 0;
    FLX_CHECK(!__builtin_add_overflow(g.pad_lo[i], g.pad_hi[i], &total), ArgumentError, layer, ": padding ",
              g.pad_lo[i], " and ", g.pad_hi[i], " in dim ", i, " add up past the largest int64 (",
              std::numeric_limits<int64_t>::max(), "); use a padding smaller than the input");
  }
}

std::vector<int64_t> output_sizes(const WindowGeometry& g, const Shape& in, const char* layer, const char* what) {
  std::vector<int64_t> out(size_t(g.nspatial));
  for (size_t i = 0; i < out.size(); ++i) {
    // The extent fits (conv_geometry checked it; a pool's is its window);
    // the padded input may not.
    const int64_t extent = g.dilation[i] * (g.kernel[i] - 1) + 1;
    int64_t padded = 0;
    FLX_CHECK(!__builtin_add_overflow(in[int(i)], g.pad_lo[i], &padded) &&
                  !__builtin_add_overflow(padded, g.pad_hi[i], &padded),
              ArgumentError, layer, ": the input of shape ", in, " with padding ", g.pad_lo[i], " and ", g.pad_hi[i],
              " in dim ", i, " is larger than the largest int64 (", std::numeric_limits<int64_t>::max(),
              "); use a smaller padding");
    FLX_CHECK(padded >= extent, DimensionMismatch, layer, ": the input of shape ", in, " is smaller than the ", what,
              " in dim ", i, " (", in[int(i)], " + padding ", g.pad_lo[i] + g.pad_hi[i], " < ", extent,
              "); use a larger input, padding or a smaller ", what);
    out[i] = (padded - extent) / g.stride[i] + 1;
  }
  return out;
}

}  // namespace ops

WindowGeometry conv_geometry(const std::vector<int64_t>& kernel, const ConvOptions& o, const char* layer,
                             bool transposed) {
  const int n = int(kernel.size());
  FLX_CHECK(n >= 1 && n <= FLX_DNN_MAX_SPATIAL, ArgumentError, layer, ": the kernel has ", n,
            " spatial dims; flx convolves over 1 to ", FLX_DNN_MAX_SPATIAL);
  WindowGeometry g;
  g.nspatial = n;
  g.kernel = kernel;
  for (int64_t k : kernel) FLX_CHECK(k >= 1, ArgumentError, layer, ": kernel sizes must be positive; got ", k);
  g.stride = o.stride.expand(n, "stride", layer, 1);
  g.dilation = o.dilation.expand(n, "dilation", layer, 1);
  // The dilated kernel's extent, (kernel - 1) × dilation + 1, in int64:
  // every size computed from the geometry starts from it.
  for (size_t i = 0; i < size_t(n); ++i) {
    int64_t span = 0;
    FLX_CHECK(!__builtin_mul_overflow(kernel[i] - 1, g.dilation[i], &span) && span < std::numeric_limits<int64_t>::max(),
              ArgumentError, layer, ": dilation ", g.dilation[i], " with a kernel of ", kernel[i], " in dim ", i,
              " spans past the largest int64 (", std::numeric_limits<int64_t>::max(),
              "); use a dilation below the input's size");
  }
  ops::resolve_padding(o.pad, g, layer, transposed);
  return g;
}

}  // namespace flx

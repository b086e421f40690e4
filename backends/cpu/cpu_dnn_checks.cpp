// The dnn table's descriptors, checked before anything runs: every bad
// field is an FLX_ERR_INVALID_ARGUMENT whose message names the call, what
// was expected, what was found and what to do.
#include <sstream>

#include "cpu_dnn.hpp"

namespace flx::cpu_backend {
namespace {

constexpr const char* kFix = "; the descriptor must be filled as include/flx/backend.h says (libflx's ops do)";

template <class... A>
int invalid(const char* call, const A&... parts) {
  std::ostringstream os;
  os << call << ": ";
  (os << ... << parts);
  os << kFix;
  return fail(FLX_ERR_INVALID_ARGUMENT, os.str());
}

const char* dim_name(int i) { return i == 0 ? "dim 0 (W)" : i == 1 ? "dim 1 (H)" : "dim 2 (D)"; }

// Sizes, windows and the output-size rule of backend.h for spatial dim i.
int check_window(const char* call, const char* window_name, int i, const DnnGeometry& g) {
  const char* dim = dim_name(i);
  if (g.in[i] < 1) return invalid(call, "in_size of ", dim, " is ", g.in[i], ", expected >= 1");
  if (g.kernel[i] < 1) return invalid(call, window_name, " of ", dim, " is ", g.kernel[i], ", expected >= 1");
  if (g.stride[i] < 1) return invalid(call, "stride of ", dim, " is ", g.stride[i], ", expected >= 1");
  if (g.dilation[i] < 1) return invalid(call, "dilation of ", dim, " is ", g.dilation[i], ", expected >= 1");
  if (g.pad_lo[i] < 0 || g.pad_hi[i] < 0)
    return invalid(call, "padding of ", dim, " is (", g.pad_lo[i], ", ", g.pad_hi[i], "), expected >= 0 on both sides");
  const int64_t span = g.in[i] + g.pad_lo[i] + g.pad_hi[i] - g.dilation[i] * (g.kernel[i] - 1) - 1;
  if (span < 0)
    return invalid(call, "the ", window_name, " of ", dim, " (", g.kernel[i], ", dilation ", g.dilation[i],
                   ") is larger than the padded input (", g.in[i], " + ", g.pad_lo[i], " + ", g.pad_hi[i],
                   "), expected a window that fits");
  const int64_t out = span / g.stride[i] + 1;
  if (g.out[i] != out)
    return invalid(call, "out_size of ", dim, " is ", g.out[i], ", expected ", out,
                   " = (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) / stride + 1 for in ", g.in[i], ", pads ",
                   g.pad_lo[i], " and ", g.pad_hi[i], ", kernel ", g.kernel[i], ", dilation ", g.dilation[i],
                   ", stride ", g.stride[i]);
  return FLX_OK;
}

int check_nspatial(const char* call, int32_t nspatial) {
  if (nspatial < 1 || nspatial > FLX_DNN_MAX_SPATIAL)
    return invalid(call, "nspatial is ", nspatial, ", expected 1 to ", FLX_DNN_MAX_SPATIAL,
                   " (1-D, 2-D or 3-D windows)");
  return FLX_OK;
}

}  // namespace

int check_dnn_dtype(const char* call, int32_t dtype) {
  if (dtype == FLX_F32 || dtype == FLX_F64 || is_half_dtype(dtype)) return FLX_OK;
  return invalid(call, "dtype is ", dtype, ", expected a floating-point type (Float32, Float64, Float16 or BFloat16)");
}

int need_buffer(const char* call, const char* what, flx_mem m) {
  if (m.buf) return FLX_OK;
  return invalid(call, what, " has no buffer, expected the tensor's memory");
}

int conv_geometry(const char* call, const flx_conv_desc* d, DnnGeometry* g) {
  if (!d) return invalid(call, "the descriptor is a null pointer");
  if (d->struct_size < sizeof(flx_conv_desc))
    return invalid(call, "struct_size is ", d->struct_size,
                   ", expected at least sizeof(flx_conv_desc) = ", sizeof(flx_conv_desc));
  if (int st = check_nspatial(call, d->nspatial)) return st;
  if (d->groups < 1) return invalid(call, "groups is ", d->groups, ", expected >= 1");
  if (d->batch < 1 || d->in_channels < 1 || d->out_channels < 1)
    return invalid(call, "batch, in_channels and out_channels are ", d->batch, ", ", d->in_channels, " and ",
                   d->out_channels, ", expected >= 1 each");
  if (d->in_channels % d->groups || d->out_channels % d->groups)
    return invalid(call, "in_channels (", d->in_channels, ") and out_channels (", d->out_channels,
                   ") must both be multiples of groups (", d->groups, ")");
  *g = DnnGeometry{};
  g->nspatial = d->nspatial;
  g->batch = d->batch;
  g->cin = d->in_channels;
  g->cout = d->out_channels;
  g->groups = d->groups;
  for (int i = 0; i < d->nspatial; ++i) {
    g->in[i] = d->in_size[i];
    g->out[i] = d->out_size[i];
    g->kernel[i] = d->kernel[i];
    g->stride[i] = d->stride[i];
    g->dilation[i] = d->dilation[i];
    g->pad_lo[i] = d->pad_lo[i];
    g->pad_hi[i] = d->pad_hi[i];
    if (int st = check_window(call, "kernel", i, *g)) return st;
  }
  return check_dnn_dtype(call, d->dtype);
}

int pool_geometry(const char* call, const flx_pool_desc* d, DnnGeometry* g) {
  if (!d) return invalid(call, "the descriptor is a null pointer");
  if (d->struct_size < sizeof(flx_pool_desc))
    return invalid(call, "struct_size is ", d->struct_size,
                   ", expected at least sizeof(flx_pool_desc) = ", sizeof(flx_pool_desc));
  if (int st = check_nspatial(call, d->nspatial)) return st;
  if (d->mode != FLX_POOL_MAX && d->mode != FLX_POOL_MEAN)
    return invalid(call, "mode is ", d->mode, ", expected FLX_POOL_MAX (0) or FLX_POOL_MEAN (1)");
  if (d->batch < 1 || d->channels < 1)
    return invalid(call, "batch and channels are ", d->batch, " and ", d->channels, ", expected >= 1 each");
  *g = DnnGeometry{};
  g->nspatial = d->nspatial;
  g->batch = d->batch;
  g->cin = g->cout = d->channels;
  for (int i = 0; i < d->nspatial; ++i) {
    g->in[i] = d->in_size[i];
    g->out[i] = d->out_size[i];
    g->kernel[i] = d->window[i];
    g->stride[i] = d->stride[i];
    g->pad_lo[i] = d->pad_lo[i];
    g->pad_hi[i] = d->pad_hi[i];
    if (int st = check_window(call, "window", i, *g)) return st;
  }
  return check_dnn_dtype(call, d->dtype);
}

int check_batchnorm(const char* call, const flx_batchnorm_desc* d) {
  if (!d) return invalid(call, "the descriptor is a null pointer");
  if (d->struct_size < sizeof(flx_batchnorm_desc))
    return invalid(call, "struct_size is ", d->struct_size,
                   ", expected at least sizeof(flx_batchnorm_desc) = ", sizeof(flx_batchnorm_desc));
  if (d->spatial < 1 || d->channels < 1 || d->batch < 1)
    return invalid(call, "spatial, channels and batch are ", d->spatial, ", ", d->channels, " and ", d->batch,
                   ", expected >= 1 each");
  if (!(d->epsilon > 0)) return invalid(call, "epsilon is ", d->epsilon, ", expected > 0");
  if (int st = check_dnn_dtype(call, d->dtype)) return st;
  const int32_t want = is_half_dtype(d->dtype) ? FLX_F32 : d->dtype;
  if (d->param_dtype != want)
    return invalid(call, "param_dtype is ", d->param_dtype, " for data of dtype ", d->dtype, ", expected ", want,
                   " (the statistics, scale and bias: the data's type for Float32 and Float64, Float32 for halves)");
  return FLX_OK;
}

}  // namespace flx::cpu_backend

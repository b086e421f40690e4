// Pooling and batch normalisation of the dnn table (backend.h) on cuDNN 9's
// legacy API (cuda_dnn_conv.cpp says why that API).
//
// Pooling: mean pooling is cuDNN's CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
// (divides by the full window) where cuDNN can say it: both sides of every
// dim padded alike and less padding than the window. Max pooling always
// runs on the plugin's own kernels (dnn_pool_direct), which compile the
// window rule of flx/backend_window.h that every backend shares: on an H100
// (2026-11-27, tests/test_window_rules.cpp) CUDNN_POOLING_MAX_DETERMINISTIC
// differed from it in three ways: the maximum of -0 and 0 came out +0, a
// NaN took the window's gradient, and a window of -Inf and padding came out
// -FLT_MAX (cuDNN's starting value) with no gradient. So do mean pooling's
// cases cuDNN cannot say (Flux's SamePad with an even window, a window
// wholly in padding): per-side padding needs no scratch memory there, so
// pooling has no workspace and no reserve (pool_reserve_size is not set:
// cuDNN's backward takes x, y and dy, which the ABI passes).
//
// Batch norm: CUDNN_BATCHNORM_SPATIAL over x as N x C x spatial x 1 (the
// ABI's (spatial, C, N) is row-major NCHW with H * W = spatial). cuDNN's
// running statistics are Flux's: exponentialAverageFactor is the weight of
// the batch's statistics (running = (1 - factor) running + factor batch),
// so it is the ABI's momentum, and the running variance takes the unbiased
// batch variance (m / (m - 1)), as backend.h asks; its saved mean and
// inverse standard deviation, 1 / sqrt(var + epsilon) of the biased
// variance, are the ABI's saved_mean and saved_invstd exactly. One element
// per channel (m = 1) would divide by zero in cuDNN's m / (m - 1): there
// cuDNN runs without running statistics and dnn_bn_running_single moves
// them as backend.h says. A layer without scale or bias gets a ones / zeros
// buffer of the plugin's (cuDNN needs both), and unwanted dscale / dbias
// go to a sink buffer.
#include <algorithm>
#include <cmath>

#include "cuda_dnn_common.hpp"

namespace flx_cuda {
namespace {

struct PoolGeometry {
  int nsp = 0;
  int64_t in[3], out[3], window[3], stride[3], lo[3], hi[3];
  bool cudnn = true;  // cuDNN can say it (see the top of the file)
};

int validate_pool(const flx_pool_desc* d, const char* what, PoolGeometry* g) {
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor is NULL");
  if (!FLX_DESC_HAS(d, flx_pool_desc, reserve_bytes))
    return dnn_invalid(what, "struct_size", d->struct_size,
                       "expected at least " + std::to_string(sizeof(flx_pool_desc)) + " (flx_pool_desc of ABI 2.5)");
  if (dnn_dtype_bytes(d->dtype) == 0)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": the CUDA backend pools Float32, Float64, Float16 and "
                                                         "BFloat16, not " + dtype_name(d->dtype));
  if (d->mode != FLX_POOL_MAX && d->mode != FLX_POOL_MEAN)
    return dnn_invalid(what, "mode", d->mode, "expected FLX_POOL_MAX (0) or FLX_POOL_MEAN (1)");
  if (d->nspatial < 1 || d->nspatial > FLX_DNN_MAX_SPATIAL)
    return dnn_invalid(what, "nspatial", d->nspatial, "expected 1, 2 or 3 spatial dims");
  if (d->batch < 0) return dnn_invalid(what, "batch", d->batch, "expected 0 or more");
  if (d->channels < 1) return dnn_invalid(what, "channels", d->channels, "expected 1 or more");
  g->nsp = d->nspatial;
  for (int i = 0; i < 3; ++i) {
    const bool used = i < d->nspatial;
    g->in[i] = used ? d->in_size[i] : 1;
    g->out[i] = used ? d->out_size[i] : 1;
    g->window[i] = used ? d->window[i] : 1;
    g->stride[i] = used ? d->stride[i] : 1;
    g->lo[i] = used ? d->pad_lo[i] : 0;
    g->hi[i] = used ? d->pad_hi[i] : 0;
    if (!used) continue;
    const std::string dim = "[" + std::to_string(i) + "]";
    if (g->in[i] < 1) return dnn_invalid(what, "in_size" + dim, g->in[i], "expected 1 or more");
    if (g->window[i] < 1) return dnn_invalid(what, "window" + dim, g->window[i], "expected 1 or more");
    if (g->stride[i] < 1) return dnn_invalid(what, "stride" + dim, g->stride[i], "expected 1 or more");
    if (g->lo[i] < 0 || g->hi[i] < 0)
      return dnn_invalid(what, (g->lo[i] < 0 ? "pad_lo" : "pad_hi") + dim, std::min(g->lo[i], g->hi[i]),
                         "expected 0 or more");
    const int64_t span = g->in[i] + g->lo[i] + g->hi[i] - g->window[i];
    const int64_t expect = span < 0 ? 0 : span / g->stride[i] + 1;
    if (g->out[i] != expect || expect < 1)
      return dnn_invalid(what, "out_size" + dim, g->out[i],
                         "expected (in + pad_lo + pad_hi - window) / stride + 1 = " + std::to_string(expect) +
                             " (must be 1 or more) for in " + std::to_string(g->in[i]) + ", pads " +
                             std::to_string(g->lo[i]) + "/" + std::to_string(g->hi[i]) + ", window " +
                             std::to_string(g->window[i]) + ", stride " + std::to_string(g->stride[i]));
    if (g->lo[i] != g->hi[i] || g->lo[i] >= g->window[i]) g->cudnn = false;
  }
  const int64_t nc = d->batch * d->channels;
  // cuDNN's descriptors hold ints; the plugin's kernels index in int64.
  if (!fits_int(nc * g->in[0] * g->in[1] * g->in[2]) || !fits_int(nc * g->out[0] * g->out[1] * g->out[2]) ||
      !fits_int(d->batch))
    g->cudnn = false;
  return FLX_OK;
}

DnnPoolGeom direct_geometry(const flx_pool_desc* d, const PoolGeometry& g) {
  DnnPoolGeom k{};
  k.in = dnn_box(g.in, g.nsp, d->batch * d->channels);
  k.out = dnn_box(g.out, g.nsp, d->batch * d->channels);
  for (int i = 0; i < 3; ++i) k.window[i] = g.window[i], k.stride[i] = g.stride[i], k.lo[i] = g.lo[i];
  k.max = d->mode == FLX_POOL_MAX;
  return k;
}

// cuDNN's descriptors of the pooling and of x and y.
struct PoolDescs {
  PoolDesc pool;
  TensorDesc x, y;
};

int pool_descs(const CudnnApi& api, const flx_pool_desc* d, const PoolGeometry& g, const char* what, PoolDescs* p) {
  cudnnDataType_t type;
  cudnn_dtype(d->dtype, &type);
  std::vector<int> xd{int(d->batch), int(d->channels)}, yd{int(d->batch), int(d->channels)};
  for (int v : cudnn_spatial(g.in, g.nsp, 1)) xd.push_back(v);
  for (int v : cudnn_spatial(g.out, g.nsp, 1)) yd.push_back(v);
  if (int e = set_packed_tensor(api, p->x, type, xd, "x")) return e;
  if (int e = set_packed_tensor(api, p->y, type, yd, "y")) return e;
  if (int e = p->pool.create(api, "cudnnCreatePoolingDescriptor")) return e;
  const std::vector<int> win = cudnn_spatial(g.window, g.nsp, 1), pad = cudnn_spatial(g.lo, g.nsp, 0),
                         stride = cudnn_spatial(g.stride, g.nsp, 1);
  const cudnnPoolingMode_t mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;  // max pooling never comes here
  if (cudnnStatus_t s = api.set_pool_nd(p->pool.get(), mode, CUDNN_PROPAGATE_NAN, int(win.size()), win.data(),
                                        pad.data(), stride.data());
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnSetPoolingNdDescriptor");
  // cuDNN's output size must be the ABI's (a mismatch is a bug of the mapping).
  std::vector<int> od(yd.size());
  if (cudnnStatus_t s = api.pool_output_dim(p->pool.get(), p->x.get(), int(od.size()), od.data());
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnGetPoolingNdForwardOutputDim");
  if (od != yd)
    return fail(FLX_ERR_DEVICE, std::string(what) + ": cuDNN computes another output shape than the descriptor's "
                                                    "(a bug of the CUDA plugin's descriptor mapping; please report)");
  return FLX_OK;
}

const char* pool_name(const flx_pool_desc* d, bool backward) {
  if (!d || d->mode == FLX_POOL_MAX) return backward ? "maxpool (gradient)" : "maxpool";
  return backward ? "meanpool (gradient)" : "meanpool";
}

int pool_any(int dev, const flx_pool_desc* d, flx_stream s, bool backward) {
  const char* what = pool_name(d, backward);
  PoolGeometry g;
  if (int e = validate_pool(d, what, &g)) return e;
  if (d->mode == FLX_POOL_MAX) g.cudnn = false;  // the shared window rule (see the top of the file)
  DnnCall c;
  if (g.cudnn) {
    if (int e = dnn_begin(dev, s, what, &c)) return e;
  } else if (int e = enter(dev, s, &c.stream, what)) {  // cuDNN is not needed
    return e;
  }
  const size_t eb = dnn_dtype_bytes(d->dtype);
  const int64_t nx = d->batch * d->channels * g.in[0] * g.in[1] * g.in[2];
  const int64_t ny = d->batch * d->channels * g.out[0] * g.out[1] * g.out[2];
  if (int e = dnn_operand(dev, d->x, nx, eb, what, "x")) return e;
  if (int e = dnn_operand(dev, d->y, ny, eb, what, "y")) return e;
  if (backward) {
    if (int e = dnn_operand(dev, d->dy, ny, eb, what, "dy")) return e;
    if (int e = dnn_operand(dev, d->dx, nx, eb, what, "dx")) return e;
  }
  if (d->batch == 0) return FLX_OK;
  if (!g.cudnn) {
    const DnnPoolGeom k = direct_geometry(d, g);
    return backward ? dnn_pool_direct_backward(c.stream, d->dtype, k, addr(d->x), addr(d->dy), addr(d->dx))
                    : dnn_pool_direct(c.stream, d->dtype, k, addr(d->x), addr(d->y));
  }
  PoolDescs p;
  if (int e = pool_descs(*c.api, d, g, what, &p)) return e;
  const Blend blend;
  cudnnStatus_t r;
  if (!backward)
    r = c.api->pool_forward(c.handle, p.pool.get(), blend.one(d->dtype), p.x.get(), addr(d->x), blend.zero(d->dtype),
                            p.y.get(), addr(d->y));
  else
    r = c.api->pool_backward(c.handle, p.pool.get(), blend.one(d->dtype), p.y.get(), addr(d->y), p.y.get(),
                             addr(d->dy), p.x.get(), addr(d->x), blend.zero(d->dtype), p.x.get(), addr(d->dx));
  if (r != CUDNN_STATUS_SUCCESS)
    return cudnn_fail_for(*c.api, r, std::string(what) + (backward ? ": cudnnPoolingBackward" : ": cudnnPoolingForward"),
                          d->dtype);
  return FLX_OK;
}

// ---- batch normalisation ----------------------------------------------------

int validate_bn(const flx_batchnorm_desc* d, const char* what, bool backward) {
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor is NULL");
  if (!FLX_DESC_HAS(d, flx_batchnorm_desc, dbias))
    return dnn_invalid(what, "struct_size", d->struct_size,
                       "expected at least " + std::to_string(sizeof(flx_batchnorm_desc)) +
                           " (flx_batchnorm_desc of ABI 2.5)");
  if (dnn_dtype_bytes(d->dtype) == 0)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": the CUDA backend normalises Float32, Float64, Float16 "
                                                         "and BFloat16, not " + dtype_name(d->dtype));
  const int32_t want = d->dtype == FLX_F64 ? FLX_F64 : FLX_F32;
  if (d->param_dtype != want)
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": param_dtype is " + dtype_name(d->param_dtype) +
                                              ", expected " + dtype_name(want) + " for " +
                                              dtype_name(d->dtype) + " data (cuDNN's rule, backend.h)");
  if (d->training != 0 && d->training != 1) return dnn_invalid(what, "training", d->training, "expected 0 or 1");
  if (d->spatial < 1) return dnn_invalid(what, "spatial", d->spatial, "expected 1 or more");
  if (d->channels < 1) return dnn_invalid(what, "channels", d->channels, "expected 1 or more");
  if (d->batch < 0) return dnn_invalid(what, "batch", d->batch, "expected 0 or more");
  if ((d->training || backward) && d->batch == 0)
    return dnn_invalid(what, "batch", 0, "a training batch norm needs at least one sample for its statistics");
  if (!(d->epsilon >= CUDNN_BN_MIN_EPSILON) || !std::isfinite(d->epsilon))
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": epsilon " + std::to_string(d->epsilon) +
                                         " is less than cuDNN's least (CUDNN_BN_MIN_EPSILON = " +
                                         std::to_string(CUDNN_BN_MIN_EPSILON) + ") or not finite");
  if (d->training && d->running_mean.buf && !(d->momentum >= 0 && d->momentum <= 1))
    return fail(FLX_ERR_INVALID_ARGUMENT,
                std::string(what) + ": momentum " + std::to_string(d->momentum) + " is outside [0, 1]");
  if (!fits_int(d->batch) || !fits_int(d->channels) || !fits_int(d->spatial) ||
      !fits_int(d->batch * d->channels * d->spatial))
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": a tensor of " +
                                         std::to_string(d->batch * d->channels * d->spatial) +
                                         " elements is more than cuDNN takes (2^31-1); split the batch");
  if (bool(d->saved_mean.buf) != bool(d->saved_invstd.buf))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": saved_mean and saved_invstd are set together or "
                                                              "not at all (cuDNN's rule)");
  return FLX_OK;
}

struct BnDescs {
  TensorDesc x, p;  // x: N x C x spatial x 1; p: 1 x C x 1 x 1 of the param dtype
};

int bn_descs(const CudnnApi& api, const flx_batchnorm_desc* d, const char* what, BnDescs* b) {
  cudnnDataType_t type;
  cudnn_dtype(d->dtype, &type);
  if (int e = set_packed_tensor(api, b->x, type, {int(d->batch), int(d->channels), int(d->spatial), 1}, "x")) return e;
  if (int e = b->p.create(api, "cudnnCreateTensorDescriptor")) return e;
  if (cudnnStatus_t s = api.derive_bn(b->p.get(), b->x.get(), CUDNN_BATCHNORM_SPATIAL); s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnDeriveBNTensorDescriptor");
  return FLX_OK;
}

// scale and bias, or the plugin's ones and zeros where they are not set.
int bn_affine(int dev, const flx_batchnorm_desc* d, const char* what, void** scale, void** bias) {
  const size_t pb = d->param_dtype == FLX_F64 ? 8 : 4;
  if (d->scale.buf) {
    if (int e = dnn_operand(dev, d->scale, d->channels, pb, what, "scale")) return e;
    *scale = addr(d->scale);
  } else if (int e = dnn_constant_buffer(dev, d->param_dtype, d->channels, DnnConstant::ONES, scale)) {
    return e;
  }
  if (!bias) return FLX_OK;
  if (d->bias.buf) {
    if (int e = dnn_operand(dev, d->bias, d->channels, pb, what, "bias")) return e;
    *bias = addr(d->bias);
  } else if (int e = dnn_constant_buffer(dev, d->param_dtype, d->channels, DnnConstant::ZEROS, bias)) {
    return e;
  }
  return FLX_OK;
}

}  // namespace

int pool_forward(void*, int dev, const flx_pool_desc* d, flx_stream s) { return pool_any(dev, d, s, false); }
int pool_backward(void*, int dev, const flx_pool_desc* d, flx_stream s) { return pool_any(dev, d, s, true); }

int batchnorm_forward(void*, int dev, const flx_batchnorm_desc* d, flx_stream s) {
  const char* what = "batchnorm";
  if (int e = validate_bn(d, what, false)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, s, what, &c)) return e;
  const size_t eb = dnn_dtype_bytes(d->dtype), pb = d->param_dtype == FLX_F64 ? 8 : 4;
  const int64_t n = d->batch * d->channels * d->spatial;
  if (int e = dnn_operand(dev, d->x, n, eb, what, "x")) return e;
  if (int e = dnn_operand(dev, d->y, n, eb, what, "y")) return e;
  const bool running = d->running_mean.buf || d->running_var.buf;
  if (running || !d->training) {  // inference reads them; training moves them when set
    if (int e = dnn_operand(dev, d->running_mean, d->channels, pb, what, "running_mean")) return e;
    if (int e = dnn_operand(dev, d->running_var, d->channels, pb, what, "running_var")) return e;
  }
  if (d->training && d->saved_mean.buf) {
    if (int e = dnn_operand(dev, d->saved_mean, d->channels, pb, what, "saved_mean")) return e;
    if (int e = dnn_operand(dev, d->saved_invstd, d->channels, pb, what, "saved_invstd")) return e;
  }
  void *scale = nullptr, *bias = nullptr;
  if (int e = bn_affine(dev, d, what, &scale, &bias)) return e;
  if (n == 0) return FLX_OK;
  BnDescs b;
  if (int e = bn_descs(*c.api, d, what, &b)) return e;
  const Blend blend;
  const void* one = blend.one(d->dtype);
  const void* zero = blend.zero(d->dtype);
  cudnnStatus_t r;
  if (!d->training) {
    r = c.api->bn_forward_inference(c.handle, CUDNN_BATCHNORM_SPATIAL, one, zero, b.x.get(), addr(d->x), b.x.get(),
                                    addr(d->y), b.p.get(), scale, bias, addr(d->running_mean), addr(d->running_var),
                                    d->epsilon);
    return r == CUDNN_STATUS_SUCCESS
               ? FLX_OK
               : cudnn_fail_for(*c.api, r, "batchnorm: cudnnBatchNormalizationForwardInference", d->dtype);
  }
  const bool single = d->batch * d->spatial == 1;  // m = 1: the running statistics moved below
  const bool cudnn_running = running && !single;
  r = c.api->bn_forward_training(c.handle, CUDNN_BATCHNORM_SPATIAL, one, zero, b.x.get(), addr(d->x), b.x.get(),
                                 addr(d->y), b.p.get(), scale, bias, d->momentum,
                                 cudnn_running ? addr(d->running_mean) : nullptr,
                                 cudnn_running ? addr(d->running_var) : nullptr, d->epsilon,
                                 d->saved_mean.buf ? addr(d->saved_mean) : nullptr,
                                 d->saved_invstd.buf ? addr(d->saved_invstd) : nullptr);
  if (r != CUDNN_STATUS_SUCCESS)
    return cudnn_fail_for(*c.api, r, "batchnorm: cudnnBatchNormalizationForwardTraining", d->dtype);
  if (running && single)
    return dnn_bn_running_single(c.stream, d->dtype, d->param_dtype, d->channels, d->momentum, addr(d->x),
                                 addr(d->running_mean), addr(d->running_var));
  return FLX_OK;
}

int batchnorm_backward(void*, int dev, const flx_batchnorm_desc* d, flx_stream s) {
  const char* what = "batchnorm (gradient)";
  if (int e = validate_bn(d, what, true)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, s, what, &c)) return e;
  const size_t eb = dnn_dtype_bytes(d->dtype), pb = d->param_dtype == FLX_F64 ? 8 : 4;
  const int64_t n = d->batch * d->channels * d->spatial;
  if (int e = dnn_operand(dev, d->x, n, eb, what, "x")) return e;
  if (int e = dnn_operand(dev, d->dy, n, eb, what, "dy")) return e;
  if (int e = dnn_operand(dev, d->dx, n, eb, what, "dx")) return e;
  if (d->saved_mean.buf) {
    if (int e = dnn_operand(dev, d->saved_mean, d->channels, pb, what, "saved_mean")) return e;
    if (int e = dnn_operand(dev, d->saved_invstd, d->channels, pb, what, "saved_invstd")) return e;
  }
  void* scale = nullptr;
  if (int e = bn_affine(dev, d, what, &scale, nullptr)) return e;
  void *dscale = nullptr, *dbias = nullptr;
  if (d->dscale.buf) {
    if (int e = dnn_operand(dev, d->dscale, d->channels, pb, what, "dscale")) return e;
    dscale = addr(d->dscale);
  } else if (int e = dnn_constant_buffer(dev, d->param_dtype, d->channels, DnnConstant::SINK, &dscale)) {
    return e;
  }
  if (d->dbias.buf) {
    if (int e = dnn_operand(dev, d->dbias, d->channels, pb, what, "dbias")) return e;
    dbias = addr(d->dbias);
  } else if (int e = dnn_constant_buffer(dev, d->param_dtype, d->channels, DnnConstant::SINK, &dbias)) {
    return e;
  }
  BnDescs b;
  if (int e = bn_descs(*c.api, d, what, &b)) return e;
  const Blend blend;
  const void* one = blend.one(d->dtype);
  const void* zero = blend.zero(d->dtype);
  // Without the saved statistics cuDNN computes them again from x.
  const cudnnStatus_t r = c.api->bn_backward(
      c.handle, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, b.x.get(), addr(d->x), b.x.get(), addr(d->dy),
      b.x.get(), addr(d->dx), b.p.get(), scale, dscale, dbias, d->epsilon,
      d->saved_mean.buf ? addr(d->saved_mean) : nullptr, d->saved_invstd.buf ? addr(d->saved_invstd) : nullptr);
  return r == CUDNN_STATUS_SUCCESS
             ? FLX_OK
             : cudnn_fail_for(*c.api, r, "batchnorm (gradient): cudnnBatchNormalizationBackward", d->dtype);
}

}  // namespace flx_cuda

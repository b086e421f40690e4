// Pooling (max and mean, forward and backward) and batch normalisation
// (training and inference forward, backward) of the dnn table. Pooling
// needs no reserve: its backward finds each window's first maximum again
// from x and y (pool_reserve_size stays NULL). Batch normalisation computes
// each channel's statistics with one work-group per channel, then runs
// elementwise kernels. Both take the halves too (loaded into float, the
// statistics and parameters of batch normalisation in Float32).
#include <cmath>
#include <optional>
#include <string>

#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

// ---- pooling ---------------------------------------------------------------------
struct PoolShape {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, win[3] = {1, 1, 1}, str[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  int64_t cn = 0, P = 1, ivol = 1;  // channels * batch, output and input points per channel
  size_t es = 0;
};

PoolShape check_pool(Device& dv, const flx_pool_desc& d, bool backward) {
  const char* op = d.mode == FLX_POOL_MEAN ? "meanpool" : "maxpool";
  dnn::check_struct_size(d, op, "flx_pool_desc");
  dnn::require_dnn_dtype(dv, d.dtype, op);
  if (d.mode != FLX_POOL_MAX && d.mode != FLX_POOL_MEAN)
    raise(FLX_ERR_INVALID_ARGUMENT, "pool: mode must be 0 (FLX_POOL_MAX) or 1 (FLX_POOL_MEAN); got " +
                                        std::to_string(d.mode));
  if (d.nspatial < 1 || d.nspatial > FLX_DNN_MAX_SPATIAL)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": nspatial must be 1 to " +
                                        std::to_string(FLX_DNN_MAX_SPATIAL) + " spatial dims; got " +
                                        std::to_string(d.nspatial));
  if (d.batch < 0) raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": negative batch " + std::to_string(d.batch));
  PoolShape s;
  s.es = dtype_size(d.dtype);
  s.cn = dnn::positive(d.channels, op, "channels") * d.batch;
  for (int k = 0; k < d.nspatial; ++k) {
    const std::string dim = "[" + std::to_string(k) + "]";
    s.in[k] = dnn::positive(d.in_size[k], op, "in_size" + dim);
    s.win[k] = dnn::positive(d.window[k], op, "window" + dim);
    s.str[k] = dnn::positive(d.stride[k], op, "stride" + dim);
    if (d.pad_lo[k] < 0 || d.pad_hi[k] < 0)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": padding of dim " + std::to_string(k) +
                                          " must be >= 0; got pad_lo " + std::to_string(d.pad_lo[k]) + ", pad_hi " +
                                          std::to_string(d.pad_hi[k]));
    s.pad[k] = d.pad_lo[k];
    const int64_t span = s.in[k] + d.pad_lo[k] + d.pad_hi[k] - s.win[k];
    if (span < 0)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": in dim " + std::to_string(k) + " the window of " +
                                          std::to_string(s.win[k]) + " is wider than the padded input of " +
                                          std::to_string(s.in[k] + d.pad_lo[k] + d.pad_hi[k]));
    const int64_t expect = span / s.str[k] + 1;
    if (d.out_size[k] != expect)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": out_size" + dim + " is " + std::to_string(d.out_size[k]) +
                                          "; backend.h's rule (in + pad_lo + pad_hi - window) / stride + 1 gives " +
                                          std::to_string(expect));
    s.out[k] = expect;
  }
  s.P = s.out[0] * s.out[1] * s.out[2];
  s.ivol = s.in[0] * s.in[1] * s.in[2];
  dnn::check_operand(dv, d.x, s.cn * s.ivol, s.es, "pool x");
  dnn::check_operand(dv, d.y, s.cn * s.P, s.es, "pool y");
  if (backward) {
    dnn::check_operand(dv, d.dy, s.cn * s.P, s.es, "pool dy");
    dnn::check_operand(dv, d.dx, s.cn * s.ivol, s.es, "pool dx");
  }
  return s;
}

// ---- batch normalisation ---------------------------------------------------------
struct NormShape {
  int64_t P = 1, C = 1, N = 0, n = 0;  // spatial, channels, batch, elements
  size_t es = 0, ps = 0;               // bytes of an element, of a statistic or parameter
};

NormShape check_norm(Device& dv, const flx_batchnorm_desc& d, const char* op) {
  dnn::check_struct_size(d, op, "flx_batchnorm_desc");
  dnn::require_dnn_dtype(dv, d.dtype, op);
  const int32_t pt = is_half(d.dtype) ? FLX_F32 : d.dtype;
  if (d.param_dtype != pt)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": param_dtype of " + dtype_name(d.dtype) + " must be " +
                                        dtype_name(pt) + " (backend.h: the dtype for Float32 and Float64, Float32 "
                                        "for the halves); got " +
                                        (valid_dtype(d.param_dtype) ? dtype_name(d.param_dtype)
                                                                    : std::to_string(d.param_dtype)));
  NormShape s;
  s.es = dtype_size(d.dtype);
  s.ps = dtype_size(pt);
  s.P = dnn::positive(d.spatial, op, "spatial");
  s.C = dnn::positive(d.channels, op, "channels");
  if (d.batch < 0) raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": negative batch " + std::to_string(d.batch));
  s.N = d.batch;
  s.n = s.P * s.C * s.N;
  if (!(d.epsilon >= 0) || !std::isfinite(d.epsilon))
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": epsilon must be finite and >= 0; got " +
                                        std::to_string(d.epsilon));
  dnn::check_operand(dv, d.x, s.n, s.es, "batchnorm x");
  if (d.scale.buf) dnn::check_operand(dv, d.scale, s.C, s.ps, "batchnorm scale");
  return s;
}

void batchnorm_fwd(int dev, const flx_batchnorm_desc& d, flx_stream st) {
  const char* op = "batchnorm";
  Device& dv = device(dev);
  const NormShape s = check_norm(dv, d, op);
  if (d.training != 0 && d.training != 1)
    raise(FLX_ERR_INVALID_ARGUMENT, "batchnorm: training must be 0 or 1; got " + std::to_string(d.training));
  dnn::check_operand(dv, d.y, s.n, s.es, "batchnorm y");
  if (d.bias.buf) dnn::check_operand(dv, d.bias, s.C, s.ps, "batchnorm bias");
  const bool running = d.running_mean.buf != nullptr;
  if (running || !d.training) {
    dnn::check_operand(dv, d.running_mean, s.C, s.ps, "batchnorm running_mean");
    dnn::check_operand(dv, d.running_var, s.C, s.ps, "batchnorm running_var");
  }
  if (d.training) {
    if (s.n == 0)
      raise(FLX_ERR_INVALID_ARGUMENT, "batchnorm: training needs at least one element per channel for its "
                                      "statistics; got batch " + std::to_string(s.N));
    if (d.saved_mean.buf) dnn::check_operand(dv, d.saved_mean, s.C, s.ps, "batchnorm saved_mean");
    if (d.saved_invstd.buf) dnn::check_operand(dv, d.saved_invstd, s.C, s.ps, "batchnorm saved_invstd");
  }
  cl_command_queue q = queue_of(dv, st);
  const Scalar eps = accum_scalar(d.dtype, d.epsilon, dv.fp64), mom = accum_scalar(d.dtype, d.momentum, dv.fp64);
  flx_mem mean = d.running_mean, stat = d.running_var;
  // The statistics go to saved_mean and saved_invstd, or to temporary
  // buffers when the caller wants no backward (they are only read here).
  std::optional<TempBuffer> tmp;
  if (d.training && !(d.saved_mean.buf && d.saved_invstd.buf)) tmp.emplace(dv, 2 * size_t(s.C) * s.ps);
  if (d.training) {
    mean = d.saved_mean.buf ? d.saved_mean : flx_mem{reinterpret_cast<flx_buffer>(tmp->mem), 0};
    stat = d.saved_invstd.buf ? d.saved_invstd : flx_mem{reinterpret_cast<flx_buffer>(tmp->mem), s.C * s.ps};
    launch(dv, q, kDnnKernels, d.dtype, "bn_stats_k", dnn::per_channel_items(dv, d.dtype, "bn_stats_k", s.C),
           as_mem(d.x), cl_long(d.x.offset), cl_long(s.P), cl_long(s.C), cl_long(s.N), eps, mom, as_mem(mean),
           cl_long(mean.offset), as_mem(stat), cl_long(stat.offset), cl_int(running), as_mem(d.running_mean),
           cl_long(d.running_mean.offset), as_mem(d.running_var), cl_long(d.running_var.offset));
  }
  launch(dv, q, kDnnKernels, d.dtype, "bn_apply_k", size_t(s.n), as_mem(d.x), cl_long(d.x.offset), as_mem(d.y),
         cl_long(d.y.offset), cl_long(s.P), cl_long(s.C), cl_long(s.n), as_mem(mean), cl_long(mean.offset),
         as_mem(stat), cl_long(stat.offset), cl_int(!d.training), eps, as_mem(d.scale), cl_long(d.scale.offset),
         cl_int(d.scale.buf != nullptr), as_mem(d.bias), cl_long(d.bias.offset), cl_int(d.bias.buf != nullptr));
}

void batchnorm_bwd(int dev, const flx_batchnorm_desc& d, flx_stream st) {
  const char* op = "batchnorm (gradient)";
  Device& dv = device(dev);
  const NormShape s = check_norm(dv, d, op);
  dnn::check_operand(dv, d.dy, s.n, s.es, "batchnorm dy");
  dnn::check_operand(dv, d.dx, s.n, s.es, "batchnorm dx");
  dnn::check_operand(dv, d.saved_mean, s.C, s.ps, "batchnorm saved_mean (from the training forward)");
  dnn::check_operand(dv, d.saved_invstd, s.C, s.ps, "batchnorm saved_invstd (from the training forward)");
  if (d.dscale.buf) dnn::check_operand(dv, d.dscale, s.C, s.ps, "batchnorm dscale");
  if (d.dbias.buf) dnn::check_operand(dv, d.dbias, s.C, s.ps, "batchnorm dbias");
  cl_command_queue q = queue_of(dv, st);
  const size_t at = dv.fp64 ? 8 : 4;  // the kernels' accumulator AT
  TempBuffer sums(dv, 2 * size_t(s.C) * at);
  launch(dv, q, kDnnKernels, d.dtype, "bn_bwd_sums_k", dnn::per_channel_items(dv, d.dtype, "bn_bwd_sums_k", s.C),
         as_mem(d.x), cl_long(d.x.offset), as_mem(d.dy), cl_long(d.dy.offset), cl_long(s.P), cl_long(s.C),
         cl_long(s.N), as_mem(d.saved_mean), cl_long(d.saved_mean.offset), as_mem(d.saved_invstd),
         cl_long(d.saved_invstd.offset), sums.mem, as_mem(d.dscale), cl_long(d.dscale.offset),
         cl_int(d.dscale.buf != nullptr), as_mem(d.dbias), cl_long(d.dbias.offset), cl_int(d.dbias.buf != nullptr));
  launch(dv, q, kDnnKernels, d.dtype, "bn_bwd_dx_k", size_t(s.n), as_mem(d.x), cl_long(d.x.offset), as_mem(d.dy),
         cl_long(d.dy.offset), as_mem(d.dx), cl_long(d.dx.offset), cl_long(s.P), cl_long(s.C), cl_long(s.n),
         cl_long(s.P * s.N), as_mem(d.saved_mean), cl_long(d.saved_mean.offset), as_mem(d.saved_invstd),
         cl_long(d.saved_invstd.offset), sums.mem, as_mem(d.scale), cl_long(d.scale.offset),
         cl_int(d.scale.buf != nullptr));
}

}  // namespace

int pool_forward(void*, int dev, const flx_pool_desc* dp, flx_stream st) {
  return guard("pool_forward", [&] {
    const flx_pool_desc& d = *dp;
    Device& dv = device(dev);
    const PoolShape s = check_pool(dv, d, false);
    launch(dv, queue_of(dv, st), kDnnKernels, d.dtype, "pool_fwd_k", size_t(s.cn * s.P), as_mem(d.x),
           cl_long(d.x.offset), as_mem(d.y), cl_long(d.y.offset), cl_int(d.mode == FLX_POOL_MAX), cl_long(s.cn),
           dnn::long4_of(s.in), dnn::long4_of(s.out), dnn::long4_of(s.win), dnn::long4_of(s.str),
           dnn::long4_of(s.pad));
  });
}

int pool_backward(void*, int dev, const flx_pool_desc* dp, flx_stream st) {
  return guard("pool_backward", [&] {
    const flx_pool_desc& d = *dp;
    Device& dv = device(dev);
    const PoolShape s = check_pool(dv, d, true);
    launch(dv, queue_of(dv, st), kDnnKernels, d.dtype, "pool_bwd_k", size_t(s.cn * s.ivol), as_mem(d.x),
           cl_long(d.x.offset), as_mem(d.y), cl_long(d.y.offset), as_mem(d.dy), cl_long(d.dy.offset), as_mem(d.dx),
           cl_long(d.dx.offset), cl_int(d.mode == FLX_POOL_MAX), cl_long(s.cn), dnn::long4_of(s.in),
           dnn::long4_of(s.out), dnn::long4_of(s.win), dnn::long4_of(s.str), dnn::long4_of(s.pad));
  });
}

int batchnorm_forward(void*, int dev, const flx_batchnorm_desc* d, flx_stream s) {
  return guard("batchnorm_forward", [&] { batchnorm_fwd(dev, *d, s); });
}
int batchnorm_backward(void*, int dev, const flx_batchnorm_desc* d, flx_stream s) {
  return guard("batchnorm_backward", [&] { batchnorm_bwd(dev, *d, s); });
}

}  // namespace flx_ocl

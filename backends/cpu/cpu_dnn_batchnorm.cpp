// Batch normalisation (the dnn table's batchnorm_*): Float32 through
// oneDNN's batch normalisation on flx's plain layout, x as (N, C, spatial);
// Float64, and anything oneDNN refuses, as direct loops
// (cpu_dnn_direct.cpp).
//
// oneDNN is always asked for a scale and a shift (use_scale | use_shift):
// a BatchNorm without them passes ones and zeros, which gives the same
// results and keeps one primitive per shape. What the ABI wants beyond
// oneDNN's outputs is computed here, per channel: saved_invstd from the
// batch variance oneDNN returns, Flux's update of the running statistics
// (with the unbiased variance), and for the backward pass the variance
// oneDNN takes, from saved_invstd.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;

enum Pass : int32_t { kTraining, kInference, kBackward };

Planned make_plan(const flx_batchnorm_desc& d, Pass pass) {
  try {
    // (N, C, 1, spatial): oneDNN's optimised implementations take 4-D
    // plain layouts (nchw); a 3-D one runs its reference code.
    const auto x = plain_f32({d.batch, d.channels, 1, d.spatial});
    const auto c = plain_f32({d.channels});
    const float eps = float(d.epsilon);
    using flags = dnnl::normalization_flags;
    const flags affine = flags::use_scale | flags::use_shift;
    const dnnl::batch_normalization_forward::desc train(dnnl::prop_kind::forward_training, x, eps, affine);
    const dnnl::batch_normalization_forward::primitive_desc train_pd(train, user_scratchpad(), engine());
    if (pass == kTraining)
      return plan(train_pd, dnnl::batch_normalization_forward(train_pd),
                  {{DNNL_ARG_SRC, x, false},
                   {DNNL_ARG_DST, x, true},
                   {DNNL_ARG_SCALE, c, false},
                   {DNNL_ARG_SHIFT, c, false},
                   {DNNL_ARG_MEAN, c, true},
                   {DNNL_ARG_VARIANCE, c, true}});
    if (pass == kInference) {
      const dnnl::batch_normalization_forward::desc infer(dnnl::prop_kind::forward_inference, x, eps,
                                                          affine | flags::use_global_stats);
      const dnnl::batch_normalization_forward::primitive_desc pd(infer, user_scratchpad(), engine());
      return plan(pd, dnnl::batch_normalization_forward(pd),
                  {{DNNL_ARG_SRC, x, false},
                   {DNNL_ARG_DST, x, true},
                   {DNNL_ARG_SCALE, c, false},
                   {DNNL_ARG_SHIFT, c, false},
                   {DNNL_ARG_MEAN, c, false},
                   {DNNL_ARG_VARIANCE, c, false}});
    }
    const dnnl::batch_normalization_backward::desc bwd(dnnl::prop_kind::backward, x, x, eps, affine);
    const dnnl::batch_normalization_backward::primitive_desc pd(bwd, user_scratchpad(), engine(), train_pd);
    return plan(pd, dnnl::batch_normalization_backward(pd),
                {{DNNL_ARG_SRC, x, false},
                 {DNNL_ARG_DIFF_DST, x, false},
                 {DNNL_ARG_SCALE, c, false},
                 {DNNL_ARG_SHIFT, c, false},
                 {DNNL_ARG_MEAN, c, false},
                 {DNNL_ARG_VARIANCE, c, false},
                 {DNNL_ARG_DIFF_SRC, x, true},
                 {DNNL_ARG_DIFF_SCALE, c, true},
                 {DNNL_ARG_DIFF_SHIFT, c, true}});
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) throw;
    Planned refused;
    refused.refused = true;
    refused.why = e.what();
    return refused;
  }
}

Cache<Planned>& cache() {
  static Cache<Planned>& c = *new Cache<Planned>(kCacheEntries);  // never destroyed, as the engine
  return c;
}

std::shared_ptr<const Planned> planned(const flx_batchnorm_desc& d, Pass pass) {
  const int threads = follow_flx_threads();
  Key key("batchnorm");
  key.add(pass).add(threads).add(d.batch).add(d.channels).add(d.spatial).add(float(d.epsilon));
  return cache().get(key, [&] { return make_plan(d, pass); });
}

template <class T>
T* ptr(flx_mem m) {
  return m.buf ? reinterpret_cast<T*>(addr(m)) : nullptr;
}

// A channel vector: the tensor's when the descriptor has one, else `fill`.
struct ChannelVector {
  std::vector<float> own;
  float* p;
  ChannelVector(flx_mem m, int64_t channels, float fill) {
    if (m.buf) {
      p = ptr<float>(m);
    } else {
      own.assign(size_t(channels), fill);
      p = own.data();
    }
  }
};

int forward_f32(const flx_batchnorm_desc& d) {
  const auto p = planned(d, d.training ? kTraining : kInference);
  if (p->refused) return FLX_ERR_UNSUPPORTED;
  const int64_t C = d.channels;
  ChannelVector scale(d.scale, C, 1), bias(d.bias, C, 0);
  Scratch scratch({}, 0, p->scratch_bytes);
  if (!d.training) {
    run(*p,
        {{DNNL_ARG_SRC, addr(d.x)},
         {DNNL_ARG_DST, addr(d.y)},
         {DNNL_ARG_SCALE, scale.p},
         {DNNL_ARG_SHIFT, bias.p},
         {DNNL_ARG_MEAN, addr(d.running_mean)},
         {DNNL_ARG_VARIANCE, addr(d.running_var)}},
        scratch.at(0));
    return FLX_OK;
  }
  ChannelVector mean(d.saved_mean, C, 0);
  std::vector<float> var(static_cast<size_t>(C));
  run(*p,
      {{DNNL_ARG_SRC, addr(d.x)},
       {DNNL_ARG_DST, addr(d.y)},
       {DNNL_ARG_SCALE, scale.p},
       {DNNL_ARG_SHIFT, bias.p},
       {DNNL_ARG_MEAN, mean.p},
       {DNNL_ARG_VARIANCE, var.data()}},
      scratch.at(0));
  float* invstd = ptr<float>(d.saved_invstd);
  float* rmean = ptr<float>(d.running_mean);
  float* rvar = ptr<float>(d.running_var);
  const double m = double(d.spatial * d.batch), mo = d.momentum;
  for (int64_t c = 0; c < C; ++c) {
    const double v = var[size_t(c)];
    if (invstd) invstd[c] = float(1 / std::sqrt(v + d.epsilon));
    if (rmean && rvar) {
      rmean[c] = float((1 - mo) * double(rmean[c]) + mo * double(mean.p[c]));
      rvar[c] = float((1 - mo) * double(rvar[c]) + mo * (m > 1 ? v * m / (m - 1) : v));
    }
  }
  return FLX_OK;
}

int backward_f32(const flx_batchnorm_desc& d) {
  const auto p = planned(d, kBackward);
  if (p->refused) return FLX_ERR_UNSUPPORTED;
  const int64_t C = d.channels;
  // (oneDNN's backward takes the shift too, though dx does not depend on it)
  ChannelVector scale(d.scale, C, 1), bias(d.bias, C, 0), dscale(d.dscale, C, 0), dbias(d.dbias, C, 0);
  // oneDNN takes the variance: back from invstd = 1 / sqrt(var + eps), in
  // double (never below 0: a constant channel's variance is 0).
  std::vector<float> var(static_cast<size_t>(C));
  const float* invstd = ptr<float>(d.saved_invstd);
  for (int64_t c = 0; c < C; ++c)
    var[size_t(c)] = float(std::max(0.0, 1 / (double(invstd[c]) * double(invstd[c])) - d.epsilon));
  Scratch scratch({}, 0, p->scratch_bytes);
  run(*p,
      {{DNNL_ARG_SRC, addr(d.x)},
       {DNNL_ARG_DIFF_DST, addr(d.dy)},
       {DNNL_ARG_SCALE, scale.p},
       {DNNL_ARG_SHIFT, bias.p},
       {DNNL_ARG_MEAN, addr(d.saved_mean)},
       {DNNL_ARG_VARIANCE, var.data()},
       {DNNL_ARG_DIFF_SRC, addr(d.dx)},
       {DNNL_ARG_DIFF_SCALE, dscale.p},
       {DNNL_ARG_DIFF_SHIFT, dbias.p}},
      scratch.at(0));
  return FLX_OK;
}

}  // namespace

int batchnorm_forward(void*, int, const flx_batchnorm_desc* d, flx_stream) {
  const char* call = "batchnorm_forward";
  if (int st = check_batchnorm(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  if (!d->training)
    for (auto [what, m] : {std::pair{"running_mean", d->running_mean}, {"running_var", d->running_var}})
      if (int st = need_buffer(call, what, m)) return st;
  if (d->training && bool(d->running_mean.buf) != bool(d->running_var.buf))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": running_mean and running_var go together, but " +
                                              "only one has a buffer; give both (tracked statistics) or neither");
  return guarded(call, [&] {
    if (d->dtype == FLX_F32 && forward_f32(*d) == FLX_OK) return FLX_OK;
    auto direct = [&](auto tag) {
      using T = decltype(tag);
      direct_batchnorm_forward<T>(*d, ptr<T>(d->x), ptr<T>(d->y), ptr<T>(d->scale), ptr<T>(d->bias),
                                  ptr<T>(d->running_mean), ptr<T>(d->running_var), ptr<T>(d->saved_mean),
                                  ptr<T>(d->saved_invstd));
    };
    if (d->dtype == FLX_F32)
      direct(float{});
    else
      direct(double{});
    return FLX_OK;
  });
}

int batchnorm_backward(void*, int, const flx_batchnorm_desc* d, flx_stream) {
  const char* call = "batchnorm_backward";
  if (int st = check_batchnorm(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x},
                         {"dy", d->dy},
                         {"dx", d->dx},
                         {"saved_mean", d->saved_mean},
                         {"saved_invstd", d->saved_invstd}})
    if (int st = need_buffer(call, what, m)) return st;
  return guarded(call, [&] {
    if (d->dtype == FLX_F32 && backward_f32(*d) == FLX_OK) return FLX_OK;
    auto direct = [&](auto tag) {
      using T = decltype(tag);
      direct_batchnorm_backward<T>(*d, ptr<T>(d->x), ptr<T>(d->dy), ptr<T>(d->scale), ptr<T>(d->saved_mean),
                                   ptr<T>(d->saved_invstd), ptr<T>(d->dx), ptr<T>(d->dscale), ptr<T>(d->dbias));
    };
    if (d->dtype == FLX_F32)
      direct(float{});
    else
      direct(double{});
    return FLX_OK;
  });
}

}  // namespace flx::cpu_backend

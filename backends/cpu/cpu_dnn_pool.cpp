// Pooling (the dnn table's pool_*): mean pooling in Float32 through
// oneDNN's pooling on flx's plain layout (avg_include_padding); max pooling,
// Float64, and the cases below, as direct loops (cpu_dnn_direct.cpp):
//  - max pooling: on the plain layout oneDNN has only its simple_nchw
//    implementation, several times slower than the direct loops (which, for
//    windows without padding, run without bounds checks); those also keep
//    the ABI's rules without a scan of x (a NaN in a window gives NaN,
//    where oneDNN's maximum drops it) and need no reserve: the backward
//    finds each window's first maximum again from x. (The workspace paths
//    below serve a max pooling through oneDNN, which none takes now.)
//  - a pad as wide as the window, which leaves windows of padding only
//    (the ABI's -Inf for max; oneDNN's is the lowest finite float);
//  - a backward call without the reserve the forward's size asked for.
#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;

enum Pass : int32_t { kForward, kForwardTraining, kBackward };

bool keeps_workspace(const flx_pool_desc& d) { return d.mode == FLX_POOL_MAX && d.training; }

Planned make_plan(const DnnGeometry& g, bool max, Pass pass) {
  try {
    const int ns = g.nspatial;
    const auto x = plain_f32(activation_dims(ns, g.batch, g.cin, g.in));
    const auto y = plain_f32(activation_dims(ns, g.batch, g.cin, g.out));
    const auto strides = spatial_dims(ns, g.stride), kernel = spatial_dims(ns, g.kernel);
    const auto pad_l = spatial_dims(ns, g.pad_lo), pad_r = spatial_dims(ns, g.pad_hi);
    const auto alg = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
    const bool training = pass != kForward;
    const dnnl::pooling_forward::desc fwd(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, alg, x, y, strides, kernel,
        pad_l, pad_r);
    const dnnl::pooling_forward::primitive_desc fwd_pd(fwd, user_scratchpad(), engine());
    const bool ws = max && training;
    if (pass != kBackward) {
      std::vector<ArgSpec> args{{DNNL_ARG_SRC, x, false}, {DNNL_ARG_DST, y, true}};
      if (ws) args.push_back({DNNL_ARG_WORKSPACE, fwd_pd.workspace_desc(), true});
      return plan(fwd_pd, dnnl::pooling_forward(fwd_pd), args);
    }
    const dnnl::pooling_backward::desc bwd(alg, x, y, strides, kernel, pad_l, pad_r);
    const dnnl::pooling_backward::primitive_desc pd(bwd, user_scratchpad(), engine(), fwd_pd);
    std::vector<ArgSpec> args{{DNNL_ARG_DIFF_DST, y, false}, {DNNL_ARG_DIFF_SRC, x, true}};
    if (ws) args.push_back({DNNL_ARG_WORKSPACE, pd.workspace_desc(), false});
    return plan(pd, dnnl::pooling_backward(pd), args);
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

std::shared_ptr<const Planned> planned(const DnnGeometry& g, bool max, Pass pass) {
  const int threads = follow_flx_threads();
  Key key("pool");
  key.add(max).add(pass).add(threads).add(g.nspatial).add(g.batch).add(g.cin);
  key.add_array(g.in).add_array(g.out).add_array(g.kernel).add_array(g.stride).add_array(g.pad_lo).add_array(g.pad_hi);
  return cache().get(key, [&] { return make_plan(g, max, pass); });
}

// The workspace argument's size in a plan (0 when it keeps none).
uint64_t workspace_bytes(const Planned& p) {
  for (const auto& a : p.args)
    if (a.id == DNNL_ARG_WORKSPACE) return a.plain.get_size();
  return 0;
}

bool pad_covers_window(const DnnGeometry& g) {
  for (int i = 0; i < 3; ++i)
    if (g.pad_lo[i] >= g.kernel[i] || g.pad_hi[i] >= g.kernel[i]) return true;
  return false;
}

// Whether d (checked, geometry g) runs through oneDNN: mean pooling in
// Float32 whose windows all hold some input.
bool through_onednn(const flx_pool_desc& d, const DnnGeometry& g, const float*) {
  return d.dtype == FLX_F32 && d.mode != FLX_POOL_MAX && !pad_covers_window(g);
}

}  // namespace

int pool_reserve_size(void*, int, const flx_pool_desc* d, uint64_t* bytes) {
  if (!bytes) return fail(FLX_ERR_INVALID_ARGUMENT, "pool_reserve_size: the output is a null pointer");
  *bytes = 0;
  DnnGeometry g;
  if (int st = pool_geometry("pool_reserve_size", d, &g)) return st;
  if (!keeps_workspace(*d) || !through_onednn(*d, g, nullptr)) return FLX_OK;
  return guarded("pool_reserve_size", [&] {
    const auto p = planned(g, true, kForwardTraining);
    *bytes = p->refused ? 0 : workspace_bytes(*p);
    return FLX_OK;
  });
}

int pool_forward(void*, int, const flx_pool_desc* d, flx_stream) {
  const char* call = "pool_forward";
  DnnGeometry g;
  if (int st = pool_geometry(call, d, &g)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  const bool max = d->mode == FLX_POOL_MAX;
  return guarded(call, [&] {
    if (through_onednn(*d, g, reinterpret_cast<const float*>(addr(d->x)))) {
      const auto p = planned(g, max, keeps_workspace(*d) ? kForwardTraining : kForward);
      const uint64_t ws = workspace_bytes(*p);
      // Without room for the workspace (a caller that skipped
      // pool_reserve_size), the forward runs for inference: the backward
      // then finds no reserve and takes the direct loops.
      const auto q = ws && (!d->reserve.buf || d->reserve_bytes < ws) ? planned(g, max, kForward) : p;
      if (!q->refused) {
        Scratch scratch({}, 0, q->scratch_bytes);
        run(*q, {{DNNL_ARG_SRC, addr(d->x)}, {DNNL_ARG_DST, addr(d->y)}, {DNNL_ARG_WORKSPACE, addr(d->reserve)}},
            scratch.at(0));
        return FLX_OK;
      }
    }
    if (d->dtype == FLX_F32)
      direct_pool_forward(g, max, reinterpret_cast<const float*>(addr(d->x)), reinterpret_cast<float*>(addr(d->y)));
    else
      direct_pool_forward(g, max, reinterpret_cast<const double*>(addr(d->x)), reinterpret_cast<double*>(addr(d->y)));
    return FLX_OK;
  });
}

int pool_backward(void*, int, const flx_pool_desc* d, flx_stream) {
  const char* call = "pool_backward";
  DnnGeometry g;
  if (int st = pool_geometry(call, d, &g)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"dy", d->dy}, {"dx", d->dx}})
    if (int st = need_buffer(call, what, m)) return st;
  const bool max = d->mode == FLX_POOL_MAX;
  return guarded(call, [&] {
    if (through_onednn(*d, g, reinterpret_cast<const float*>(addr(d->x)))) {
      const auto p = planned(g, max, kBackward);
      const uint64_t ws = workspace_bytes(*p);
      if (!p->refused && (!ws || (d->reserve.buf && d->reserve_bytes >= ws))) {
        Scratch scratch({}, 0, p->scratch_bytes);
        run(*p,
            {{DNNL_ARG_DIFF_DST, addr(d->dy)},
             {DNNL_ARG_DIFF_SRC, addr(d->dx)},
             {DNNL_ARG_WORKSPACE, addr(d->reserve)}},
            scratch.at(0));
        return FLX_OK;
      }
    }
    if (d->dtype == FLX_F32)
      direct_pool_backward(g, max, reinterpret_cast<const float*>(addr(d->x)),
                           reinterpret_cast<const float*>(addr(d->dy)), reinterpret_cast<float*>(addr(d->dx)));
    else
      direct_pool_backward(g, max, reinterpret_cast<const double*>(addr(d->x)),
                           reinterpret_cast<const double*>(addr(d->dy)), reinterpret_cast<double*>(addr(d->dx)));
    return FLX_OK;
  });
}

}  // namespace flx::cpu_backend

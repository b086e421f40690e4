// Pooling (the dnn table's pool_*): mean pooling in Float32 through
// oneDNN's pooling on flx's plain layout (avg_include_padding), in pieces
// of the batch on flx's pool (cpu_dnn_engine.cpp); max pooling, Float64,
// and a pad as wide as the window as direct loops (cpu_dnn_direct.cpp):
//  - max pooling: on the plain layout oneDNN has only its simple_nchw
//    implementation, several times slower than the direct loops (which, for
//    windows without padding, run without bounds checks); those also keep
//    the ABI's rules without a scan of x (a NaN in a window gives NaN,
//    where oneDNN's maximum drops it) and need no reserve: the backward
//    finds each window's first maximum again from x. So no pooling keeps a
//    reserve (pool_reserve_size is 0).
//  - a pad as wide as the window leaves windows of padding only (the
//    ABI's -Inf for max; oneDNN's mean would count them differently).
// Float16 and BFloat16 run the Float32 paths on float copies.
#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;

enum Pass : int32_t { kForward, kBackward };

// Mean pooling's plan for pass `pass` of g.
Planned make_plan(const DnnGeometry& g, Pass pass) {
  try {
    const int ns = g.nspatial;
    const auto x = plain_f32(activation_dims(ns, g.batch, g.cin, g.in));
    const auto y = plain_f32(activation_dims(ns, g.batch, g.cin, g.out));
    const auto strides = spatial_dims(ns, g.stride), kernel = spatial_dims(ns, g.kernel);
    const auto pad_l = spatial_dims(ns, g.pad_lo), pad_r = spatial_dims(ns, g.pad_hi);
    const auto alg = dnnl::algorithm::pooling_avg_include_padding;
    const dnnl::pooling_forward::desc fwd(dnnl::prop_kind::forward_training, alg, x, y, strides, kernel, pad_l, pad_r);
    const dnnl::pooling_forward::primitive_desc fwd_pd(fwd, user_scratchpad(), engine());
    if (pass == kForward)
      return plan(fwd_pd, dnnl::pooling_forward(fwd_pd), {{DNNL_ARG_SRC, x, false}, {DNNL_ARG_DST, y, true}});
    const dnnl::pooling_backward::desc bwd(alg, x, y, strides, kernel, pad_l, pad_r);
    const dnnl::pooling_backward::primitive_desc pd(bwd, user_scratchpad(), engine(), fwd_pd);
    return plan(pd, dnnl::pooling_backward(pd), {{DNNL_ARG_DIFF_DST, y, false}, {DNNL_ARG_DIFF_SRC, x, true}});
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

// The plans for the pieces of g's batch (cpu_dnn_engine.hpp).
PiecePlans pool_pieces(const DnnGeometry& g, Pass pass) {
  // Work per image: the elements read and written, each worth some 16
  // multiply-adds of a convolution (which runs 16 to a cycle and a core).
  return piece_plans(BatchPieces(g.batch, 16 * g.cin * (g.in_numel() + g.out_numel())), [&](int64_t n) {
    Key key("pool");
    key.add(pass).add(g.nspatial).add(n).add(g.cin);
    key.add_array(g.in).add_array(g.out).add_array(g.kernel).add_array(g.stride).add_array(g.pad_lo).add_array(
        g.pad_hi);
    DnnGeometry piece = g;
    piece.batch = n;
    return cache().get(key, [&] { return make_plan(piece, pass); });
  });
}

// Whether some window holds padding only.
bool pad_covers_window(const DnnGeometry& g) {
  for (int i = 0; i < 3; ++i)
    if (g.pad_lo[i] >= g.kernel[i] || g.pad_hi[i] >= g.kernel[i]) return true;
  return false;
}

// Pass `pass` of d (checked, geometry g) through oneDNN: false for what it
// does not run (max pooling, Float64, windows of padding only, a shape it
// refuses).
bool through_onednn(const flx_pool_desc& d, const DnnGeometry& g, Pass pass) {
  if (d.dtype != FLX_F32 || d.mode == FLX_POOL_MAX || pad_covers_window(g)) return false;
  const PiecePlans p = pool_pieces(g, pass);
  if (p.refused) return false;
  Scratch scratch({}, 0, p.bytes());
  const uint64_t x_image = uint64_t(g.cin * g.in_numel()) * sizeof(float);
  const uint64_t y_image = uint64_t(g.cin * g.out_numel()) * sizeof(float);
  run_pieces(p.pieces, [&](int64_t k, int64_t first) {
    const uint64_t n0 = uint64_t(first);
    if (pass == kForward)
      run(p.of(k), {{DNNL_ARG_SRC, addr(d.x) + n0 * x_image}, {DNNL_ARG_DST, addr(d.y) + n0 * y_image}},
          scratch.at(p.scratch_at(k)));
    else
      run(p.of(k), {{DNNL_ARG_DIFF_DST, addr(d.dy) + n0 * y_image}, {DNNL_ARG_DIFF_SRC, addr(d.dx) + n0 * x_image}},
          scratch.at(p.scratch_at(k)));
  });
  return true;
}

// Float16 and BFloat16: max pooling on the halves where that gives the
// Float32 pass's bits (half_max_pool_direct), else the Float32 pass on
// float copies (cpu_dnn_halves.cpp).
int pool_halves(const DnnGeometry& g, const flx_pool_desc* d, Pass pass) {
  if (d->mode == FLX_POOL_MAX) {  // where the halves can be pooled as they are
    const bool backward = pass == kBackward;
    const bool done =
        d->dtype == FLX_F16
            ? half_max_pool_direct(g, backward, reinterpret_cast<const Half*>(addr(d->x)),
                                   reinterpret_cast<const Half*>(backward ? addr(d->dy) : nullptr),
                                   reinterpret_cast<Half*>(addr(backward ? d->dx : d->y)))
            : half_max_pool_direct(g, backward, reinterpret_cast<const BHalf*>(addr(d->x)),
                                   reinterpret_cast<const BHalf*>(backward ? addr(d->dy) : nullptr),
                                   reinterpret_cast<BHalf*>(addr(backward ? d->dx : d->y)));
    if (done) return FLX_OK;
  }
  const int64_t nx = g.batch * g.cin * g.in_numel(), ny = g.batch * g.cin * g.out_numel();
  HalfBuffers h(d->dtype);
  flx_pool_desc f = *d;
  f.dtype = FLX_F32;
  f.x = h.in(d->x, nx);
  if (pass == kForward) {
    f.y = h.out(d->y, ny);
  } else {
    f.y = h.in(d->y, ny);
    f.dy = h.in(d->dy, ny);
    f.dx = h.out(d->dx, nx);
  }
  const int st = pass == kForward ? pool_forward(nullptr, 0, &f, nullptr) : pool_backward(nullptr, 0, &f, nullptr);
  if (st == FLX_OK) h.finish();
  return st;
}

}  // namespace

int pool_reserve_size(void*, int, const flx_pool_desc* d, uint64_t* bytes) {
  if (!bytes) return fail(FLX_ERR_INVALID_ARGUMENT, "pool_reserve_size: the output is a null pointer");
  *bytes = 0;
  DnnGeometry g;
  return pool_geometry("pool_reserve_size", d, &g);  // no pooling here keeps a reserve
}

int pool_forward(void*, int, const flx_pool_desc* d, flx_stream) {
  const char* call = "pool_forward";
  DnnGeometry g;
  if (int st = pool_geometry(call, d, &g)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  const bool max = d->mode == FLX_POOL_MAX;
  if (is_half_dtype(d->dtype)) return guarded(call, [&] { return pool_halves(g, d, kForward); });
  return guarded(call, [&] {
    if (through_onednn(*d, g, kForward)) return FLX_OK;
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
  if (is_half_dtype(d->dtype)) return guarded(call, [&] { return pool_halves(g, d, kBackward); });
  return guarded(call, [&] {
    if (through_onednn(*d, g, kBackward)) return FLX_OK;
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

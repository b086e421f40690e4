// Convolution (the dnn table's conv_*): Float32 through oneDNN's direct
// convolution, whose src, weights and dst layouts oneDNN chooses (format
// `any`: blocked layouts such as nChw16c are much faster than flx's plain
// NCHW), with reorders to and from flx's layouts; Float64, and any case
// oneDNN refuses, as direct loops (cpu_dnn_direct.cpp).
//
// BFloat16 (Float16 where oneDNN computes it) runs in oneDNN's own half
// kernels where the CPU has the instructions (cpu_native_halves.hpp): x, w,
// y and their gradients in the half type, products accumulated in Float32,
// each output rounded once; the filter's and the bias's gradients come out
// of each piece in Float32, are added in Float32 in the pieces' order, and
// are rounded once at the end. Elsewhere halves run the Float32 pass on
// widened copies (conv_halves).
//
// Layouts: x (spatial..., C, N) column-major is row-major N, C, D, H, W;
// w (kernel..., cin / groups, cout) is row-major O, I, D, H, W, and with
// groups, O splits into (groups, cout / groups): oneDNN's G, O, I, D, H, W.
//
// Threads: oneDNN computes pieces of the batch, each on one thread, in
// parallel on flx's pool (cpu_dnn_engine.cpp says why). The filter's
// gradient sums over the batch: each piece's partial gradient goes to the
// scratch, and the partials are added in the pieces' order, so that its
// bits do not depend on the threads.
//
// The primitives, with their reorders and scratch layout (Planned), are
// cached per pass, shape and parameters; conv_workspace asks for the
// scratch (each piece's scratchpad and reordered tensors, and the filter's
// partial gradients) so that a call allocates nothing.
#include <algorithm>

#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"
#include "cpu_native_halves.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;
using dt = dnnl::memory::data_type;

const char* call_name(int32_t pass) {
  switch (pass) {
    case FLX_CONV_FORWARD:
      return "conv_forward";
    case FLX_CONV_BACKWARD_DATA:
      return "conv_backward_data";
    case FLX_CONV_BACKWARD_FILTER:
      return "conv_backward_filter";
    case FLX_CONV_BACKWARD:
      return "conv_backward";
  }
  return "conv_workspace";
}

struct ConvMds {
  dnnl::memory::desc x, w, y, b, b_grad;               // flx's plain layouts
  dnnl::memory::desc x_any, w_any, y_any, w_grad_any;  // the primitive's choice
  dims strides, dilates, pad_l, pad_r;
};

// The descriptors of g in dtype (FLX_F32 or a half type): for halves x, w,
// y and the forward's bias in it; the filter's and bias's gradients of the
// primitive (w_grad_any, b_grad) in Float32 (the partial sums of the
// pieces), the filter's gradient in flx's layout (w) in the half type,
// which the reorder out of the primitive's layout rounds to.
ConvMds conv_mds(const DnnGeometry& g, int32_t dtype) {
  ConvMds m;
  const int ns = g.nspatial;
  const dt t = data_type(dtype);
  const dims xd = activation_dims(ns, g.batch, g.cin, g.in), yd = activation_dims(ns, g.batch, g.cout, g.out);
  dims wd = g.groups > 1 ? dims{g.groups, g.cout / g.groups, g.cin / g.groups} : dims{g.cout, g.cin};
  for (int i = ns - 1; i >= 0; --i) wd.push_back(g.kernel[i]);
  m.x = dnnl::memory::desc(xd, t, plain_tag(xd.size()));
  m.y = dnnl::memory::desc(yd, t, plain_tag(yd.size()));
  m.w = dnnl::memory::desc(wd, t, plain_tag(wd.size()));
  m.b = dnnl::memory::desc({g.cout}, t, tag::a);
  m.b_grad = plain_f32({g.cout});
  m.x_any = dnnl::memory::desc(xd, t, tag::any);
  m.y_any = dnnl::memory::desc(yd, t, tag::any);
  m.w_any = dnnl::memory::desc(wd, t, tag::any);
  m.w_grad_any = dnnl::memory::desc(wd, dt::f32, tag::any);
  m.strides = spatial_dims(ns, g.stride);
  m.dilates = spatial_dims(ns, g.dilation, 1);  // oneDNN counts the gaps: flx's dilation - 1
  m.pad_l = spatial_dims(ns, g.pad_lo);
  m.pad_r = spatial_dims(ns, g.pad_hi);
  return m;
}

// The forward primitive descriptor (also the hint the backward ones need).
dnnl::convolution_forward::primitive_desc forward_pd(const ConvMds& m, bool bias) {
  const auto desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             m.x_any, m.w_any, m.b, m.y_any, m.strides, m.dilates, m.pad_l, m.pad_r)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             m.x_any, m.w_any, m.y_any, m.strides, m.dilates, m.pad_l, m.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), engine());
}

// The weights (or their gradient) come last among a plan's arguments, so
// that their reorder buffer is the last of its scratch, which a piece does
// without when the weights come reordered (conv_onednn). A half plan that
// oneDNN would not run natively is refused: the caller widens.
Planned make_plan(const DnnGeometry& g, int32_t dtype, int32_t pass, bool bias) {
  auto checked = [&](const dnnl::primitive_desc& pd, dnnl::primitive prim, const std::vector<ArgSpec>& args) {
    Planned p;
    if (dtype != FLX_F32) p.why = emulation_reason(pd, dtype);
    p.impl = describe(pd);
    if (!p.why.empty()) {
      p.refused = true;
      return p;
    }
    const std::string impl = p.impl;
    p = plan(pd, std::move(prim), args);
    p.impl = impl;
    return p;
  };
  try {
    const ConvMds m = conv_mds(g, dtype);
    if (pass == FLX_CONV_FORWARD) {
      const auto pd = forward_pd(m, bias);
      std::vector<ArgSpec> args{{DNNL_ARG_SRC, m.x, false}, {DNNL_ARG_DST, m.y, true}};
      if (bias) args.push_back({DNNL_ARG_BIAS, m.b, false});
      args.push_back({DNNL_ARG_WEIGHTS, m.w, false});
      return checked(pd, dnnl::convolution_forward(pd), args);
    }
    if (pass == FLX_CONV_BACKWARD_DATA) {
      const auto hint = forward_pd(m, false);
      const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, m.x_any, m.w_any, m.y_any,
                                                       m.strides, m.dilates, m.pad_l, m.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), engine(), hint);
      return checked(pd, dnnl::convolution_backward_data(pd),
                     {{DNNL_ARG_DIFF_DST, m.y, false}, {DNNL_ARG_DIFF_SRC, m.x, true}, {DNNL_ARG_WEIGHTS, m.w, false}});
    }
    const auto hint = forward_pd(m, bias);
    const auto desc =
        bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, m.x_any, m.w_grad_any,
                                                        m.b_grad, m.y_any, m.strides, m.dilates, m.pad_l, m.pad_r)
             : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, m.x_any, m.w_grad_any,
                                                        m.y_any, m.strides, m.dilates, m.pad_l, m.pad_r);
    const dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), engine(), hint);
    std::vector<ArgSpec> args{{DNNL_ARG_SRC, m.x, false}, {DNNL_ARG_DIFF_DST, m.y, false}};
    if (bias) args.push_back({DNNL_ARG_DIFF_BIAS, m.b_grad, true});
    args.push_back({DNNL_ARG_DIFF_WEIGHTS, m.w, true});
    return checked(pd, dnnl::convolution_backward_weights(pd), args);
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) throw;
    Planned refused;  // no oneDNN implementation for this case: the direct loops (or widened copies) run it
    refused.refused = true;
    refused.why = dtype == FLX_F32 ? std::string(e.what()) : no_kernel("convolution", dtype, e);
    return refused;
  }
}

Cache<Planned>& cache() {
  static Cache<Planned>& c = *new Cache<Planned>(kCacheEntries);  // never destroyed, as the engine
  return c;
}

// The cached plan of pass `pass` of g in dtype (bias: with the bias or its
// gradient), for the calling thread's oneDNN thread count (one: see
// piece_plans).
std::shared_ptr<const Planned> planned(const DnnGeometry& g, int32_t dtype, int32_t pass, bool bias) {
  Key key("conv");
  key.add(dtype).add(pass).add(bias).add(g.nspatial).add(g.batch).add(g.cin).add(g.cout).add(g.groups);
  key.add_array(g.in).add_array(g.out).add_array(g.kernel).add_array(g.stride).add_array(g.dilation);
  key.add_array(g.pad_lo).add_array(g.pad_hi);
  return cache().get(key, [&] { return make_plan(g, dtype, pass, bias); });
}

// ---- pieces of the batch --------------------------------------------------------

// A pass's plans for the pieces of the batch and the layout of their host
// scratch: the weights in the primitives' layout (`shared`: reordered once
// for all pieces, where their plans agree on that layout; for the filter's
// gradient, the pieces' sum before its reorder to flx's layout), each
// piece's own scratch, then, for the filter's gradient, each piece's
// partial gradients of the filter and the bias.
struct ConvPieces {
  PiecePlans plans;
  int weights_id;  // DNNL_ARG_WEIGHTS, or DNNL_ARG_DIFF_WEIGHTS for the filter's gradient
  bool shared = false;
  uint64_t weights = 0, each = 0, partial_w = 0, partial_b = 0;

  const Planned& first_plan() const { return *(plans.plan[0] ? plans.plan[0] : plans.plan[1]); }
  uint64_t scratch_at(int64_t k) const { return weights + uint64_t(k) * each; }
  uint64_t w_at(int64_t k) const { return scratch_at(plans.pieces.count) + uint64_t(k) * partial_w; }
  uint64_t b_at(int64_t k) const { return w_at(plans.pieces.count) + uint64_t(k) * partial_b; }
  uint64_t bytes() const { return b_at(plans.pieces.count); }
};

// A piece holds 256 output points at least, so that each of its weights
// serves enough of them: a layer with large weights and small images (3x3,
// 512 channels, 7x7) ran its backward pass 30 % slower in 16 pieces than in
// 4 to 6, the filter's partial gradients being as large as the weights.
constexpr int64_t kPiecePoints = 256;

ConvPieces conv_pieces(const DnnGeometry& g, int32_t dtype, int32_t pass, bool bias) {
  const int64_t macs = g.cout * (g.cin / g.groups) * g.kernel_numel() * g.out_numel();  // per image
  const BatchPieces pieces(g.batch, macs, g.batch * g.out_numel() / kPiecePoints);
  ConvPieces c{piece_plans(pieces,
                           [&](int64_t n) {
                             DnnGeometry piece = g;
                             piece.batch = n;
                             return planned(piece, dtype, pass, bias);
                           }),
               pass == FLX_CONV_BACKWARD_FILTER ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS};
  if (c.plans.refused) return c;
  const Planned::Arg* w = c.first_plan().arg(c.weights_id);
  c.shared = w->reordered;
  for (const auto& p : c.plans.plan)
    if (p && p->arg(c.weights_id)->inner != w->inner) c.shared = false;
  // Half filter gradients are summed in Float32 in the primitives' layout
  // (the reorder to flx's rounds them): pieces that disagree on it widen.
  if (dtype != FLX_F32 && pass == FLX_CONV_BACKWARD_FILTER && !c.shared) {
    c.plans.refused = true;
    return c;
  }
  if (c.shared) c.weights = aligned(w->inner.get_size());
  for (const auto& p : c.plans.plan)
    if (p) c.each = std::max(c.each, aligned(c.shared ? p->scratch_without(c.weights_id) : p->scratch_bytes));
  if (pass == FLX_CONV_BACKWARD_FILTER) {  // partials in the shared layout, else in flx's
    const uint64_t plain = uint64_t(g.cout * (g.cin / g.groups) * g.kernel_numel()) * sizeof(float);
    c.partial_w = c.shared ? c.weights : aligned(plain);
    c.partial_b = bias ? aligned(uint64_t(g.cout) * sizeof(float)) : 0;
  }
  return c;
}

// One pass of a call, run piece by piece over its part of the call's
// scratch (`base`): before the pieces, the weights reordered once for all
// of them; each piece; after them, the filter's partial gradients added.
struct PassOnPieces {
  const DnnGeometry& g;
  const flx_conv_desc* d;
  int32_t pass;
  bool bias;
  ConvPieces c;
  char* base = nullptr;

  PassOnPieces(const DnnGeometry& geometry, const flx_conv_desc* desc, int32_t p, bool with_bias)
      : g(geometry), d(desc), pass(p), bias(with_bias), c(conv_pieces(geometry, desc->dtype, p, with_bias)) {}
  bool filter() const { return pass == FLX_CONV_BACKWARD_FILTER; }
  char* at(uint64_t offset) const { return base + offset; }
  uint64_t es() const { return d->dtype == FLX_F32 ? sizeof(float) : 2; }
  char* x_of(flx_mem m, int64_t first) const { return addr(m) + uint64_t(first * g.cin * g.in_numel()) * es(); }
  char* y_of(flx_mem m, int64_t first) const { return addr(m) + uint64_t(first * g.cout * g.out_numel()) * es(); }

  void begin() const {
    if (c.shared && !filter()) reorder_arg(c.first_plan(), c.weights_id, addr(d->w), at(0));
  }

  // Piece k, whose first image is `first`; dy_inner: the piece's dy in
  // the plan's own layout already, or null (the run reorders it).
  void piece(int64_t k, int64_t first, void* dy_inner) const {
    const Planned& p = c.plans.of(k);
    char* const piece_scratch = at(c.scratch_at(k));
    const ArgPtr w{DNNL_ARG_WEIGHTS, c.shared ? at(0) : addr(d->w), c.shared};
    const ArgPtr dy = dy_inner ? ArgPtr{DNNL_ARG_DIFF_DST, dy_inner, true}
                               : ArgPtr{DNNL_ARG_DIFF_DST, d->dy.buf ? y_of(d->dy, first) : nullptr};
    if (pass == FLX_CONV_FORWARD)
      run(p,
          {{DNNL_ARG_SRC, x_of(d->x, first)},
           {DNNL_ARG_DST, y_of(d->y, first)},
           {DNNL_ARG_BIAS, bias ? addr(d->b) : nullptr},
           w},
          piece_scratch);
    else if (pass == FLX_CONV_BACKWARD_DATA)
      run(p, {dy, {DNNL_ARG_DIFF_SRC, x_of(d->dx, first)}, w}, piece_scratch);
    else
      run(p,
          {{DNNL_ARG_SRC, x_of(d->x, first)},
           dy,
           {DNNL_ARG_DIFF_BIAS, bias ? at(c.b_at(k)) : nullptr},
           {DNNL_ARG_DIFF_WEIGHTS, at(c.w_at(k)), c.shared}},
          piece_scratch);
  }

  // The filter's partial gradients added in the pieces' order: in the
  // primitives' layout, then reordered once to flx's, or in flx's.
  void end() const {
    if (!filter()) return;
    auto partial = [&](uint64_t offset) { return reinterpret_cast<const float*>(at(offset)); };
    const int64_t count = c.plans.pieces.count;
    const int64_t plain_w = g.cout * (g.cin / g.groups) * g.kernel_numel();
    float* const sum_w = reinterpret_cast<float*>(c.shared ? at(0) : addr(d->dw));
    add_pieces(sum_w, c.shared ? int64_t(c.partial_w / sizeof(float)) : plain_w, count,
               [&](int64_t k) { return partial(c.w_at(k)); });
    if (c.shared) reorder_arg(c.first_plan(), c.weights_id, addr(d->dw), at(0));
    if (!bias) return;
    auto sum_b = [&](float* db) { add_pieces(db, g.cout, count, [&](int64_t k) { return partial(c.b_at(k)); }); };
    if (d->dtype == FLX_F32) {
      sum_b(reinterpret_cast<float*>(addr(d->db)));
      return;
    }
    std::vector<float> db(size_t(g.cout));  // summed in Float32, rounded once
    sum_b(db.data());
    for (int64_t i = 0; i < g.cout; ++i) {
      if (d->dtype == FLX_BF16) reinterpret_cast<BHalf*>(addr(d->db))[i] = BHalf(db[size_t(i)]);
      else reinterpret_cast<Half*>(addr(d->db))[i] = Half(db[size_t(i)]);
    }
  }
};

// Pass `pass` of d through oneDNN in d's dtype (Float32, or a half type it
// computes natively), piece by piece on flx's pool; false when oneDNN
// refuses a piece's shape (or would emulate the half type).
bool conv_onednn(const DnnGeometry& g, const flx_conv_desc* d, int32_t pass, bool bias) {
  PassOnPieces run_pass(g, d, pass, bias);
  if (run_pass.c.plans.refused) return false;
  Scratch scratch(d->workspace, d->workspace_bytes, run_pass.c.bytes());
  run_pass.base = scratch.at(0);
  run_pass.begin();
  run_pieces(run_pass.c.plans.pieces, [&](int64_t k, int64_t first) { run_pass.piece(k, first, nullptr); });
  run_pass.end();
  return true;
}

// Both backward passes of d (dx, and dw and db) in one run over the
// pieces: each piece's dy is reordered once into the layout both
// primitives read (where they agree on it), and the piece's data pass and
// filter pass run one after the other while it is in cache. The two
// passes' scratch lie one after the other. False as conv_onednn.
bool conv_backward_onednn(const DnnGeometry& g, const flx_conv_desc* d, bool bias) {
  PassOnPieces data(g, d, FLX_CONV_BACKWARD_DATA, false), filter(g, d, FLX_CONV_BACKWARD_FILTER, bias);
  if (data.c.plans.refused || filter.c.plans.refused) return false;
  if (data.c.plans.pieces.count != filter.c.plans.pieces.count) return false;  // never: the same geometry
  Scratch scratch(d->workspace, d->workspace_bytes, data.c.bytes() + filter.c.bytes());
  data.base = scratch.at(0);
  filter.base = scratch.at(data.c.bytes());
  data.begin();
  filter.begin();
  run_pieces(data.c.plans.pieces, [&](int64_t k, int64_t first) {
    const Planned::Arg* a = data.c.plans.of(k).arg(DNNL_ARG_DIFF_DST);
    const Planned::Arg* b = filter.c.plans.of(k).arg(DNNL_ARG_DIFF_DST);
    void* dy_inner = nullptr;
    if (a->reordered && b->reordered && a->inner == b->inner) {
      dy_inner = data.at(data.c.scratch_at(k)) + a->offset;  // the data pass's own buffer for it
      reorder_arg(data.c.plans.of(k), DNNL_ARG_DIFF_DST, data.y_of(d->dy, first), dy_inner);
    }
    data.piece(k, first, dy_inner);
    filter.piece(k, first, dy_inner);
  });
  filter.end();
  return true;
}

// ---- the calls --------------------------------------------------------------------

int conv_pass(const flx_conv_desc* d, int32_t pass);

// A pass of a Float16 or BFloat16 convolution: the Float32 pass on float
// copies (cpu_dnn_halves.cpp), its outputs rounded once.
int conv_halves(const DnnGeometry& g, const flx_conv_desc* d, int32_t pass) {
  const int64_t nx = g.batch * g.cin * g.in_numel(), ny = g.batch * g.cout * g.out_numel();
  const int64_t nw = g.cout * (g.cin / g.groups) * g.kernel_numel();
  HalfBuffers h(d->dtype);
  flx_conv_desc f = *d;
  f.dtype = FLX_F32;
  if (pass == FLX_CONV_FORWARD) {
    f.x = h.in(d->x, nx);
    f.w = h.in(d->w, nw);
    f.b = h.in(d->b, g.cout);
    f.y = h.out(d->y, ny);
  } else if (pass == FLX_CONV_BACKWARD_DATA) {
    f.dy = h.in(d->dy, ny);
    f.w = h.in(d->w, nw);
    f.dx = h.out(d->dx, nx);
  } else {
    f.x = h.in(d->x, nx);
    f.dy = h.in(d->dy, ny);
    f.dw = h.out(d->dw, nw);
    f.db = h.out(d->db, g.cout);
  }
  const int st = conv_pass(&f, pass);
  if (st == FLX_OK) h.finish();
  return st;
}

// One pass of d: checks, then oneDNN for Float32, else the direct loops;
// halves natively in oneDNN where it computes them, else through the
// Float32 pass.
int conv_pass(const flx_conv_desc* d, int32_t pass) {
  const char* call = call_name(pass);
  DnnGeometry g;
  if (int st = conv_geometry(call, d, &g)) return st;
  const bool bias = pass == FLX_CONV_FORWARD ? d->b.buf != nullptr : pass != FLX_CONV_BACKWARD_DATA && d->db.buf;
  switch (pass) {
    case FLX_CONV_FORWARD:
      for (auto [what, m] : {std::pair{"x", d->x}, {"w", d->w}, {"y", d->y}})
        if (int st = need_buffer(call, what, m)) return st;
      break;
    case FLX_CONV_BACKWARD_DATA:
      for (auto [what, m] : {std::pair{"dy", d->dy}, {"w", d->w}, {"dx", d->dx}})
        if (int st = need_buffer(call, what, m)) return st;
      break;
    case FLX_CONV_BACKWARD_FILTER:
      for (auto [what, m] : {std::pair{"x", d->x}, {"dy", d->dy}, {"dw", d->dw}})
        if (int st = need_buffer(call, what, m)) return st;
      break;
    default:  // both backward passes
      for (auto [what, m] : {std::pair{"x", d->x}, {"w", d->w}, {"dy", d->dy}, {"dx", d->dx}, {"dw", d->dw}})
        if (int st = need_buffer(call, what, m)) return st;
      return guarded(call, [&] {
        if ((d->dtype == FLX_F32 || (is_half_dtype(d->dtype) && native_halves_enabled())) &&
            conv_backward_onednn(g, d, bias))
          return int(FLX_OK);
        // each pass on its own, within the workspace asked for both
        if (int st = conv_pass(d, FLX_CONV_BACKWARD_DATA)) return st;
        return conv_pass(d, FLX_CONV_BACKWARD_FILTER);
      });
  }
  if (is_half_dtype(d->dtype))
    return guarded(call, [&] {
      if (native_halves_enabled() && conv_onednn(g, d, pass, bias)) return int(FLX_OK);
      return conv_halves(g, d, pass);
    });
  return guarded(call, [&] {
    if (d->dtype == FLX_F32 && conv_onednn(g, d, pass, bias)) return FLX_OK;
    auto direct = [&](auto tag) {
      using T = decltype(tag);
      auto ptr = [](flx_mem m) { return m.buf ? reinterpret_cast<T*>(addr(m)) : nullptr; };
      if (pass == FLX_CONV_FORWARD)
        direct_conv_forward<T>(g, ptr(d->x), ptr(d->w), ptr(d->b), ptr(d->y));
      else if (pass == FLX_CONV_BACKWARD_DATA)
        direct_conv_backward_data<T>(g, ptr(d->dy), ptr(d->w), ptr(d->dx));
      else
        direct_conv_backward_filter<T>(g, ptr(d->x), ptr(d->dy), ptr(d->dw), ptr(d->db));
    };
    if (d->dtype == FLX_F32)
      direct(float{});
    else
      direct(double{});
    return FLX_OK;
  });
}

}  // namespace

int conv_workspace(void*, int, const flx_conv_desc* d, int32_t pass, uint64_t* bytes) {
  if (!bytes) return fail(FLX_ERR_INVALID_ARGUMENT, "conv_workspace: the output is a null pointer");
  *bytes = 0;
  if (pass < FLX_CONV_FORWARD || pass > FLX_CONV_BACKWARD)
    return fail(FLX_ERR_INVALID_ARGUMENT, "conv_workspace: pass is " + std::to_string(pass) +
                                              ", expected FLX_CONV_FORWARD, FLX_CONV_BACKWARD_DATA, "
                                              "FLX_CONV_BACKWARD_FILTER or FLX_CONV_BACKWARD (0 to 3)");
  DnnGeometry g;
  if (int st = conv_geometry(call_name(pass), d, &g)) return st;
  if (d->dtype != FLX_F32 && !is_half_dtype(d->dtype)) return FLX_OK;  // the direct loops need none
  if (pass == FLX_CONV_BACKWARD) {
    // conv_backward_onednn's: the two passes' scratch one after the other,
    // which also holds either pass alone (its fallback)
    uint64_t data = 0, filter = 0;
    if (int st = conv_workspace(nullptr, 0, d, FLX_CONV_BACKWARD_DATA, &data)) return st;
    if (int st = conv_workspace(nullptr, 0, d, FLX_CONV_BACKWARD_FILTER, &filter)) return st;
    *bytes = data + filter;
    return FLX_OK;
  }
  // backend.h leaves d's memory fields unset here, but libflx's dispatch
  // passes them: the bias's buffer picks the plan the call will use. Where
  // it guessed wrong, the call makes its plan then and, should that plan
  // need more scratch than this one, allocates it itself (Scratch).
  const bool bias =
      (pass == FLX_CONV_FORWARD ? d->b.buf : pass == FLX_CONV_BACKWARD_FILTER ? d->db.buf : nullptr) != nullptr;
  return guarded(call_name(pass), [&]() -> int {
    const bool half = is_half_dtype(d->dtype);
    if (!half || native_halves_enabled()) {
      const ConvPieces c = conv_pieces(g, d->dtype, pass, bias);
      if (!c.plans.refused) {
        *bytes = c.bytes();
        return FLX_OK;
      }
      if (!half) return FLX_OK;  // the direct loops need none
    }
    flx_conv_desc f = *d;  // the Float32 pass's, which conv_halves runs
    f.dtype = FLX_F32;
    return conv_workspace(nullptr, 0, &f, pass, bytes);
  });
}

HalfPath conv_half_path(int32_t dtype) {
  if (!native_halves_enabled()) return {false, "FLX_CPU_NATIVE_HALVES=0"};
  // A typical layer, as conv_pass would plan it: 3x3, 32 => 64 channels,
  // pad 1, with a bias, on a batch of 16 images of 14x14 (flx-train's CNN's
  // second convolution); its three passes must all run natively.
  DnnGeometry g;
  g.nspatial = 2;
  g.batch = 16;
  g.cin = 32;
  g.cout = 64;
  for (int i = 0; i < 2; ++i) {
    g.in[i] = g.out[i] = 14;
    g.kernel[i] = 3;
    g.pad_lo[i] = g.pad_hi[i] = 1;
  }
  std::string how;
  for (int32_t pass : {FLX_CONV_FORWARD, FLX_CONV_BACKWARD_DATA, FLX_CONV_BACKWARD_FILTER}) {
    const ConvPieces c = conv_pieces(g, dtype, pass, true);
    if (c.plans.refused) {
      for (const auto& p : c.plans.plan)
        if (p && p->refused) return {false, p->why};
      return {false, "the pieces of the batch disagree on the filter gradient's layout"};
    }
    const std::string& impl = c.first_plan().impl;
    if (how.find(impl) == std::string::npos) how += (how.empty() ? "" : ", ") + impl;
  }
  return {true, how};
}

int conv_forward(void*, int, const flx_conv_desc* d, flx_stream) { return conv_pass(d, FLX_CONV_FORWARD); }
int conv_backward_data(void*, int, const flx_conv_desc* d, flx_stream) { return conv_pass(d, FLX_CONV_BACKWARD_DATA); }
int conv_backward_filter(void*, int, const flx_conv_desc* d, flx_stream) {
  return conv_pass(d, FLX_CONV_BACKWARD_FILTER);
}
int conv_backward(void*, int, const flx_conv_desc* d, flx_stream) { return conv_pass(d, FLX_CONV_BACKWARD); }

}  // namespace flx::cpu_backend

// Recurrent layers (the dnn table's rnn_*, ABI minor 6): Float32 LSTMs
// through oneDNN's lstm_forward and lstm_backward, the fused RNN that
// PyTorch's nn.LSTM runs on the CPU. flx's layouts are oneDNN's: a sequence
// (features, time, batch) is tnc with strides (oneDNN's ntc), a state
// (hidden, batch) ldnc, Wi (4H, input) ldigo, the bias ldgo, and the gates
// come in the same order (i, f, g, o). As for the other oneDNN paths here (cpu_dnn_engine.cpp),
// every primitive runs on one thread and flx's pool runs pieces of the batch
// (independent sequences) in parallel: a piece reads and writes its columns
// of flx's tensors in place (strided memory descriptors), the weights are
// reordered once into oneDNN's layout for all pieces, and the pieces'
// weight gradients are summed in piece order, so the same inputs give the
// same bits at any thread count. Anything else (Float64, which oneDNN
// lacks; other cells) is FLX_ERR_UNSUPPORTED: libflx then runs the layer
// with the compute table (src/ops/recurrent_scan.cpp).
#include <vector>

#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;
using md = dnnl::memory::desc;
constexpr auto f32 = dnnl::memory::data_type::f32;
constexpr int64_t kGates = 4;

// Pieces of at least this many sequences: each step's products need
// columns to be efficient (oneDNN's LSTM runs as fast per sequence at 4 to
// 16 as at 32 on one core, and slower at 1 or 2).
constexpr int64_t kSequencesPerPiece = 16;
BatchPieces rnn_pieces(int64_t batch) {
  return BatchPieces(batch, kPieceWork, std::max<int64_t>(1, batch / kSequencesPerPiece));
}

// The primitives for a piece of n sequences of a batch of B.
struct RnnPlan {
  dnnl::lstm_forward::primitive_desc fwd_pd;
  dnnl::lstm_forward fwd;
  dnnl::lstm_backward::primitive_desc bwd_pd;  // training plans only
  dnnl::lstm_backward bwd;
  uint64_t workspace = 0;  // bytes of reserve a training forward of the piece writes
};

struct Sizes {
  int64_t input, hidden, batch, time;
};

// Column-major (feature, time, sequence) and (feature, sequence) tensors of
// the whole batch, seen from a piece of n sequences: oneDNN's tnc and ldnc
// with the batch's strides.
md sequence_md(const Sizes& s, int64_t n, int64_t features) {
  return md({s.time, n, features}, f32, {features, features * s.time, 1});
}
md state_md(const Sizes& s, int64_t n) { return md({1, 1, n, s.hidden}, f32, {s.batch * s.hidden, s.batch * s.hidden, s.hidden, 1}); }
md weights_md(int64_t in, int64_t hidden, dnnl::memory::format_tag t) { return md({1, 1, in, kGates, hidden}, f32, t); }
md bias_md(int64_t hidden) { return md({1, 1, kGates, hidden}, f32, tag::ldgo); }

RnnPlan make_plan(const Sizes& s, int64_t n, bool training) {
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  const md x = sequence_md(s, n, s.input), y = sequence_md(s, n, s.hidden), st = state_md(s, n);
  const md wl = weights_md(s.input, s.hidden, tag::any), wi = weights_md(s.hidden, s.hidden, tag::any);
  const md b = bias_md(s.hidden);
  RnnPlan p;
  const dnnl::lstm_forward::desc fd(training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
                                    dir, x, st, st, wl, wi, b, y, st, st);
  p.fwd_pd = dnnl::lstm_forward::primitive_desc(fd, user_scratchpad(), engine());
  p.fwd = dnnl::lstm_forward(p.fwd_pd);
  if (!training) return p;
  p.workspace = aligned(p.fwd_pd.workspace_desc().get_size());
  const dnnl::lstm_backward::desc bd(dnnl::prop_kind::backward, dir, x, st, st, wl, wi, b, y, st, st, x, st, st, wl, wi,
                                     b, y, st, st);
  p.bwd_pd = dnnl::lstm_backward::primitive_desc(bd, user_scratchpad(), engine(), p.fwd_pd);
  p.bwd = dnnl::lstm_backward(p.bwd_pd);
  return p;
}

Cache<RnnPlan>& cache() {
  static Cache<RnnPlan>& c = *new Cache<RnnPlan>(kCacheEntries);  // never destroyed, as the engine
  return c;
}

// A call's plans: for pieces of size shorter + 1 and of size shorter.
struct Plans {
  BatchPieces pieces;
  std::shared_ptr<const RnnPlan> plan[2];
  const RnnPlan& of(int64_t k) const { return *plan[k < pieces.longer ? 0 : 1]; }
  // Where piece k's workspace starts in the reserve (k = count: where the
  // last states follow, which the backward reads too: h_T, then c_T, each
  // (hidden, batch)), and the reserve's size.
  uint64_t workspace_at(int64_t k) const {
    uint64_t at = 0;
    for (int64_t i = 0; i < k; ++i) at += of(i).workspace;
    return at;
  }
  uint64_t reserve_bytes(const Sizes& s) const {
    return workspace_at(pieces.count) + 2 * aligned(uint64_t(s.hidden * s.batch) * sizeof(float));
  }
  // The reserve's room for h_T (slot 0) and c_T (slot 1).
  char* last_state(const flx_rnn_desc& d, const Sizes& s, int slot) const {
    return addr(d.reserve) + workspace_at(pieces.count) + uint64_t(slot) * aligned(uint64_t(s.hidden * s.batch) * sizeof(float));
  }
};

Plans plans_for(const Sizes& s, bool training) {
  Plans p{rnn_pieces(s.batch), {}};
  use_threads(1);
  for (int i = 0; i < 2; ++i) {
    const int64_t n = p.pieces.shorter + (i == 0 ? 1 : 0);
    if (n == 0 || (i == 0 && p.pieces.longer == 0)) continue;
    Key key("lstm");
    key.add(training).add(s.input).add(s.hidden).add(s.batch).add(s.time).add(n);
    p.plan[i] = cache().get(key, [&] { return make_plan(s, n, training); });
  }
  return p;
}

// The descriptor checked: FLX_OK with its sizes, FLX_ERR_UNSUPPORTED for
// what this backend leaves to libflx, FLX_ERR_INVALID_ARGUMENT otherwise.
int check_rnn(const char* call, const flx_rnn_desc* d, Sizes* s) {
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": the descriptor is a null pointer");
  if (d->struct_size < sizeof(flx_rnn_desc))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": struct_size is " + std::to_string(d->struct_size) +
                                              ", expected at least sizeof(flx_rnn_desc) = " +
                                              std::to_string(sizeof(flx_rnn_desc)));
  if (d->input < 1 || d->hidden < 1 || d->batch < 1 || d->time < 1)
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": input, hidden, batch and time must be >= 1; got " +
                                              std::to_string(d->input) + ", " + std::to_string(d->hidden) + ", " +
                                              std::to_string(d->batch) + ", " + std::to_string(d->time));
  if (d->cell != FLX_RNN_LSTM)
    return fail(FLX_ERR_UNSUPPORTED, std::string(call) + ": the CPU backend runs LSTMs only through oneDNN (cell " +
                                         std::to_string(d->cell) + ")");
  if (d->dtype != FLX_F32)
    return fail(FLX_ERR_UNSUPPORTED, std::string(call) + ": oneDNN's LSTM runs in Float32 only (dtype " +
                                         std::to_string(d->dtype) + ")");
  *s = {d->input, d->hidden, d->batch, d->time};
  return FLX_OK;
}

// flx's Wi and Wh in oneDNN's terms: ldigo.
md plain_layer(const Sizes& s) { return weights_md(s.input, s.hidden, tag::ldigo); }
md plain_iter(const Sizes& s) { return weights_md(s.hidden, s.hidden, tag::ldigo); }

// The weights as a plan (the forward's or the backward's) reads them: flx's
// own where the plan's layout is flx's (the forward's ldigo, where oneDNN
// leaves its rows unpadded: 4H a multiple of 16 floats and not of 256),
// else reordered once for all its pieces into `at` (the layer's, then the
// iteration's), the two reorders side by side on flx's pool, oneDNN on one
// thread in each.
struct WeightPtrs {
  char *layer, *iter;
};
WeightPtrs plan_weights(const md& layer_inner, const md& iter_inner, const Sizes& s, const flx_rnn_desc& d, char* at) {
  const md plain[2] = {plain_layer(s), plain_iter(s)}, inner[2] = {layer_inner, iter_inner};
  char* const user[2] = {addr(d.wi), addr(d.wh)};
  char* const own[2] = {at, at + aligned(layer_inner.get_size())};
  const bool same[2] = {inner[0] == plain[0], inner[1] == plain[1]};
  if (!same[0] || !same[1])
    run_pieces(BatchPieces(2, kPieceWork, 2), [&](int64_t k, int64_t) {
      if (same[k]) return;
      dnnl::stream& str = stream();
      dnnl::memory u = wrap(plain[k], user[k]), o = wrap(inner[k], own[k]);
      dnnl::reorder(u, o).execute(str, u, o);
      str.wait();
    });
  return {same[0] ? user[0] : own[0], same[1] ? user[1] : own[1]};
}
uint64_t weights_bytes(const md& layer, const md& iter) { return aligned(layer.get_size()) + aligned(iter.get_size()); }

// Host scratch laid out by hand: parts appended, each 64-byte aligned.
struct Layout {
  uint64_t size = 0;
  uint64_t add(uint64_t bytes) {
    const uint64_t at = size;
    size += aligned(bytes);
    return at;
  }
};

int forward(const flx_rnn_desc& d, const Sizes& s) {
  const bool training = d.training != 0;
  const Plans p = plans_for(s, training);
  const uint64_t H = uint64_t(s.hidden), C = uint64_t(s.input), T = uint64_t(s.time), fl = sizeof(float);
  // Scratch: the zero bias when there is none; per plan its weights; per
  // piece its scratchpad and, where not wanted, the last states.
  Layout lay;
  const uint64_t bias_at = d.b.buf ? 0 : lay.add(kGates * H * fl);
  uint64_t weights_at[2]{}, piece_at[kMaxPieces]{};
  for (int i = 0; i < 2; ++i)
    if (p.plan[i]) weights_at[i] = lay.add(weights_bytes(p.plan[i]->fwd_pd.weights_layer_desc(),
                                                         p.plan[i]->fwd_pd.weights_iter_desc()));
  for (int64_t k = 0; k < p.pieces.count; ++k)
    piece_at[k] = lay.add(p.of(k).fwd_pd.scratchpad_desc().get_size() + 2 * aligned(H * uint64_t(s.batch) * fl));
  Scratch scratch({}, 0, lay.size);
  if (!d.b.buf) std::memset(scratch.at(bias_at), 0, kGates * H * fl);
  WeightPtrs w[2]{};
  for (int i = 0; i < 2; ++i)
    if (p.plan[i])
      w[i] = plan_weights(p.plan[i]->fwd_pd.weights_layer_desc(), p.plan[i]->fwd_pd.weights_iter_desc(), s, d,
                          scratch.at(weights_at[i]));
  run_pieces(p.pieces, [&](int64_t k, int64_t first) {
    const RnnPlan& plan = p.of(k);
    const int i = k < p.pieces.longer ? 0 : 1;
    const int64_t n = p.pieces.shorter + (i == 0 ? 1 : 0);
    const uint64_t b0 = uint64_t(first);
    char* piece = scratch.at(piece_at[k]);
    const md pad = plan.fwd_pd.scratchpad_desc(), x = sequence_md(s, n, s.input), y = sequence_md(s, n, s.hidden);
    const md st = state_md(s, n);
    // Last states not wanted: kept in the reserve for the backward when
    // training, else in room of the piece's own (in the batch's strides).
    char* spare = piece + aligned(pad.get_size());
    if (training) spare = p.last_state(d, s, 0);
    auto state = [&](flx_mem m, char* own) { return wrap(st, (m.buf ? addr(m) : own) + b0 * H * fl); };
    const md wl = plan.fwd_pd.weights_layer_desc(), wi = plan.fwd_pd.weights_iter_desc();
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC_LAYER, wrap(x, addr(d.x) + b0 * C * T * fl)},
        {DNNL_ARG_SRC_ITER, state(d.h0, nullptr)},
        {DNNL_ARG_SRC_ITER_C, state(d.c0, nullptr)},
        {DNNL_ARG_WEIGHTS_LAYER, wrap(wl, w[i].layer)},
        {DNNL_ARG_WEIGHTS_ITER, wrap(wi, w[i].iter)},
        {DNNL_ARG_BIAS, wrap(bias_md(s.hidden), d.b.buf ? addr(d.b) : scratch.at(bias_at))},
        {DNNL_ARG_DST_LAYER, wrap(y, addr(d.y) + b0 * H * T * fl)},
        {DNNL_ARG_DST_ITER, state(d.hn, spare)},
        {DNNL_ARG_DST_ITER_C, state(d.cn, training ? p.last_state(d, s, 1) : spare + aligned(H * uint64_t(s.batch) * fl))},
        {DNNL_ARG_SCRATCHPAD, wrap(pad, piece)}};
    if (training) args.emplace(DNNL_ARG_WORKSPACE, wrap(plan.fwd_pd.workspace_desc(), addr(d.reserve) + p.workspace_at(k)));
    dnnl::stream& str = stream();
    plan.fwd.execute(str, args);
    str.wait();
  });
  return FLX_OK;
}

int backward(const flx_rnn_desc& d, const Sizes& s) {
  const Plans p = plans_for(s, true);
  const uint64_t H = uint64_t(s.hidden), C = uint64_t(s.input), B = uint64_t(s.batch), T = uint64_t(s.time);
  const uint64_t fl = sizeof(float), gates = kGates * H;
  const uint64_t wl_numel = C * gates, wi_numel = H * gates;
  // Scratch: per plan the weights in the backward's layout; per piece its
  // scratchpad, its weight and bias gradients (summed after), and room for
  // what the caller does not want (dx, dh0, dc0) or does not give (dhn, dcn: zero).
  Layout lay;
  const uint64_t bias_at = d.b.buf ? 0 : lay.add(gates * fl);
  uint64_t weights_at[2]{};
  for (int i = 0; i < 2; ++i)
    if (p.plan[i]) weights_at[i] = lay.add(weights_bytes(p.plan[i]->bwd_pd.weights_layer_desc(),
                                                         p.plan[i]->bwd_pd.weights_iter_desc()));
  // A weight gradient of a piece: oneDNN's (in its layout, at `inner`)
  // and, where that layout is not flx's, the same in flx's (at `plain`),
  // which is what the pieces' sum adds up. Alone and in flx's layout, it is
  // the caller's output itself.
  struct Grad {
    bool flx_layout;
    uint64_t inner, plain;
    uint64_t summed() const { return flx_layout ? inner : plain; }
  };
  struct PieceParts {
    uint64_t pad, db, spare;
    Grad dwl, dwi;
  };
  std::vector<PieceParts> parts(size_t(p.pieces.count));
  const uint64_t spare_bytes = aligned(T * B * C * fl) + 4 * aligned(B * H * fl);
  const bool alone = p.pieces.count == 1;
  auto grad = [&](const md& inner, const md& plain, uint64_t numel, flx_mem out) {
    Grad g{inner == plain, 0, 0};
    if (!(alone && g.flx_layout && out.buf)) g.inner = lay.add(inner.get_size());
    if (!alone && !g.flx_layout) g.plain = lay.add(numel * fl);
    return g;
  };
  for (int64_t k = 0; k < p.pieces.count; ++k) {
    const RnnPlan& plan = p.of(k);
    PieceParts& q = parts[size_t(k)];
    q.pad = lay.add(plan.bwd_pd.scratchpad_desc().get_size());
    q.dwl = grad(plan.bwd_pd.diff_weights_layer_desc(), plain_layer(s), wl_numel, d.dwi);
    q.dwi = grad(plan.bwd_pd.diff_weights_iter_desc(), plain_iter(s), wi_numel, d.dwh);
    q.db = lay.add(gates * fl);
    q.spare = lay.add(spare_bytes);
  }
  Scratch scratch({}, 0, lay.size);
  if (!d.b.buf) std::memset(scratch.at(bias_at), 0, gates * fl);
  WeightPtrs w[2]{};
  for (int i = 0; i < 2; ++i)
    if (p.plan[i])
      w[i] = plan_weights(p.plan[i]->bwd_pd.weights_layer_desc(), p.plan[i]->bwd_pd.weights_iter_desc(), s, d,
                          scratch.at(weights_at[i]));
  run_pieces(p.pieces, [&](int64_t k, int64_t first) {
    const RnnPlan& plan = p.of(k);
    const int i = k < p.pieces.longer ? 0 : 1;
    const int64_t n = p.pieces.shorter + (i == 0 ? 1 : 0);
    const uint64_t b0 = uint64_t(first);
    const PieceParts& q = parts[size_t(k)];
    const auto& pd = plan.bwd_pd;
    const md x = sequence_md(s, n, s.input), y = sequence_md(s, n, s.hidden), st = state_md(s, n);
    const md last({1, 1, n, s.hidden}, f32, {s.batch * s.hidden * s.time, s.batch * s.hidden * s.time,
                                              s.hidden * s.time, 1});  // y's last step, as a state
    char* spare = scratch.at(q.spare);
    char* spare_states = spare + aligned(T * B * C * fl);
    // Unwanted outputs go to the spare room; missing gradients of the last
    // states are zero there (in the batch's strides, as the caller's would be).
    auto state_in = [&](flx_mem m) { return wrap(st, addr(m) + b0 * H * fl); };
    auto state_out = [&](flx_mem m, int slot) {
      return wrap(st, (m.buf ? addr(m) : spare_states + uint64_t(slot) * aligned(B * H * fl)) + b0 * H * fl);
    };
    auto zero_state = [&](flx_mem m, int slot) {
      if (m.buf) return state_in(m);
      char* z = spare_states + uint64_t(slot) * aligned(B * H * fl);
      std::memset(z, 0, B * H * fl);  // each piece clears its own (whole-batch) slot: no sharing
      return wrap(st, z + b0 * H * fl);
    };
    const md wl = pd.weights_layer_desc(), wi = pd.weights_iter_desc();
    const md dwl = pd.diff_weights_layer_desc(), dwi = pd.diff_weights_iter_desc();
    // where oneDNN writes a weight gradient: the caller's output (alone, in
    // flx's layout, and wanted) or the piece's own
    auto target = [&](const Grad& g, flx_mem out) {
      return alone && g.flx_layout && out.buf ? addr(out) : scratch.at(g.inner);
    };
    char* const dwl_at = target(q.dwl, d.dwi);
    char* const dwi_at = target(q.dwi, d.dwh);
    std::memset(dwl_at, 0, dwl.get_size());  // oneDNN adds the gradients onto these
    std::memset(dwi_at, 0, dwi.get_size());
    std::memset(scratch.at(q.db), 0, gates * fl);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC_LAYER, wrap(x, addr(d.x) + b0 * C * T * fl)},
        {DNNL_ARG_SRC_ITER, state_in(d.h0)},
        {DNNL_ARG_SRC_ITER_C, state_in(d.c0)},
        {DNNL_ARG_WEIGHTS_LAYER, wrap(wl, w[i].layer)},
        {DNNL_ARG_WEIGHTS_ITER, wrap(wi, w[i].iter)},
        {DNNL_ARG_BIAS, wrap(bias_md(s.hidden), d.b.buf ? addr(d.b) : scratch.at(bias_at))},
        {DNNL_ARG_DST_LAYER, wrap(y, addr(d.y) + b0 * H * T * fl)},
        {DNNL_ARG_DST_ITER, wrap(last, addr(d.y) + ((T - 1) + b0 * T) * H * fl)},  // h_T: y's last step
        {DNNL_ARG_DST_ITER_C, wrap(st, (d.cn.buf ? addr(d.cn) : p.last_state(d, s, 1)) + b0 * H * fl)},
        {DNNL_ARG_WORKSPACE, wrap(pd.workspace_desc(), addr(d.reserve) + p.workspace_at(k))},
        {DNNL_ARG_DIFF_SRC_LAYER, wrap(x, (d.dx.buf ? addr(d.dx) : spare) + b0 * C * T * fl)},
        {DNNL_ARG_DIFF_SRC_ITER, state_out(d.dh0, 2)},
        {DNNL_ARG_DIFF_SRC_ITER_C, state_out(d.dc0, 3)},
        {DNNL_ARG_DIFF_WEIGHTS_LAYER, wrap(dwl, dwl_at)},
        {DNNL_ARG_DIFF_WEIGHTS_ITER, wrap(dwi, dwi_at)},
        {DNNL_ARG_DIFF_BIAS, wrap(bias_md(s.hidden), scratch.at(q.db))},
        {DNNL_ARG_DIFF_DST_LAYER, wrap(y, addr(d.dy) + b0 * H * T * fl)},
        {DNNL_ARG_DIFF_DST_ITER, zero_state(d.dhn, 0)},
        {DNNL_ARG_DIFF_DST_ITER_C, zero_state(d.dcn, 1)},
        {DNNL_ARG_SCRATCHPAD, wrap(pd.scratchpad_desc(), scratch.at(q.pad))}};
    dnnl::stream& str = stream();
    plan.bwd.execute(str, args);
    // The weight gradients not in flx's layout reordered to it, still on
    // the piece's thread: into the caller's when this is the only piece,
    // else into the piece's own, summed below.
    auto to_plain = [&](const md& inner, const Grad& g, flx_mem out, const md& plain) {
      if (g.flx_layout) return;
      char* to = !alone ? scratch.at(g.plain) : out.buf ? addr(out) : nullptr;
      if (!to) return;
      dnnl::memory src = wrap(inner, scratch.at(g.inner)), dst = wrap(plain, to);
      dnnl::reorder(src, dst).execute(str, src, dst);
    };
    to_plain(dwl, q.dwl, d.dwi, plain_layer(s));
    to_plain(dwi, q.dwi, d.dwh, plain_iter(s));
    str.wait();
  });
  // Several pieces: their parameter gradients summed in piece order, each
  // element's sum the same at any thread count.
  auto sum_pieces = [&](flx_mem out, uint64_t numel, auto offset_of) {
    if (!out.buf) return;
    add_pieces(reinterpret_cast<float*>(addr(out)), int64_t(numel), int64_t(parts.size()), [&](int64_t k) {
      return reinterpret_cast<const float*>(scratch.at(offset_of(parts[size_t(k)])));
    });
  };
  if (!alone) {
    sum_pieces(d.dwi, wl_numel, [](const PieceParts& q) { return q.dwl.summed(); });
    sum_pieces(d.dwh, wi_numel, [](const PieceParts& q) { return q.dwi.summed(); });
  }
  sum_pieces(d.db, gates, [](const PieceParts& q) { return q.db; });  // flx's layout already
  return FLX_OK;
}

}  // namespace

int rnn_reserve_size(void*, int, const flx_rnn_desc* d, uint64_t* bytes) {
  const char* call = "rnn_reserve_size";
  if (!bytes) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": the output is a null pointer");
  Sizes s;
  if (int st = check_rnn(call, d, &s)) return st;
  return guarded(call, [&] {
    *bytes = plans_for(s, true).reserve_bytes(s);
    return FLX_OK;
  });
}

int rnn_forward(void*, int, const flx_rnn_desc* d, flx_stream) {
  const char* call = "rnn_forward";
  Sizes s;
  if (int st = check_rnn(call, d, &s)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"h0", d->h0}, {"c0", d->c0}, {"wi", d->wi}, {"wh", d->wh}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  if (d->training && !d->reserve.buf) return need_buffer(call, "reserve (a training forward's)", d->reserve);
  return guarded(call, [&] { return forward(*d, s); });
}

int rnn_backward(void*, int, const flx_rnn_desc* d, flx_stream) {
  const char* call = "rnn_backward";
  Sizes s;
  if (int st = check_rnn(call, d, &s)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"h0", d->h0}, {"c0", d->c0}, {"wi", d->wi}, {"wh", d->wh},
                         {"y", d->y}, {"dy", d->dy}, {"reserve", d->reserve}})
    if (int st = need_buffer(call, what, m)) return st;
  return guarded(call, [&] { return backward(*d, s); });
}

}  // namespace flx::cpu_backend

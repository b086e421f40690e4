// RNN, LSTM and GRU over a whole sequence as one recorded op
// (recurrent_scan.hpp), built of the compute table's gemm, map and copies.
//
// Layout. The op takes and gives sequences in flx's layout, (features,
// time, batch); inside, everything is time last, so that each step's slice
// is contiguous (one permute in, one out): x (in, B, T); the gate
// pre-activations GX (k·H, B, T), in which the input
// projection of every step is one GEMM and each step's recurrent GEMM
// accumulates in place (beta = 1); the hidden states Z (H, B, T). A map
// kernel writes a contiguous output but reads each operand through its own
// strides, so a step reads gate k of GX in place (offset k·H, column stride
// k·H) and writes each activated gate to its own contiguous block (ACT:
// (H, B, k, T)). The backward pass runs transposed, (B, H): there a step's
// gate gradients, each written contiguous, together form the (B, k·H)
// matrix the recurrent GEMM takes, so dh = dG Wh is one product. After the
// loop one copy turns them back to (k·H, B, T) for the parameter gradients,
// each one GEMM over all steps.
#include "recurrent_scan.hpp"

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/scratch.hpp"
#include "backend_common/env_switch.hpp"

namespace flx::ops {
namespace {

// FLX_RECURRENT_FUSED=0 runs the layers' cells step by step instead (to
// compare, or to rule this op out when hunting a bug); read once.
bool fused_enabled() {
  static const bool on = backend_common::env_switch("FLX_RECURRENT_FUSED", true);
  return on;
}

// FLX_RECURRENT_LIBRARY=0 runs recurrent layers with these kernels even where
// the backend has its own (the dnn table's rnn_*), to compare them; read once.
bool library_enabled() {
  static const bool on = backend_common::env_switch("FLX_RECURRENT_LIBRARY", true);
  return on;
}

// A map operand: memory read through strides (in elements) per dim of the
// map's shape, or a scalar.
struct Operand {
  flx_mem mem{};
  std::array<int64_t, 3> strides{};
  bool is_scalar = false;
  double scalar = 0;
};

// The raw calls of one op: one device, one element type.
class Kernels {
 public:
  explicit Kernels(const Tensor& like)
      : be_(&detail::be(like)), dev_(detail::dev(like)), device_(like.device()), t_(like.dtype()),
        size_(int64_t(dtype_size(like.dtype()))) {}

  DType dtype() const { return t_; }
  Tensor buffer(const Shape& s) const { return empty(t_, s, device_); }
  // The memory `elements` into m or into t.
  flx_mem at(flx_mem m, int64_t elements) const {
    m.offset += uint64_t(elements * size_);
    return m;
  }
  flx_mem at(const Tensor& t, int64_t elements = 0) const { return at(detail::mem(t), elements); }

  // out, contiguous of `shape`, = op(ins...).
  void map(int op, std::initializer_list<int64_t> shape, flx_mem out, std::initializer_list<Operand> ins) const {
    flx_map_desc d{};
    d.op = op;
    d.ninputs = int32_t(ins.size());
    d.in_dtype = d.out_dtype = int32_t(t_);
    d.ndim = int32_t(shape.size());
    int64_t numel = 1;
    int k = 0;
    for (int64_t e : shape) {
      d.shape[k++] = e;
      numel *= e;
    }
    int i = 0;
    for (const Operand& o : ins) {
      flx_operand& to = d.in[i++];
      to.mem = o.mem;
      to.is_scalar = o.is_scalar;
      to.scalar = o.scalar;
      for (int j = 0; j < d.ndim; ++j) to.strides[j] = o.is_scalar ? 0 : o.strides[size_t(j)];
    }
    d.out = out;
    if (numel) be_->map(dev_, d);
  }
  // C (m×n, leading dim ldc) = op(A) op(B) + beta C, column-major.
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, flx_mem a, int64_t lda, flx_mem b, int64_t ldb,
            double beta, flx_mem c, int64_t ldc) const {
    if (m == 0 || n == 0) return;
    flx_gemm_desc d{};
    d.dtype = int32_t(t_);
    d.trans_a = ta;
    d.trans_b = tb;
    d.m = m;
    d.n = n;
    d.k = k;
    d.alpha = 1;
    d.beta = beta;
    d.a = a;
    d.b = b;
    d.c = c;
    d.lda = lda;
    d.ldb = ldb;
    d.ldc = ldc;
    d.batch = 1;
    be_->gemm(dev_, d);
  }
  void copy(flx_mem dst, flx_mem src, int64_t elements) const {
    if (elements) be_->copy_d2d(dev_, dst, src, size_t(elements * size_));
  }
  // dst = src, of dims (a, b, c) contiguous, with its last two dims swapped:
  // (a, c, b), contiguous.
  void swap_last_dims(flx_mem src, int64_t a, int64_t b, int64_t c, flx_mem dst) const {
    if (a * b * c == 0) return;
    const int64_t shape[3] = {a, b, c};
    const int32_t perm[3] = {0, 2, 1};
    be_->permute(dev_, detail::permute_desc(int32_t(t_), 3, shape, perm, src, dst));
  }
  void fill(flx_mem dst, int64_t elements, double v) const {
    if (elements) be_->fill(dev_, dst, t_, size_t(elements), v);
  }

 private:
  const detail::Backend* be_;
  int dev_;
  Device device_;
  DType t_;
  int64_t size_;
};

// Operands: a contiguous block; a column-major matrix with leading dim ld
// (dims rows, cols); the same read transposed (dims cols, rows); a scalar.
Operand flat(flx_mem m) { return {m, {1, 0, 0}}; }
Operand matrix(flx_mem m, int64_t ld) { return {m, {1, ld, 0}}; }
Operand transposed(flx_mem m, int64_t ld) { return {m, {ld, 1, 0}}; }
Operand scalar(double v) { return {{}, {}, true, v}; }

int act_op(RecurrentAct a) {
  switch (a) {
    case RecurrentAct::Tanh: return FLX_OP_TANH;
    case RecurrentAct::Relu: return FLX_OP_RELU;
    case RecurrentAct::Sigmoid: return FLX_OP_SIGMOID;
    case RecurrentAct::Identity: break;
  }
  return FLX_OP_COPY;
}
// g · act'(pre) from the output y = act(pre) and g (relu: y > 0 exactly where pre > 0).
int act_grad_op(RecurrentAct a) {
  switch (a) {
    case RecurrentAct::Tanh: return FLX_OP_TANH_GRAD;
    case RecurrentAct::Relu: return FLX_OP_RELU_GRAD;
    case RecurrentAct::Sigmoid: return FLX_OP_SIGMOID_GRAD;
    case RecurrentAct::Identity: break;
  }
  return FLX_OP_NONE;
}

const char* op_name(RecurrentKind kind) {
  return kind == RecurrentKind::LSTM ? "LSTM" : kind == RecurrentKind::GRU ? "GRU" : "RNN";
}

// The sizes of one call.
struct Dims {
  int64_t in, H, B, T, k;  // k gates
  int64_t hb() const { return H * B; }
};

// GX (k·H, B, T) = Wi x .+ b: the bias broadcast first, the product added onto it.
Tensor input_projection(const Kernels& K, const Dims& d, const Tensor& x, const Tensor& wi, const Tensor& b) {
  const int64_t rows = d.k * d.H, cols = d.B * d.T;
  Tensor gx = K.buffer({rows, d.B, d.T});
  if (b.defined()) K.map(FLX_OP_COPY, {rows, cols}, K.at(gx), {matrix(K.at(b), 0)});
  K.gemm(false, false, rows, cols, d.in, K.at(wi), rows, K.at(x), d.in, b.defined() ? 1 : 0, K.at(gx), rows);
  return gx;
}

// The previous step's hidden state: h0 at step 0, else Z's slot t - 1.
flx_mem previous(const Kernels& K, const Dims& d, const Tensor& z, const Tensor& h0, int64_t t) {
  return t == 0 ? K.at(h0) : K.at(z, (t - 1) * d.hb());
}

// (H, B) of a contiguous (B, H) block: the transpose back.
Tensor untranspose(const Kernels& K, const Dims& d, flx_mem bh) {
  Tensor out = K.buffer({d.H, d.B});
  K.map(FLX_OP_COPY, {d.H, d.B}, K.at(out), {transposed(bh, d.B)});
  return out;
}

// (rows, B, T) from (B, rows, T) blocks: the gradients back to time-last order.
Tensor untranspose_steps(const Kernels& K, const Dims& d, const Tensor& g, int64_t rows) {
  Tensor out = K.buffer({rows, d.B, d.T});
  K.map(FLX_OP_COPY, {rows, d.B, d.T}, K.at(out), {{K.at(g), {d.B, 1, rows * d.B}}});
  return out;
}

Tensor row_sums(const Tensor& g) {  // (rows, B, T) -> (rows)
  return reshape(raw_reduce(FLX_REDUCE_SUM, g, 0b110), {g.shape()[0]});
}

// C (m × H, leading dim ldc) = the gradient of m rows of Wh: the rows' gate
// gradients A (m × B·T, leading dim lda) times the states they multiplied,
// h_{t-1}: h0 for step 0, Z's slots 0..T-2 for the rest.
void hidden_weight_grad(const Kernels& K, const Dims& d, flx_mem a, int64_t lda, int64_t m, const Tensor& z,
                        const Tensor& h0, flx_mem c, int64_t ldc) {
  const int64_t rest = d.B * (d.T - 1);
  if (rest) K.gemm(false, true, m, d.H, rest, K.at(a, d.B * lda), lda, K.at(z), d.H, 0, c, ldc);
  K.gemm(false, true, m, d.H, d.B, a, lda, K.at(h0), d.H, rest ? 1 : 0, c, ldc);
}

// The gradients every kind shares, from the input-side gate gradients DG
// (k·H, B, T): x, Wi and the bias; out[] is the rule's gi.
void input_side_grads(const Kernels& K, const Dims& d, const Tensor& dg, const Tensor& x, const Tensor& wi,
                      const bool* need, Tensor* gi) {
  const int64_t rows = d.k * d.H, cols = d.B * d.T;
  if (need[0]) {
    gi[0] = K.buffer({d.in, d.B, d.T});
    K.gemm(true, false, d.in, cols, rows, K.at(wi), rows, K.at(dg), rows, 0, K.at(gi[0]), d.in);
  }
  if (need[1]) {
    gi[1] = K.buffer({rows, d.in});
    K.gemm(false, true, rows, d.in, cols, K.at(dg), rows, K.at(x), d.in, 0, K.at(gi[1]), rows);
  }
  if (need[3]) gi[3] = row_sums(dg);
}

// ---- RNN -------------------------------------------------------------------------

Tensor rnn_forward(const Kernels& K, const Dims& d, RecurrentAct act, const Tensor& gx, const Tensor& wh,
                   const Tensor& h0) {
  Tensor z = K.buffer({d.H, d.B, d.T});
  for (int64_t t = 0; t < d.T; ++t) {
    const flx_mem pre = K.at(gx, t * d.hb());
    K.gemm(false, false, d.H, d.B, d.H, K.at(wh), d.H, previous(K, d, z, h0, t), d.H, 1, pre, d.H);
    K.map(act_op(act), {d.hb()}, K.at(z, t * d.hb()), {flat(pre)});
  }
  return z;
}

void rnn_backward(const Kernels& K, const Dims& d, RecurrentAct act, const Tensor& dz, flx_mem dh_last,
                  const Tensor& z, const Tensor& x, const Tensor& wi, const Tensor& wh, const Tensor& h0,
                  const bool* need, Tensor* gi) {
  const int64_t hb = d.hb();
  Tensor da = K.buffer({d.H, d.B, d.T}), dh = K.buffer({d.H, d.B}), dh_rec = K.buffer({d.H, d.B});
  for (int64_t t = d.T - 1; t >= 0; --t) {
    flx_mem g = K.at(dz, t * hb);
    const flx_mem other = t < d.T - 1 ? K.at(dh_rec) : dh_last;  // the next step's, or the last state's
    if (other.buf) {
      K.map(FLX_OP_ADD, {hb}, K.at(dh), {flat(g), flat(other)});
      g = K.at(dh);
    }
    const flx_mem dpre = K.at(da, t * hb);
    if (act == RecurrentAct::Identity) K.copy(dpre, g, hb);
    else K.map(act_grad_op(act), {hb}, dpre, {flat(K.at(z, t * hb)), flat(g)});
    if (t > 0 || need[5]) K.gemm(true, false, d.H, d.B, d.H, K.at(wh), d.H, dpre, d.H, 0, K.at(dh_rec), d.H);
  }
  input_side_grads(K, d, da, x, wi, need, gi);
  if (need[2]) {
    gi[2] = K.buffer({d.H, d.H});
    hidden_weight_grad(K, d, K.at(da), d.H, d.H, z, h0, K.at(gi[2]), d.H);
  }
  if (need[5]) gi[5] = dh_rec;
}

// ---- LSTM ------------------------------------------------------------------------
// Gates i, f, g, o. Saved for the backward pass: the activated gates ACT
// (H, B, 4, T), the cell states CS and their tanh TC (H, B, T).

struct LstmSaved {
  Tensor act, cs, tc;
};

Tensor lstm_forward(const Kernels& K, const Dims& d, const Tensor& gx, const Tensor& wh, const Tensor& h0,
                    const Tensor& c0, LstmSaved* s) {
  const int64_t H = d.H, hb = d.hb(), ld = 4 * H;
  s->act = K.buffer({H, d.B, 4, d.T});
  s->cs = K.buffer({H, d.B, d.T});
  s->tc = K.buffer({H, d.B, d.T});
  Tensor z = K.buffer({H, d.B, d.T + 1}), u = K.buffer({H, d.B}), v = K.buffer({H, d.B});
  for (int64_t t = 0; t < d.T; ++t) {
    const flx_mem g = K.at(gx, t * 4 * hb), a = K.at(s->act, t * 4 * hb);
    const flx_mem c_prev = t == 0 ? K.at(c0) : K.at(s->cs, (t - 1) * hb);
    const flx_mem c = K.at(s->cs, t * hb), tc = K.at(s->tc, t * hb);
    K.gemm(false, false, ld, d.B, H, K.at(wh), ld, previous(K, d, z, h0, t), H, 1, g, ld);
    // σ(i) and σ(f) in one map: the two gate blocks of each column in turn.
    K.map(FLX_OP_SIGMOID, {H, d.B, 2}, a, {{g, {1, ld, H}}});
    K.map(FLX_OP_TANH, {H, d.B}, K.at(a, 2 * hb), {matrix(K.at(g, 2 * H), ld)});
    K.map(FLX_OP_SIGMOID, {H, d.B}, K.at(a, 3 * hb), {matrix(K.at(g, 3 * H), ld)});
    K.map(FLX_OP_MUL, {hb}, K.at(u), {flat(a), flat(K.at(a, 2 * hb))});  // σ(i) tanh(g)
    K.map(FLX_OP_MUL, {hb}, K.at(v), {flat(K.at(a, hb)), flat(c_prev)});  // σ(f) c
    K.map(FLX_OP_ADD, {hb}, c, {flat(K.at(u)), flat(K.at(v))});
    K.map(FLX_OP_TANH, {hb}, tc, {flat(c)});
    K.map(FLX_OP_MUL, {hb}, K.at(z, t * hb), {flat(K.at(a, 3 * hb)), flat(tc)});  // h = σ(o) tanh(c)
  }
  K.copy(K.at(z, d.T * hb), K.at(s->cs, (d.T - 1) * hb), hb);
  return z;
}

void lstm_backward(const Kernels& K, const Dims& d, const Tensor& dz, flx_mem dh_last, const Tensor& z,
                   const LstmSaved& s,
                   const Tensor& x, const Tensor& wi, const Tensor& wh, const Tensor& h0, const Tensor& c0,
                   const bool* need, Tensor* gi) {
  const int64_t H = d.H, B = d.B, hb = d.hb();
  const std::initializer_list<int64_t> bh_shape = {B, H};
  auto tr = [&](flx_mem m) { return transposed(m, H); };  // an (H, B) block read as (B, H)
  auto block = [&](flx_mem m) { return matrix(m, B); };      // a contiguous (B, H) block
  Tensor dg = K.buffer({B, 4 * H, d.T});                  // step t: the (B, 4H) matrix [di df dg do]
  Tensor dh = K.buffer({B, H}), dh_rec = K.buffer({B, H}), t1 = K.buffer({B, H}), t2 = K.buffer({B, H});
  Tensor dc[2] = {K.buffer({B, H}), K.buffer({B, H})};
  int cur = 0;
  K.map(FLX_OP_COPY, bh_shape, K.at(dc[cur]), {tr(K.at(dz, d.T * hb))});  // from c_T's cotangent
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const flx_mem a = K.at(s.act, t * 4 * hb), step = K.at(dg, t * 4 * hb);
    const Operand ai = tr(a), af = tr(K.at(a, hb)), ag = tr(K.at(a, 2 * hb)), ao = tr(K.at(a, 3 * hb));
    const Operand tc = tr(K.at(s.tc, t * hb)), c_prev = tr(t == 0 ? K.at(c0) : K.at(s.cs, (t - 1) * hb));
    const Operand dy = tr(K.at(dz, t * hb));
    if (t < d.T - 1) K.map(FLX_OP_ADD, bh_shape, K.at(dh), {dy, block(K.at(dh_rec))});
    else if (dh_last.buf) K.map(FLX_OP_ADD, bh_shape, K.at(dh), {dy, tr(dh_last)});
    else K.map(FLX_OP_COPY, bh_shape, K.at(dh), {dy});
    const Operand dh_ = block(K.at(dh)), t1_ = block(K.at(t1)), t2_ = block(K.at(t2));
    // h = σ(o) tanh(c): the output gate, and c's share of dh.
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {dh_, tc});
    K.map(FLX_OP_SIGMOID_GRAD, bh_shape, K.at(step, 3 * hb), {ao, t1_});
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {dh_, ao});
    K.map(FLX_OP_TANH_GRAD, bh_shape, K.at(t2), {tc, t1_});
    K.map(FLX_OP_ADD, bh_shape, K.at(dc[1 - cur]), {block(K.at(dc[cur])), t2_});
    cur = 1 - cur;
    // c = σ(f) c_prev + σ(i) tanh(g).
    const Operand dc_ = block(K.at(dc[cur]));
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {dc_, c_prev});
    K.map(FLX_OP_SIGMOID_GRAD, bh_shape, K.at(step, hb), {af, t1_});
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {dc_, ag});
    K.map(FLX_OP_SIGMOID_GRAD, bh_shape, step, {ai, t1_});
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {dc_, ai});
    K.map(FLX_OP_TANH_GRAD, bh_shape, K.at(step, 2 * hb), {ag, t1_});
    K.map(FLX_OP_MUL, bh_shape, K.at(dc[1 - cur]), {dc_, af});
    cur = 1 - cur;
    // dh_{t-1} = dG_t Wh, (B, 4H) × (4H, H).
    if (t > 0 || need[5]) K.gemm(false, false, B, H, 4 * H, step, B, K.at(wh), 4 * H, 0, K.at(dh_rec), B);
  }
  const Tensor dgn = untranspose_steps(K, d, dg, 4 * H);
  input_side_grads(K, d, dgn, x, wi, need, gi);
  if (need[2]) {
    gi[2] = K.buffer({4 * H, H});
    hidden_weight_grad(K, d, K.at(dgn), 4 * H, 4 * H, z, h0, K.at(gi[2]), 4 * H);
  }
  if (need[5]) gi[5] = untranspose(K, d, K.at(dh_rec));
  if (need[6]) gi[6] = untranspose(K, d, K.at(dc[cur]));
}

// ---- GRU -------------------------------------------------------------------------
// Gates r, z and the candidate n. Saved: the activated gates ACT (H, B, 3, T)
// and the candidate's recurrent product GHN = Wh_n h (+ bh) (H, B, T).

struct GruSaved {
  Tensor act, ghn;
};

Tensor gru_forward(const Kernels& K, const Dims& d, const Tensor& gx, const Tensor& wh, const Tensor& bh,
                   const Tensor& h0, GruSaved* s) {
  const int64_t H = d.H, hb = d.hb(), ld = 3 * H;
  s->act = K.buffer({H, d.B, 3, d.T});
  s->ghn = K.buffer({H, d.B, d.T});
  if (bh.defined()) K.map(FLX_OP_COPY, {H, d.B * d.T}, K.at(s->ghn), {matrix(K.at(bh), 0)});
  Tensor z = K.buffer({H, d.B, d.T}), u = K.buffer({H, d.B}), v = K.buffer({H, d.B});
  for (int64_t t = 0; t < d.T; ++t) {
    const flx_mem g = K.at(gx, t * 3 * hb), a = K.at(s->act, t * 3 * hb), ghn = K.at(s->ghn, t * hb);
    const flx_mem h_prev = previous(K, d, z, h0, t);
    // r and z take Wh h onto their rows of GX; the candidate's product stays apart.
    K.gemm(false, false, 2 * H, d.B, H, K.at(wh), ld, h_prev, H, 1, g, ld);
    K.gemm(false, false, H, d.B, H, K.at(wh, 2 * H), ld, h_prev, H, bh.defined() ? 1 : 0, ghn, H);
    K.map(FLX_OP_SIGMOID, {H, d.B, 2}, a, {{g, {1, ld, H}}});
    K.map(FLX_OP_MUL, {hb}, K.at(u), {flat(a), flat(ghn)});  // r (Wh_n h + bh)
    K.map(FLX_OP_ADD, {H, d.B}, K.at(v), {matrix(K.at(g, 2 * H), ld), matrix(K.at(u), H)});
    K.map(FLX_OP_TANH, {hb}, K.at(a, 2 * hb), {flat(K.at(v))});
    // h = (1 - z) n + z h_prev = n + z (h_prev - n)
    K.map(FLX_OP_SUB, {hb}, K.at(u), {flat(h_prev), flat(K.at(a, 2 * hb))});
    K.map(FLX_OP_MUL, {hb}, K.at(v), {flat(K.at(a, hb)), flat(K.at(u))});
    K.map(FLX_OP_ADD, {hb}, K.at(z, t * hb), {flat(K.at(a, 2 * hb)), flat(K.at(v))});
  }
  return z;
}

void gru_backward(const Kernels& K, const Dims& d, const Tensor& dz, flx_mem dh_last, const Tensor& z,
                  const GruSaved& s,
                  const Tensor& x, const Tensor& wi, const Tensor& wh, const Tensor& h0, const bool* need,
                  Tensor* gi) {
  const int64_t H = d.H, B = d.B, hb = d.hb();
  const std::initializer_list<int64_t> bh_shape = {B, H};
  auto tr = [&](flx_mem m) { return transposed(m, H); };  // an (H, B) block read as (B, H)
  auto block = [&](flx_mem m) { return matrix(m, B); };      // a contiguous (B, H) block
  Tensor dg = K.buffer({B, 3 * H, d.T});  // step t: (B, 3H) [dr dz dn], the input side's
  Tensor dghn = K.buffer({B, H, d.T});    // the candidate's recurrent product's, r ⊙ dn
  Tensor dh = K.buffer({B, H}), dh_rec = K.buffer({B, H}), t1 = K.buffer({B, H}), t2 = K.buffer({B, H});
  const Operand dh_ = block(K.at(dh)), t1_ = block(K.at(t1)), t2_ = block(K.at(t2));
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const flx_mem a = K.at(s.act, t * 3 * hb), step = K.at(dg, t * 3 * hb), dn = K.at(step, 2 * hb);
    const Operand r = tr(a), zg = tr(K.at(a, hb)), n = tr(K.at(a, 2 * hb));
    const Operand ghn = tr(K.at(s.ghn, t * hb)), h_prev = tr(previous(K, d, z, h0, t));
    const Operand dy = tr(K.at(dz, t * hb));
    if (t < d.T - 1) K.map(FLX_OP_ADD, bh_shape, K.at(dh), {dy, block(K.at(dh_rec))});
    else if (dh_last.buf) K.map(FLX_OP_ADD, bh_shape, K.at(dh), {dy, tr(dh_last)});
    else K.map(FLX_OP_COPY, bh_shape, K.at(dh), {dy});
    // n's share: (1 - z) dh through tanh; then r's and the product's.
    K.map(FLX_OP_SUB, bh_shape, K.at(t1), {scalar(1), zg});
    K.map(FLX_OP_MUL, bh_shape, K.at(t2), {dh_, t1_});
    K.map(FLX_OP_TANH_GRAD, bh_shape, dn, {n, t2_});
    K.map(FLX_OP_MUL, bh_shape, K.at(dghn, t * hb), {block(dn), r});
    K.map(FLX_OP_MUL, bh_shape, K.at(t1), {block(dn), ghn});
    K.map(FLX_OP_SIGMOID_GRAD, bh_shape, step, {r, t1_});
    // z's share: (h_prev - n) dh.
    K.map(FLX_OP_SUB, bh_shape, K.at(t1), {h_prev, n});
    K.map(FLX_OP_MUL, bh_shape, K.at(t2), {dh_, t1_});
    K.map(FLX_OP_SIGMOID_GRAD, bh_shape, K.at(step, hb), {zg, t2_});
    // dh_{t-1} = z dh + [dr dz] Wh_rz + (r dn) Wh_n.
    if (t > 0 || need[5]) {
      K.map(FLX_OP_MUL, bh_shape, K.at(dh_rec), {dh_, zg});
      K.gemm(false, false, B, H, 2 * H, step, B, K.at(wh), 3 * H, 1, K.at(dh_rec), B);
      K.gemm(false, false, B, H, H, K.at(dghn, t * hb), B, K.at(wh, 2 * H), 3 * H, 1, K.at(dh_rec), B);
    }
  }
  const Tensor dgn = untranspose_steps(K, d, dg, 3 * H);
  input_side_grads(K, d, dgn, x, wi, need, gi);
  const Tensor dghn_n = need[2] || need[4] ? untranspose_steps(K, d, dghn, H) : Tensor{};
  if (need[2]) {
    gi[2] = K.buffer({3 * H, H});
    hidden_weight_grad(K, d, K.at(dgn), 3 * H, 2 * H, z, h0, K.at(gi[2]), 3 * H);
    hidden_weight_grad(K, d, K.at(dghn_n), H, H, z, h0, K.at(gi[2], 2 * H), 3 * H);
  }
  if (need[4]) gi[4] = row_sums(dghn_n);
  if (need[5]) gi[5] = untranspose(K, d, K.at(dh_rec));
}

// ---- the op's output ------------------------------------------------------------------
// Z is the outputs y (H, T, B), flx's layout, alone, or with the last states
// after them: (H, T·B + k·B), y's T·B columns, then h_T's B, then (LSTM)
// c_T's B.

Shape output_shape(const Dims& d, bool with_state, bool lstm) {
  return with_state ? Shape{d.H, d.T * d.B + (lstm ? 2 : 1) * d.B} : Shape{d.H, d.T, d.B};
}
int64_t last_h_at(const Dims& d) { return d.H * d.T * d.B; }
int64_t last_c_at(const Dims& d) { return last_h_at(d) + d.hb(); }

// ---- a backend's own LSTM or GRU -----------------------------------------------------
// A backend may run the whole LSTM (the dnn table's rnn_*, ABI minor 6: the
// CPU through oneDNN's LSTM, which PyTorch's nn.LSTM uses too; CUDA through
// cuDNN's), GRU or plain tanh/relu RNN (minor 7: cuDNN's) itself, reading and writing flx's
// layouts in place. An undefined tensor, with nothing run, where it declines.

flx_rnn_desc rnn_desc(const Dims& d, int32_t cell, bool with_state, const Tensor& x, const Tensor& wi,
                      const Tensor& wh, const Tensor& b, const Tensor& bh, const Tensor& h0, const Tensor& c0,
                      const Tensor& z) {
  const Kernels K(x);
  const bool lstm = cell == FLX_RNN_LSTM;
  flx_rnn_desc r{};
  r.dtype = int32_t(x.dtype());
  r.cell = cell;
  r.input = d.in;
  r.hidden = d.H;
  r.batch = d.B;
  r.time = d.T;
  r.x = K.at(x);
  r.h0 = K.at(h0);
  if (lstm) r.c0 = K.at(c0);
  r.wi = K.at(wi);
  r.wh = K.at(wh);
  if (b.defined()) r.b = K.at(b);
  if (bh.defined()) r.bh = K.at(bh);
  r.y = K.at(z);
  if (with_state) {
    r.hn = K.at(z, last_h_at(d));
    if (lstm) r.cn = K.at(z, last_c_at(d));
  }
  return r;
}

// The cell of backend.h for a layer: c0 defined is an LSTM; k gates.
int32_t rnn_cell(const Dims& d, RecurrentAct act, bool lstm) {
  if (lstm) return FLX_RNN_LSTM;
  if (d.k == 3) return FLX_RNN_GRU;
  return act == RecurrentAct::Relu ? FLX_RNN_RELU : FLX_RNN_TANH;
}

// c0 defined: an LSTM, else a GRU (bh its candidate's recurrent bias, if
// any) or a plain RNN of act.
Tensor backend_rnn(const Dims& d, RecurrentAct act, bool with_state, const Tensor& x, const Tensor& wi,
                   const Tensor& wh, const Tensor& b, const Tensor& bh, const Tensor& h0, const Tensor& c0) {
  const bool lstm = c0.defined();
  const int32_t cell = rnn_cell(d, act, lstm);
  if (!library_enabled() ||
      !use_kernel(x, {FLX_FUSED_RNN_FORWARD, FLX_FUSED_RNN_BACKWARD}, autograd::Order::FirstOnly))
    return {};
  const auto& be = detail::be(x);
  const int dev = detail::dev(x);
  const bool training = detail::is_recording() && (autograd::tracked(x) || autograd::tracked(wi) ||
                                                   autograd::tracked(wh) || autograd::tracked(b) ||
                                                   autograd::tracked(bh) || autograd::tracked(h0) ||
                                                   autograd::tracked(c0));
  const Kernels K(x);
  Tensor z = K.buffer(output_shape(d, with_state, lstm));
  flx_rnn_desc r = rnn_desc(d, cell, with_state, x, wi, wh, b, bh, h0, c0, z);
  r.training = training;
  auto reserve = std::make_shared<detail::Scratch>();
  if (training) {
    if (!be.rnn_reserve(dev, r, reserve.get())) return {};
    r.reserve = reserve->mem();
    r.reserve_bytes = reserve->bytes();
  }
  if (!be.rnn_forward(dev, r)) return {};
  if (!training) return z;
  const auto detached = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor{}; };
  autograd::record(lstm ? "LSTM" : cell == FLX_RNN_GRU ? "GRU" : "RNN", autograd::Order::FirstOnly, z,
                   {x, wi, wh, b, bh, h0, c0},
                   [d, cell, with_state, reserve, lstm, x = x.detach(), wi = wi.detach(), wh = wh.detach(), b = detached(b),
                    bh = detached(bh), h0 = h0.detach(), c0 = detached(c0),
                    z = z.detach()](const Tensor& g, const bool* need, Tensor* gi) {
                     const Kernels K(z);
                     const Tensor dz = g.to(z.dtype());
                     flx_rnn_desc r = rnn_desc(d, cell, with_state, x, wi, wh, b, bh, h0, c0, z);
                     r.training = 1;
                     r.reserve = reserve->mem();
                     r.reserve_bytes = reserve->bytes();
                     r.dy = K.at(dz);
                     if (with_state) {
                       r.dhn = K.at(dz, last_h_at(d));
                       if (lstm) r.dcn = K.at(dz, last_c_at(d));
                     }
                     auto out = [&](int i, const Shape& s, flx_mem* m) {
                       if (!need[i]) return;
                       gi[i] = K.buffer(s);
                       *m = K.at(gi[i]);
                     };
                     out(0, x.shape(), &r.dx);
                     out(1, wi.shape(), &r.dwi);
                     out(2, wh.shape(), &r.dwh);
                     if (b.defined()) out(3, b.shape(), &r.db);
                     if (bh.defined()) out(4, bh.shape(), &r.dbh);
                     out(5, h0.shape(), &r.dh0);
                     if (lstm) out(6, c0.shape(), &r.dc0);
                     detail::be(z).rnn_backward(detail::dev(z), r);
                   });
  return z;
}

// Whether the op applies to these operands (see the header).
bool applies(const Tensor& x, std::initializer_list<const Tensor*> others) {
  // The scan's record differentiates once: a nested gradient call steps the
  // cells, whose ops differentiate to any order.
  if (!fused_enabled() || !x.defined() || !use_kernel(x, {}, autograd::Order::FirstOnly)) return false;
  const DType t = x.dtype();
  if (t != Float32 && t != Float64) return false;
  for (const Tensor* o : others)
    if (o->defined() && (o->dtype() != t || o->device() != x.device())) return false;
  return x.ndims() == 3 && x.numel() > 0;
}

}  // namespace

Tensor recurrent_scan(RecurrentKind kind, RecurrentAct act, const Tensor& x, const Tensor& wi, const Tensor& wh,
                      const Tensor& b, const Tensor& bh, const Tensor& h0, const Tensor& c0, bool with_state) {
  if (!applies(x, {&wi, &wh, &b, &bh, &h0, &c0})) return {};
  const bool lstm = kind == RecurrentKind::LSTM, gru = kind == RecurrentKind::GRU;
  const Dims d{x.shape()[0], wh.shape()[1], x.shape()[2], x.shape()[1], lstm ? 4 : gru ? 3 : 1};
  // The layer checked its operands; these are the op's own preconditions.
  FLX_CHECK(wi.shape() == (Shape{d.k * d.H, d.in}) && wh.shape() == (Shape{d.k * d.H, d.H}) &&
                (!b.defined() || b.shape() == Shape{d.k * d.H}) && (!bh.defined() || (gru && bh.shape() == Shape{d.H})) &&
                h0.shape() == (Shape{d.H, d.B}) && (lstm == c0.defined()) && (!lstm || c0.shape() == h0.shape()),
            DimensionMismatch, "recurrent_scan (", op_name(kind), "): operands of shapes x ", x.shape(), ", Wi ",
            wi.shape(), ", Wh ", wh.shape(), ", h0 ", h0.shape(), " do not fit together");
  if (lstm || gru || act == RecurrentAct::Tanh || act == RecurrentAct::Relu)
    if (Tensor z = backend_rnn(d, act, with_state, x, wi, wh, b, bh, h0, c0); z.defined()) return z;

  // The compute table's way, time last: x as (in, B, T), the states Zt
  // (H, B, T) (LSTM: and c_T in slot T), then Z in flx's layout.
  const Kernels K(x);
  Tensor xt = K.buffer({d.in, d.B, d.T});
  K.swap_last_dims(K.at(x), d.in, d.T, d.B, K.at(xt));
  const Tensor gx = input_projection(K, d, xt, wi, b);
  Tensor zt;
  LstmSaved ls;
  GruSaved gs;
  if (lstm) zt = lstm_forward(K, d, gx, wh, h0, c0, &ls);
  else if (gru) zt = gru_forward(K, d, gx, wh, bh, h0, &gs);
  else zt = rnn_forward(K, d, act, gx, wh, h0);
  Tensor z = K.buffer(output_shape(d, with_state, lstm));
  K.swap_last_dims(K.at(zt), d.H, d.B, d.T, K.at(z));
  if (with_state) {
    K.copy(K.at(z, last_h_at(d)), K.at(zt, (d.T - 1) * d.hb()), d.hb());
    if (lstm) K.copy(K.at(z, last_c_at(d)), K.at(zt, d.T * d.hb()), d.hb());
  }

  // One rule for the whole sequence: backpropagation through time with the
  // same kernels. It holds the forward pass's saved buffers and detached
  // operands (it runs fused kernels: first order only).
  autograd::record(op_name(kind), autograd::Order::FirstOnly, z, {x, wi, wh, b, bh, h0, c0},
                   [kind, act, d, with_state, xt, wi = wi.detach(), wh = wh.detach(), h0 = h0.detach(),
                    c0 = c0.defined() ? c0.detach() : Tensor{}, zt, ls,
                    gs](const Tensor& g, const bool* need, Tensor* gi) {
                     const Kernels K(zt);
                     const Tensor dz = g.to(zt.dtype());
                     const bool lstm = kind == RecurrentKind::LSTM;
                     // The outputs' gradients time last, (H, B, T), and (LSTM) c_T's in slot T.
                     Tensor dzt = K.buffer({d.H, d.B, d.T + (lstm ? 1 : 0)});
                     K.swap_last_dims(K.at(dz), d.H, d.T, d.B, K.at(dzt));
                     if (lstm) {
                       if (with_state) K.copy(K.at(dzt, d.T * d.hb()), K.at(dz, last_c_at(d)), d.hb());
                       else K.fill(K.at(dzt, d.T * d.hb()), d.hb(), 0);
                     }
                     const flx_mem dh_last = with_state ? K.at(dz, last_h_at(d)) : flx_mem{};
                     if (lstm) lstm_backward(K, d, dzt, dh_last, zt, ls, xt, wi, wh, h0, c0, need, gi);
                     else if (kind == RecurrentKind::GRU) gru_backward(K, d, dzt, dh_last, zt, gs, xt, wi, wh, h0, need, gi);
                     else rnn_backward(K, d, act, dzt, dh_last, zt, xt, wi, wh, h0, need, gi);
                     if (need[0]) {  // x's gradient back to flx's layout
                       Tensor dx = K.buffer({d.in, d.T, d.B});
                       K.swap_last_dims(K.at(gi[0]), d.in, d.B, d.T, K.at(dx));
                       gi[0] = dx;
                     }
                   });
  return z;
}

}  // namespace flx::ops

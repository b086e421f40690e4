// Attention in tiles of keys through the compute table (attention.hpp): the
// path of every backend without its own attention kernel (OpenCL today),
// of the cases a backend declines, and of FLX_ATTENTION_LIBRARY=0.
//
// Layout. q, k and v are permuted once to (d, len, nheads, batch), so that
// each head of each sequence (a "group", g = h + nheads·b) is one
// contiguous d × len matrix and a tile of keys is a column range of it: one
// strided batched GEMM over the groups serves every tile. A tile of t keys
// holds its scores as (t, q_len, groups), keys fastest, so a query's row
// over the tile is contiguous for the reductions.
//
// Forward (flash-attention's recurrence): per query row a running maximum
// m, a running sum l of exp(s - m), and the unnormalised output acc; each
// tile rescales them by exp(m_old - m_new) and adds its own. At the end
// o = acc / l and lse = m + log l. Dropout multiplies the probabilities
// that enter acc, never l (they sum to one before it).
//
// Backward (FlashAttention-2's): D = rowsum(dO ∘ O); per tile p = exp(s -
// lse) again, dV = dO pᵀ, dP = Vᵀ dO, dS = p ∘ (dP - D), dQ += K dS,
// dK = Q dSᵀ, each key's gradients written once by its tile, dQ summed over
// the tiles in order.
//
// Tile size: 256 keys. The tiles' buffers are (256, q_len, groups) each, a
// few of them, so memory is linear in the lengths, and at 256 keys a tile's
// products (256 × q_len × d) are large enough that the dozen map and
// reduction launches a tile costs on a GPU (tens of µs each) stay small
// beside them, while the buffers stay below 256/d times the size of q
// (8× for heads of 32 features). Halves compute in Float32 (their
// log-sum-exp is Float32 as the ABI's), Float64 in Float64.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention.hpp"
#include "backend_common/dropout_keep.hpp"

namespace flx::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A map operand over up to 4 dims: memory read through element strides, or
// a scalar.
struct Operand {
  flx_mem mem{};
  std::array<int64_t, 4> strides{};
  bool is_scalar = false;
  double scalar = 0;
};
Operand scalar(double v) { return {{}, {}, true, v}; }

// The raw calls of one call's tiles: one device, the compute type.
class Kernels {
 public:
  Kernels(const Tensor& like, DType compute)
      : be_(&detail::be(like)), dev_(detail::dev(like)), device_(like.device()), t_(compute) {}

  DType dtype() const { return t_; }
  Tensor buffer(const Shape& s, DType t) const { return empty(t, s, device_); }
  Tensor buffer(const Shape& s) const { return buffer(s, t_); }
  static flx_mem at(const Tensor& t, int64_t elements = 0) {
    flx_mem m = detail::mem(t);
    m.offset += uint64_t(elements) * dtype_size(t.dtype());
    return m;
  }
  // A contiguous tensor's elements as an operand of a map over `dims`.
  static Operand dense(const Tensor& t, std::initializer_list<int64_t> dims, int64_t elements = 0) {
    Operand o{at(t, elements)};
    int64_t stride = 1;
    size_t k = 0;
    for (int64_t e : dims) {
      o.strides[k++] = stride;
      stride *= e;
    }
    return o;
  }
  static Operand strided(const Tensor& t, std::array<int64_t, 4> strides, int64_t elements = 0) {
    return {at(t, elements), strides};
  }

  // out (contiguous, of `shape`) = op(ins...), inputs of in_dtype.
  void map(int op, DType in_dtype, DType out_dtype, std::initializer_list<int64_t> shape, flx_mem out,
           std::initializer_list<Operand> ins, double alpha = 0, double beta = 0) const {
    flx_map_desc d{};
    d.op = op;
    d.ninputs = int32_t(ins.size());
    d.in_dtype = int32_t(in_dtype);
    d.out_dtype = int32_t(out_dtype);
    d.ndim = int32_t(shape.size());
    int64_t numel = 1;
    int k = 0;
    for (int64_t e : shape) numel *= (d.shape[k++] = e);
    int i = 0;
    for (const Operand& o : ins) {
      flx_operand& to = d.in[i++];
      to.mem = o.mem;
      to.is_scalar = o.is_scalar;
      to.scalar = o.scalar;
      for (int j = 0; j < d.ndim; ++j) to.strides[j] = o.is_scalar ? 0 : o.strides[size_t(j)];
    }
    d.out = out;
    d.alpha = alpha;
    d.beta = beta;
    if (numel) be_->map(dev_, d);
  }
  void map(int op, std::initializer_list<int64_t> shape, flx_mem out, std::initializer_list<Operand> ins,
           double alpha = 0, double beta = 0) const {
    map(op, t_, t_, shape, out, ins, alpha, beta);
  }
  // C_g = alpha op(A_g) op(B_g) + beta C_g over `batch` groups.
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, flx_mem a, int64_t lda, int64_t sa,
            flx_mem b, int64_t ldb, int64_t sb, double beta, flx_mem c, int64_t ldc, int64_t sc,
            int64_t batch) const {
    if (m == 0 || n == 0 || batch == 0) return;
    if (k == 0) {  // an empty sum: the backends' GEMMs need not take k = 0
      if (beta != 0) return;
      if (ldc == m && sc == m * n) return fill_mem(c, m * n * batch, 0);
      for (int64_t g = 0; g < batch; ++g)
        for (int64_t j = 0; j < n; ++j) fill_mem(offset(c, g * sc + j * ldc), m, 0);
      return;
    }
    flx_gemm_desc d{};
    d.dtype = int32_t(t_);
    d.trans_a = ta;
    d.trans_b = tb;
    d.m = m;
    d.n = n;
    d.k = k;
    d.alpha = alpha;
    d.beta = beta;
    d.a = a;
    d.b = b;
    d.c = c;
    d.lda = lda;
    d.ldb = ldb;
    d.ldc = ldc;
    d.stride_a = sa;
    d.stride_b = sb;
    d.stride_c = sc;
    d.batch = batch;
    be_->gemm(dev_, d);
  }
  // out (the reduced shape, contiguous) = op over the dims in `mask` of a
  // contiguous tensor of `shape` at `in`.
  void reduce(int op, std::initializer_list<int64_t> shape, uint32_t mask, flx_mem in, flx_mem out) const {
    std::vector<int64_t> s(shape);
    flx_reduce_desc d = detail::reduce_desc(op, int32_t(t_), int(s.size()), s.data(), mask, 1.0, in, out);
    be_->reduce(dev_, d);
  }
  void fill(const Tensor& t, double v) const { fill_mem(at(t), t.numel(), v); }
  // dst (contiguous) = permutedims(src of `shape`, perm).
  void permute(const Tensor& src, std::initializer_list<int64_t> shape, std::initializer_list<int32_t> perm,
               const Tensor& dst) const {
    if (src.numel() == 0) return;
    std::vector<int64_t> s(shape);
    std::vector<int32_t> p(perm);
    be_->permute(dev_, detail::permute_desc(int32_t(src.dtype()), int(s.size()), s.data(), p.data(),
                                            detail::mem(src), detail::mem(dst)));
  }
  void upload(const Tensor& dst, const void* src) const {
    if (dst.numel()) be_->copy_h2d(dev_, detail::mem(dst), src, size_t(dst.numel()) * dtype_size(dst.dtype()));
  }

 private:
  flx_mem offset(flx_mem m, int64_t elements) const {
    m.offset += uint64_t(elements) * dtype_size(t_);
    return m;
  }
  void fill_mem(flx_mem m, int64_t n, double v) const {
    if (n) be_->fill(dev_, m, t_, size_t(n), v);
  }

  const detail::Backend* be_;
  int dev_;
  Device device_;
  DType t_;
};

DType compute_type(DType t) { return t == Float64 ? Float64 : Float32; }

// x (d·nheads, len, batch) of any floating dtype -> (d, len, nheads, batch)
// in the compute type.
Tensor to_groups(const Kernels& K, const Tensor& x, int64_t nheads) {
  const int64_t d = x.shape()[0] / nheads, len = x.shape()[1], batch = x.shape()[2];
  const Tensor c = x.dtype() == K.dtype() ? x : raw_cast(x, K.dtype());
  Tensor out = K.buffer({d, len, nheads, batch});
  K.permute(c, {d, nheads, len, batch}, {0, 2, 1, 3}, out);
  return out;
}
// The inverse: (d, len, nheads, batch) in the compute type -> (d·nheads,
// len, batch) of dtype t.
Tensor from_groups(const Kernels& K, const Tensor& x, DType t) {
  const int64_t d = x.shape()[0], len = x.shape()[1], nheads = x.shape()[2], batch = x.shape()[3];
  Tensor out = K.buffer({d * nheads, len, batch});
  K.permute(x, {d, len, nheads, batch}, {0, 2, 1, 3}, out);
  return t == K.dtype() ? out : raw_cast(out, t);
}

// What the tiles of one call share: sizes, the operands in the compute
// type, and the index vectors a causal mask compares.
struct Plan {
  const AttentionArgs& a;
  AttentionDims d;
  Kernels K;
  int64_t tile;
  Tensor bias;  // in the compute type
  std::array<int64_t, 4> mask_strides{}, bias_strides{};
  Tensor key_index, query_index;  // causal: 0..kv_len-1 and 0..q_len-1 in the compute type

  explicit Plan(const AttentionArgs& args)
      : a(args), d(attention_dims(args)), K(args.q, compute_type(args.q.dtype())),
        tile(std::min(attention_key_tile(), std::max<int64_t>(d.kv_len, 1))) {
    if (a.mask.defined()) mask_strides = broadcast_strides(a.mask);
    if (a.bias.defined()) {
      bias = a.bias.dtype() == K.dtype() ? a.bias : raw_cast(a.bias, K.dtype());
      bias_strides = broadcast_strides(a.bias);
    }
    if (a.causal) {
      key_index = iota(d.kv_len);
      query_index = iota(d.q_len);
    }
  }
  Tensor iota(int64_t n) const {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i);
    return from_host(v.data(), Float64, Shape{n}).to(a.q.device()).to(K.dtype());
  }
  int64_t tiles() const { return (d.kv_len + tile - 1) / tile; }

  // S (t, q_len, groups) = scale kᵀq + bias, -Inf where not allowed, for
  // the keys j0 .. j0 + t - 1.
  void scores(const Tensor& qp, const Tensor& kp, int64_t j0, int64_t t, const Tensor& s) const {
    const int64_t G = d.groups(), Lq = d.q_len;
    K.gemm(true, false, t, Lq, d.dq, d.scale, K.at(kp, j0 * d.dq), d.dq, d.dq * d.kv_len, K.at(qp), d.dq,
           d.dq * Lq, 0, K.at(s), t, t * Lq, G);
    const std::initializer_list<int64_t> shape = {t, Lq, d.nheads, d.batch};
    const std::array<int64_t, 4> dense = {1, t, t * Lq, t * Lq * d.nheads};
    if (bias.defined())
      K.map(FLX_OP_ADD, shape, K.at(s), {Kernels::strided(s, dense), Kernels::strided(bias, bias_strides, j0 * bias_strides[0])});
    if (a.mask.defined())
      K.map(FLX_OP_WHERE, K.dtype(), K.dtype(), shape, K.at(s),
            {Kernels::strided(a.mask, mask_strides, j0 * mask_strides[0]), Kernels::strided(s, dense), scalar(-kInf)});
    if (a.causal) {
      const Tensor allowed = K.buffer({t, Lq}, Bool);  // key j0 + jj <= query i
      K.map(FLX_OP_LE, K.dtype(), Bool, {t, Lq}, K.at(allowed),
            {Kernels::strided(key_index, {1, 0}, j0), Kernels::strided(query_index, {0, 1})});
      K.map(FLX_OP_WHERE, K.dtype(), K.dtype(), {t, Lq, G}, K.at(s),
            {Kernels::strided(allowed, {1, t, 0}), Kernels::dense(s, {t, Lq, G}), scalar(-kInf)});
    }
  }

  // The dropout factors of the tile, (t, q_len, groups) in the compute
  // type: 1/(1 - p) where the uniform draw of element e = j + kv_len (i +
  // q_len g) is >= p, else 0. The draws are made on the host (Philox is
  // counter based: element e of the fill depends on (seed, offset, e)
  // alone; the compute table's `random` fills from element 0 only) in a's
  // dtype, and compared on the device as dropout's `r >= p` compares them.
  Tensor dropout_factors(int64_t j0, int64_t t) const {
    const DType T = a.q.dtype();
    const int64_t Lq = d.q_len, G = d.groups(), n = t * Lq * G;
    std::vector<unsigned char> host(static_cast<size_t>(n) * dtype_size(T));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t jj = 0; jj < t; ++jj) {
          const uint64_t e = uint64_t(j0 + jj + d.kv_len * (i + Lq * g));
          const double u = dropout_keep::uniform(int32_t(T), a.seed, a.offset, e);
          const size_t at = size_t(jj + t * (i + Lq * g));
          switch (T) {
            case Float64: reinterpret_cast<double*>(host.data())[at] = u; break;
            case Float32: reinterpret_cast<float*>(host.data())[at] = float(u); break;
            case Float16: reinterpret_cast<uint16_t*>(host.data())[at] = float_to_half(float(u)); break;
            default: reinterpret_cast<uint16_t*>(host.data())[at] = float_to_bf16(float(u)); break;
          }
        }
    const Tensor r = K.buffer({n}, T), kept = K.buffer({n}, Bool), f = K.buffer({t, Lq, G});
    K.upload(r, host.data());
    K.map(FLX_OP_GE, T, Bool, {n}, K.at(kept), {Kernels::dense(r, {n}), scalar(a.dropout)});
    K.map(FLX_OP_WHERE, K.dtype(), K.dtype(), {n}, K.at(f),
          {Kernels::dense(kept, {n}), scalar(1.0 / (1.0 - a.dropout)), scalar(0)});
    return f;
  }
};

}  // namespace

Tensor tiled_forward(const AttentionArgs& a, TiledSaved* saved) {
  const Plan P(a);
  const Kernels& K = P.K;
  const AttentionDims& d = P.d;
  const int64_t G = d.groups(), Lq = d.q_len, rows = Lq * G;
  const Tensor qp = to_groups(K, a.q, d.nheads), kp = to_groups(K, a.k, d.nheads), vp = to_groups(K, a.v, d.nheads);
  Tensor m = K.buffer({rows}), m_new = K.buffer({rows}), m_safe = K.buffer({rows});
  Tensor l = K.buffer({rows}), part = K.buffer({rows}), corr = K.buffer({rows});
  Tensor acc = K.buffer({d.dv, Lq, d.nheads, d.batch});
  K.fill(m, -kInf);
  K.fill(l, 0);
  K.fill(acc, 0);
  const Tensor s = K.buffer({P.tile * rows});
  // -Inf as the maximum of a row that has seen no allowed key yet becomes
  // the lowest finite value, so that exp(s - m) is exp(-Inf) = 0 there
  // rather than exp(NaN).
  const double lowest = K.dtype() == Float64 ? -std::numeric_limits<double>::max()
                                             : -double(std::numeric_limits<float>::max());
  for (int64_t j0 = 0; j0 < d.kv_len; j0 += P.tile) {
    const int64_t t = std::min(P.tile, d.kv_len - j0);
    P.scores(qp, kp, j0, t, s);
    const Operand S = Kernels::dense(s, {t, rows}), row = Kernels::strided(m_safe, {0, 1});
    K.reduce(FLX_REDUCE_MAX, {t, rows}, 0b01, K.at(s), K.at(m_new));
    K.map(FLX_OP_MAX, {rows}, K.at(m_new), {Kernels::dense(m_new, {rows}), Kernels::dense(m, {rows})});
    K.map(FLX_OP_CLAMP, {rows}, K.at(m_safe), {Kernels::dense(m_new, {rows})}, lowest, kInf);
    K.map(FLX_OP_SUB, {rows}, K.at(corr), {Kernels::dense(m, {rows}), Kernels::dense(m_safe, {rows})});
    K.map(FLX_OP_EXP, {rows}, K.at(corr), {Kernels::dense(corr, {rows})});
    K.map(FLX_OP_SUB, {t, rows}, K.at(s), {S, row});
    K.map(FLX_OP_EXP, {t, rows}, K.at(s), {S});
    K.reduce(FLX_REDUCE_SUM, {t, rows}, 0b01, K.at(s), K.at(part));
    K.map(FLX_OP_MUL, {rows}, K.at(l), {Kernels::dense(l, {rows}), Kernels::dense(corr, {rows})});
    K.map(FLX_OP_ADD, {rows}, K.at(l), {Kernels::dense(l, {rows}), Kernels::dense(part, {rows})});
    if (a.dropout > 0) {
      const Tensor f = P.dropout_factors(j0, t);
      K.map(FLX_OP_MUL, {t * rows}, K.at(s), {Kernels::dense(s, {t * rows}), Kernels::dense(f, {t * rows})});
    }
    K.map(FLX_OP_MUL, {d.dv, rows}, K.at(acc), {Kernels::dense(acc, {d.dv, rows}), Kernels::strided(corr, {0, 1})});
    K.gemm(false, false, d.dv, Lq, t, 1, K.at(vp, j0 * d.dv), d.dv, d.dv * d.kv_len, K.at(s), t, t * Lq, 1,
           K.at(acc), d.dv, d.dv * Lq, G);
    std::swap(m, m_new);  // m_new's buffer is written before it is read
  }
  // o = acc / l (0/0 = NaN where no key was allowed); lse = m + log l (-Inf there).
  Tensor op = K.buffer({d.dv, Lq, d.nheads, d.batch});
  K.map(FLX_OP_DIV, {d.dv, rows}, K.at(op), {Kernels::dense(acc, {d.dv, rows}), Kernels::strided(l, {0, 1})});
  if (saved) {
    Tensor lse = K.buffer({Lq, d.nheads, d.batch});
    K.map(FLX_OP_LOG, {rows}, K.at(lse), {Kernels::dense(l, {rows})});
    K.map(FLX_OP_ADD, {rows}, K.at(lse), {Kernels::dense(lse, {rows}), Kernels::dense(m, {rows})});
    *saved = {qp, kp, vp, op, lse};
  }
  return from_groups(K, op, a.q.dtype());
}

void tiled_backward(const AttentionArgs& a, const TiledSaved& sv, const Tensor& dout, const bool* need,
                    Tensor* grads) {
  const Plan P(a);
  const Kernels& K = P.K;
  const AttentionDims& d = P.d;
  const int64_t G = d.groups(), Lq = d.q_len, rows = Lq * G;
  const Tensor dop = to_groups(K, dout, d.nheads);
  // D = rowsum(dO ∘ O), one per query row.
  Tensor dd = K.buffer({rows});
  {
    const Tensor prod = K.buffer({d.dv, rows});
    K.map(FLX_OP_MUL, {d.dv * rows}, K.at(prod), {Kernels::dense(dop, {d.dv * rows}), Kernels::dense(sv.op, {d.dv * rows})});
    K.reduce(FLX_REDUCE_SUM, {d.dv, rows}, 0b01, K.at(prod), K.at(dd));
  }
  Tensor dqp = K.buffer({d.dq, Lq, d.nheads, d.batch}), dkp = K.buffer({d.dq, d.kv_len, d.nheads, d.batch}),
         dvp = K.buffer({d.dv, d.kv_len, d.nheads, d.batch});
  K.fill(dqp, 0);
  // dbias: the bias's dims padded to 4, b[0] keys. A bias over keys gets each
  // tile's sums in its own slots of (rest, kv_len), keys slowest; one without
  // a key dim sums every tile into one (rest).
  const bool want_bias = need[3] && a.bias.defined();
  std::array<int64_t, 4> bdims{1, 1, 1, 1};
  const std::array<int64_t, 4> full{d.kv_len, Lq, d.nheads, d.batch};
  uint32_t red_mask = 0;
  int64_t rest = 1;
  Tensor db;
  if (want_bias) {
    for (int k = 0; k < a.bias.ndims(); ++k) bdims[size_t(k)] = a.bias.shape()[k];
    for (int k = 0; k < 4; ++k)
      if (bdims[size_t(k)] == 1 && full[size_t(k)] != 1) red_mask |= 1u << k;
    rest = bdims[1] * bdims[2] * bdims[3];
    db = K.buffer({rest, bdims[0]});
    if (bdims[0] == 1) K.fill(db, 0);
  }
  const Tensor s = K.buffer({P.tile * rows}), dp = K.buffer({P.tile * rows});
  const Tensor pd = a.dropout > 0 ? K.buffer({P.tile * rows}) : Tensor{};
  const Tensor red = want_bias ? K.buffer({P.tile * rest}) : Tensor{};
  for (int64_t j0 = 0; j0 < d.kv_len; j0 += P.tile) {
    const int64_t t = std::min(P.tile, d.kv_len - j0), n = t * rows;
    P.scores(sv.qp, sv.kp, j0, t, s);
    // p = exp(s - lse): 0 where not allowed (NaN in a row with no allowed key, as its output).
    K.map(FLX_OP_SUB, {t, rows}, K.at(s), {Kernels::dense(s, {t, rows}), Kernels::strided(sv.lse, {0, 1})});
    K.map(FLX_OP_EXP, {n}, K.at(s), {Kernels::dense(s, {n})});
    Tensor f;
    const Tensor& p_used = a.dropout > 0 ? pd : s;
    if (a.dropout > 0) {
      f = P.dropout_factors(j0, t);
      K.map(FLX_OP_MUL, {n}, K.at(pd), {Kernels::dense(s, {n}), Kernels::dense(f, {n})});
    }
    // dV (keys of the tile) = dO p_usedᵀ; dP = Vᵀ dO (times the factors).
    K.gemm(false, true, d.dv, t, Lq, 1, K.at(dop), d.dv, d.dv * Lq, K.at(p_used), t, t * Lq, 0,
           K.at(dvp, j0 * d.dv), d.dv, d.dv * d.kv_len, G);
    K.gemm(true, false, t, Lq, d.dv, 1, K.at(sv.vp, j0 * d.dv), d.dv, d.dv * d.kv_len, K.at(dop), d.dv, d.dv * Lq,
           0, K.at(dp), t, t * Lq, G);
    if (a.dropout > 0) K.map(FLX_OP_MUL, {n}, K.at(dp), {Kernels::dense(dp, {n}), Kernels::dense(f, {n})});
    // dS = p (dP - D), into dp.
    K.map(FLX_OP_SUB, {t, rows}, K.at(dp), {Kernels::dense(dp, {t, rows}), Kernels::strided(dd, {0, 1})});
    K.map(FLX_OP_MUL, {n}, K.at(dp), {Kernels::dense(dp, {n}), Kernels::dense(s, {n})});
    if (want_bias) {
      const std::initializer_list<int64_t> shape4 = {t, Lq, d.nheads, d.batch};
      const int64_t kept_keys = bdims[0] == 1 ? 1 : t;
      if (red_mask) K.reduce(FLX_REDUCE_SUM, shape4, red_mask, K.at(dp), K.at(red));
      const Tensor& r = red_mask ? red : dp;
      if (bdims[0] == 1) {
        K.map(FLX_OP_ADD, {rest}, K.at(db), {Kernels::dense(db, {rest}), Kernels::dense(r, {rest})});
      } else {
        // (t, rest) -> db's columns j0 .. j0 + t - 1 of (rest, kv_len): the keys slowest.
        K.map(FLX_OP_COPY, {rest, kept_keys}, K.at(db, j0 * rest), {Kernels::strided(r, {kept_keys, 1})});
      }
    }
    // dQ += scale K dS; dK (keys of the tile) = scale Q dSᵀ.
    K.gemm(false, false, d.dq, Lq, t, d.scale, K.at(sv.kp, j0 * d.dq), d.dq, d.dq * d.kv_len, K.at(dp), t, t * Lq,
           1, K.at(dqp), d.dq, d.dq * Lq, G);
    K.gemm(false, true, d.dq, t, Lq, d.scale, K.at(sv.qp), d.dq, d.dq * Lq, K.at(dp), t, t * Lq, 0,
           K.at(dkp, j0 * d.dq), d.dq, d.dq * d.kv_len, G);
  }
  const DType T = a.q.dtype();
  if (need[0]) grads[0] = from_groups(K, dqp, T);
  if (need[1]) grads[1] = from_groups(K, dkp, T);
  if (need[2]) grads[2] = from_groups(K, dvp, T);
  if (want_bias) {
    Tensor b = db;
    if (bdims[0] != 1) {
      b = K.buffer({bdims[0], rest});
      K.permute(db, {rest, bdims[0]}, {1, 0}, b);
    }
    b = reshape(b, a.bias.shape());
    grads[3] = a.bias.dtype() == K.dtype() ? b : raw_cast(b, a.bias.dtype());
  }
}

}  // namespace flx::ops

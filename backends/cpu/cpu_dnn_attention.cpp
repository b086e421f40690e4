// Scaled dot-product attention without its scores (the dnn table's
// attention_*, ABI minor 7; backend.h has the semantics): tiles of queries
// × keys with an online softmax, OpenBLAS on each tile, one log-sum-exp per
// query row kept for the backward pass, which recomputes each tile's
// probabilities from it. Memory: the outputs, lse, D (one per query row),
// and per thread a few tiles and one group's keys and values transposed.
//
// Layout. flx's q (dq, nheads, q_len, batch) is, for head h of sequence b
// (a "group"), a dq × q_len matrix with leading dimension dq·nheads, so
// BLAS reads every head in place; o and the gradients likewise. A tile of
// scores S is nk × nq, keys fastest: a query's scores are one contiguous
// column, which the softmax's reductions run along. S = kᵀq and dP = vᵀdO
// read k and v transposed (len × d, copied once per group and thread), so
// that every product of a tile has untransposed or B-transposed operands,
// which OpenBLAS runs through its small-matrix kernels without packing.
//
// Same bits at any thread count and load (tests/test_thread_determinism):
// the work is cut by the shape alone, into tasks that each run whole on one
// thread, and every sum runs in an order fixed by the shape:
//  - forward: a task per (group, block of kQueryBlock queries), the key
//    blocks in order;
//  - backward, at least kGroupsForWholeGroups groups: a task per group,
//    key blocks outer and query blocks inner, so dK and dV of a key block
//    sum over the query blocks in order and dQ over the key blocks in
//    order (FlashAttention-2's loop, five products a tile);
//  - backward, fewer groups (a task per group would leave cores idle): a
//    task per (group, key block) for dK and dV, and one per (group, query
//    block) for dQ, which computes the tile's dS again (seven products a
//    tile instead of five, no atomics, no shared sums).
// Which scheme runs depends on the group count, never on the threads.
//
// Element types: Float32 and Float64 in place; Float16 and BFloat16 are
// computed in Float32: each group's operands are converted as they are
// copied into the per-thread buffers below (so memory stays as it is for
// Float32: no copy of a whole operand), and each result rounded once to
// the half type as it is written.
// The columns' exponentials and maxima: cpu_attention_math.hpp.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend_common/dropout_keep.hpp"
#include "cpu_attention_math.hpp"
#include "cpu_dnn.hpp"

namespace flx::cpu_backend {
namespace {

// Block sizes: a tile of 128 × 128 scores (64 KiB in Float32) and its
// partners (dP, p∘keep, the dropout factors) stay in a core's L2, and a
// tile's products (128 × 128 × head dim) stay below OpenBLAS's limit for
// its small-matrix kernels (10^6 multiply-adds for a head dim up to 64).
// Measured at length 1024, head dim 32, on a Zen 4 core: 64 to 256 on
// either side within 5% of each other, 256 × 256 10% slower.
constexpr int64_t kQueryBlock = 128, kKeyBlock = 128;
constexpr int64_t kBackQueryBlock = 128, kBackKeyBlock = kKeyBlock;  // one layout of the transposed keys
// A backward task per group from 16 groups on: enough tasks to keep 16
// cores busy; below, the finer split, whose 7 products a tile cost 40% more
// than 5 on one core but spread over (group, block) tasks.
constexpr int64_t kGroupsForWholeGroups = 16;

constexpr double kInf = std::numeric_limits<double>::infinity();

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              float(alpha), a, int(lda), b, int(ldb), float(beta), c, int(ldc));
}
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// ---- one call ---------------------------------------------------------------------

// The descriptor checked; FLX_OK, or the status with the message naming `call`.
int check(const char* call, const flx_attention_desc* d, bool backward) {
  const std::string c(call);
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, c + ": the descriptor is a null pointer");
  if (d->struct_size < sizeof(flx_attention_desc))
    return fail(FLX_ERR_INVALID_ARGUMENT, c + ": struct_size is " + std::to_string(d->struct_size) +
                                              ", expected at least sizeof(flx_attention_desc) = " +
                                              std::to_string(sizeof(flx_attention_desc)));
  if (d->dtype != FLX_F32 && d->dtype != FLX_F64 && d->dtype != FLX_F16 && d->dtype != FLX_BF16)
    return fail(FLX_ERR_UNSUPPORTED, c + ": attention runs on floating dtypes only (dtype " +
                                         std::to_string(d->dtype) + ")");
  if (d->head_dim_qk < 1 || d->head_dim_v < 1 || d->nheads < 1 || d->q_len < 1 || d->kv_len < 1 || d->batch < 1)
    return fail(FLX_ERR_INVALID_ARGUMENT,
                c + ": every size must be >= 1 (libflx handles empty ones); got head dims " +
                    std::to_string(d->head_dim_qk) + " and " + std::to_string(d->head_dim_v) + ", nheads " +
                    std::to_string(d->nheads) + ", lengths " + std::to_string(d->q_len) + " and " +
                    std::to_string(d->kv_len) + ", batch " + std::to_string(d->batch));
  if (d->causal && d->q_len != d->kv_len)
    return fail(FLX_ERR_INVALID_ARGUMENT, c + ": causal attention needs q_len == kv_len; got " +
                                              std::to_string(d->q_len) + " and " + std::to_string(d->kv_len));
  if (!(d->dropout >= 0 && d->dropout < 1))
    return fail(FLX_ERR_INVALID_ARGUMENT, c + ": dropout must lie in [0, 1); got " + std::to_string(d->dropout));
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();  // OpenBLAS's int interface
  if (std::max({d->head_dim_qk * d->nheads, d->head_dim_v * d->nheads, d->q_len, d->kv_len}) > kIntMax)
    return fail(FLX_ERR_UNSUPPORTED, c + ": a leading dimension or length above 2^31 - 1");
  if (!d->q.buf || !d->k.buf || !d->v.buf || !d->o.buf)
    return fail(FLX_ERR_INVALID_ARGUMENT, c + ": q, k, v and o must be set");
  if (backward && (!d->lse.buf || !d->dout.buf || !d->dq.buf || !d->dk.buf || !d->dv.buf))
    return fail(FLX_ERR_INVALID_ARGUMENT, c + ": the backward pass needs lse, dout, dq, dk and dv");
  return FLX_OK;
}

// Scratch of one task, kept per thread between calls (a few tiles).
template <class C>
struct TaskScratch {
  std::vector<C> s, dp, pd, f, acc, m, l, m_new, corr;
  std::vector<C> dk, dv, dq;  // the backward's sums (assigned by their tasks)
  void reserve(int64_t tile, int64_t cols, int64_t dv) {
    for (auto* v : {&s, &dp, &pd, &f})
      if (int64_t(v->size()) < tile) v->resize(size_t(tile));
    if (int64_t(acc.size()) < dv * cols) acc.resize(size_t(dv * cols));
    for (auto* v : {&m, &l, &m_new, &corr})
      if (int64_t(v->size()) < cols) v->resize(size_t(cols));
  }
};
template <class C>
TaskScratch<C>& task_scratch() {
  thread_local TaskScratch<C> s;
  return s;
}

// A group's keys (or values) transposed, so that the tiles' scores kᵀq
// (and vᵀdO) are products of untransposed operands, which OpenBLAS runs
// through its small-matrix kernels without packing (a transposed A of this
// size takes the packing path). Laid out by blocks of kKeyBlock keys, each
// a contiguous kKeyBlock × d matrix (leading dim kKeyBlock), so that a
// tile reads 16 KiB in one run rather than d columns a power-of-two
// stride apart, which fall into the same cache sets at long lengths (a
// third slower at 8192 keys). Kept per thread for the tasks of one group in
// a row (a task cuts no value: the copy is exact); `call` tells one call's
// operands from the next one's.
std::atomic<uint64_t> g_calls{0};
template <class C>
struct Transposed {
  std::vector<C> data;
  uint64_t call = ~uint64_t(0);
  int64_t group = -1;
  // x (d × len, leading dim ld, of any floating type) of group g in call
  // `call`, transposed; key j0 + jj of the block starting at j0 is at
  // at(j0) + jj, leading dim kKeyBlock.
  template <class T>
  const C* of(uint64_t c, int64_t g, const T* x, int64_t d, int64_t len, int64_t ld) {
    if (c == call && g == group) return data.data();
    const int64_t blocks = (len + kKeyBlock - 1) / kKeyBlock;
    if (int64_t(data.size()) < blocks * kKeyBlock * d) data.resize(size_t(blocks * kKeyBlock * d));
    constexpr int64_t kRun = 16;  // 16 keys at a time: reads and writes in runs of 16 or more
    for (int64_t j0 = 0; j0 < len; j0 += kRun) {
      const int64_t nj = std::min(kRun, len - j0);
      C* out = data.data() + at(j0 / kKeyBlock * kKeyBlock, d) + j0 % kKeyBlock;
      for (int64_t e = 0; e < d; ++e)
        for (int64_t j = 0; j < nj; ++j) out[j + kKeyBlock * e] = C(load(x[(j0 + j) * ld + e]));
    }
    call = c;
    group = g;
    return data.data();
  }
  static int64_t at(int64_t j0, int64_t d) { return j0 * d; }  // j0 a multiple of kKeyBlock
};
template <class C>
Transposed<C>& transposed_keys() {
  thread_local Transposed<C> t;
  return t;
}
template <class C>
Transposed<C>& transposed_values() {
  thread_local Transposed<C> t;
  return t;
}

// A group's columns (d × len, leading dim ld in flx's layout, of any
// floating type) copied contiguous (leading dim d) in C, per thread, for
// the tasks of one group in a row: the backward's tiles read q, k and dO a
// block at a time, each block then 16 KiB in one run rather than columns a
// power-of-two stride apart (a tenth slower at 8192 keys); the forward
// reads halves' q and v so. `call` as Transposed's.
template <class C>
struct Packed {
  std::vector<C> data;
  uint64_t call = ~uint64_t(0);
  int64_t group = -1;
  template <class T>
  const C* of(uint64_t c, int64_t g, const T* x, int64_t d, int64_t len, int64_t ld) {
    if (c == call && g == group) return data.data();
    if (int64_t(data.size()) < d * len) data.resize(size_t(d * len));
    for (int64_t j = 0; j < len; ++j)
      for (int64_t e = 0; e < d; ++e) data[size_t(j * d + e)] = C(load(x[j * ld + e]));
    call = c;
    group = g;
    return data.data();
  }
};
template <class C, int Which>  // 0 q, 1 k, 2 dO, 3 v
Packed<C>& packed() {
  thread_local Packed<C> p;
  return p;
}

// The operands of one call, of storage type B, computed in C (float for
// halves).
template <class C, class B>
struct Problem {
  int64_t dq, dv, H, Lq, Lk, batch;
  C scale;
  bool causal;
  double dropout;
  double keep_threshold;  // dropout_keep::threshold in the storage dtype
  C keep_scale;
  int32_t dtype;
  uint64_t seed, offset;
  const B *q, *k, *v;
  const uint8_t* mask;
  const B* bias;
  const int64_t* ms;
  const int64_t* bs;
  B* o;
  C* lse;  // null in inference
  // backward
  const B* dout;
  B *dq_, *dk, *dv_;
  B* dbias;

  uint64_t call = 0;  // g_calls when the call began: tells the per-thread transposes apart
  int64_t groups() const { return H * batch; }
  int64_t ldq() const { return dq * H; }
  int64_t ldv() const { return dv * H; }
  // Group g = h + H b's first element in q/k (qk) and v/o (vv) layouts.
  int64_t q_at(int64_t g) const { return dq * (g % H + H * Lq * (g / H)); }
  int64_t k_at(int64_t g) const { return dq * (g % H + H * Lk * (g / H)); }
  int64_t v_at(int64_t g) const { return dv * (g % H + H * Lk * (g / H)); }
  int64_t o_at(int64_t g) const { return dv * (g % H + H * Lq * (g / H)); }

  // S (nk × nq, ld nk) = scale kᵀq + bias for keys j0.., queries i0.. of
  // group g, -Inf where not allowed.
  // qcols: query i0's column, leading dim ldqc (flx's q, or a contiguous copy).
  void scores(int64_t g, int64_t j0, int64_t nk, int64_t i0, int64_t nq, C* s, const C* qcols, int64_t ldqc) const {
    const C* kt = transposed_keys<C>().of(call, g, k + k_at(g), dq, Lk, ldq()) + Transposed<C>::at(j0, dq);
    blas_gemm(false, false, nk, nq, dq, double(scale), kt, kKeyBlock, qcols, ldqc, 0, s, nk);
    const int64_t h = g % H, b = g / H;
    for (int64_t c = 0; c < nq; ++c) {
      const int64_t i = i0 + c;
      C* col = s + c * nk;
      if (bias) {
        const B* bc = bias + (i * bs[1] + h * bs[2] + b * bs[3]) + j0 * bs[0];
        for (int64_t jj = 0; jj < nk; ++jj) col[jj] += C(load(bc[jj * bs[0]]));
      }
      if (mask) {
        const uint8_t* mc = mask + (i * ms[1] + h * ms[2] + b * ms[3]) + j0 * ms[0];
        for (int64_t jj = 0; jj < nk; ++jj)
          if (!mc[jj * ms[0]]) col[jj] = C(-kInf);
      }
      if (causal)
        for (int64_t jj = std::max<int64_t>(0, i + 1 - j0); jj < nk; ++jj) col[jj] = C(-kInf);
    }
  }
  // The tile's dropout factors (nk × nq): 1/(1 - p) where element e = j +
  // Lk (i + Lq g) of the uniform fill is kept (backend.h), else 0.
  void factors(int64_t g, int64_t j0, int64_t nk, int64_t i0, int64_t nq, C* f) const {
    for (int64_t c = 0; c < nq; ++c) {
      const uint64_t e0 = uint64_t(j0 + Lk * (i0 + c + Lq * g));
      for (int64_t jj = 0; jj < nk; ++jj)
        f[c * nk + jj] =
            dropout_keep::uniform(dtype, seed, offset, e0 + uint64_t(jj)) >= keep_threshold ? keep_scale : C(0);
    }
  }
  // The first key a causal query block sees none after: keys j <= i.
  int64_t key_end(int64_t i0, int64_t nq) const { return causal ? std::min(Lk, i0 + nq) : Lk; }
};

// ---- forward ----------------------------------------------------------------------

template <class C, class B>
void forward_task(const Problem<C, B>& P, int64_t g, int64_t i0, int64_t nq) {
  TaskScratch<C>& t = task_scratch<C>();
  t.reserve(kKeyBlock * kQueryBlock, kQueryBlock, P.dv);
  C *s = t.s.data(), *f = t.f.data(), *acc = t.acc.data(), *m = t.m.data(), *l = t.l.data();
  C *m_new = t.m_new.data(), *corr = t.corr.data();
  std::fill(m, m + nq, C(-kInf));
  std::fill(l, l + nq, C(0));
  std::fill(acc, acc + P.dv * nq, C(0));
  // q and v in C: Float32 and Float64 in place, halves converted per group.
  const C *qc, *vc;
  int64_t ldqc, ldvc;
  if constexpr (std::is_same_v<C, B>) {
    qc = P.q + P.q_at(g) + i0 * P.ldq();
    vc = P.v + P.v_at(g);
    ldqc = P.ldq();
    ldvc = P.ldv();
  } else {
    qc = packed<C, 0>().of(P.call, g, P.q + P.q_at(g), P.dq, P.Lq, P.ldq()) + i0 * P.dq;
    vc = packed<C, 3>().of(P.call, g, P.v + P.v_at(g), P.dv, P.Lk, P.ldv());
    ldqc = P.dq;
    ldvc = P.dv;
  }
  const int64_t end = P.key_end(i0, nq);
  for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, end - j0);
    P.scores(g, j0, nk, i0, nq, s, qc, ldqc);
    // Each query's new running maximum, and the factor e^(m_old - m_new)
    // its sum and output so far take (0 before its first allowed key).
    for (int64_t c = 0; c < nq; ++c) {
      m_new[c] = std::max(m[c], attention_math::column_max(s + c * nk, nk));
      corr[c] = m_new[c] == C(-kInf) ? C(0) : m[c] - m_new[c];  // -Inf - finite = -Inf: a factor of 0
    }
    attention_math::exp_shifted(corr, nq, C(0));
    for (int64_t c = 0; c < nq; ++c) {
      C* col = s + c * nk;
      if (m_new[c] == C(-kInf)) {  // no key allowed yet: nothing to add
        std::fill(col, col + nk, C(0));
        continue;
      }
      l[c] = l[c] * corr[c] + attention_math::exp_shifted(col, nk, m_new[c]);
      m[c] = m_new[c];
      if (corr[c] != C(1)) {
        C* a = acc + c * P.dv;
        for (int64_t e = 0; e < P.dv; ++e) a[e] *= corr[c];
      }
    }
    if (P.dropout > 0) {  // after l: the probabilities sum to one before dropout
      P.factors(g, j0, nk, i0, nq, f);
      for (int64_t x = 0; x < nk * nq; ++x) s[x] *= f[x];
    }
    blas_gemm(false, false, P.dv, nq, nk, 1, vc + j0 * ldvc, ldvc, s, nk, 1, acc, P.dv);
  }
  // o = acc / l: 0/0 = NaN where no key was allowed; lse = m + log l (-Inf there).
  B* o = P.o + P.o_at(g) + i0 * P.ldv();
  for (int64_t c = 0; c < nq; ++c) {
    for (int64_t e = 0; e < P.dv; ++e) o[c * P.ldv() + e] = store<B>(acc[c * P.dv + e] / l[c]);
    if (P.lse) P.lse[(i0 + c) + P.Lq * g] = m[c] + C(std::log(l[c]));
  }
}

template <class C, class B>
void forward(const Problem<C, B>& P) {
  const int64_t blocks = (P.Lq + kQueryBlock - 1) / kQueryBlock, tasks = P.groups() * blocks;
  parallel_for(tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t g = task / blocks, i0 = (task % blocks) * kQueryBlock;
      forward_task(P, g, i0, std::min(kQueryBlock, P.Lq - i0));
    }
  });
}

// ---- backward ---------------------------------------------------------------------

// D = rowsum(dO ∘ O) of one group's queries, into d (Lq).
template <class C, class B>
void row_dots(const Problem<C, B>& P, int64_t g, C* d) {
  for (int64_t i = 0; i < P.Lq; ++i) {
    const B* o = P.o + P.o_at(g) + i * P.ldv();
    const B* go = P.dout + P.o_at(g) + i * P.ldv();
    double s = 0;
    for (int64_t e = 0; e < P.dv; ++e) s += double(load(o[e])) * double(load(go[e]));
    d[i] = C(s);
  }
}

// What a backward task's tiles read and add to: its group's q, k and dO
// contiguous, D, and its own contiguous sums: dK and dV of one key block
// (dk, dv: d × kKeyBlock; null when the task computes none) and dQ of the
// queries from dq_first on (dq: null when it computes none).
template <class C>
struct TaskView {
  const C *q, *k, *dout, *D;
  C *dk, *dv, *dq;
  int64_t dq_first = 0;
};

// One tile of the backward pass: keys j0.. (nk) and queries i0.. (nq) of
// group g. With v.dk: dV and dK of the keys gain the tile's terms (dbias
// its entries); with v.dq: dQ of the queries gains its terms.
template <class C, class B>
void backward_tile(const Problem<C, B>& P, int64_t g, int64_t j0, int64_t nk, int64_t i0, int64_t nq,
                   const TaskView<C>& v) {
  TaskScratch<C>& t = task_scratch<C>();
  t.reserve(kBackKeyBlock * kBackQueryBlock, kBackQueryBlock, P.dv);
  C *s = t.s.data(), *dp = t.dp.data(), *pd = t.pd.data(), *f = t.f.data();
  const bool dkdv = v.dk != nullptr;
  P.scores(g, j0, nk, i0, nq, s, v.q + i0 * P.dq, P.dq);
  for (int64_t c = 0; c < nq; ++c) attention_math::exp_shifted(s + c * nk, nk, P.lse[(i0 + c) + P.Lq * g]);  // p
  const bool dropped = P.dropout > 0;
  const C* p_used = s;
  if (dropped) {
    P.factors(g, j0, nk, i0, nq, f);
    for (int64_t x = 0; x < nk * nq; ++x) pd[x] = s[x] * f[x];
    p_used = pd;
  }
  const C* dout = v.dout + i0 * P.dv;
  // dV += dO p_usedᵀ; dP = Vᵀ dO.
  if (dkdv) blas_gemm(false, true, P.dv, nk, nq, 1, dout, P.dv, p_used, nk, 1, v.dv, P.dv);
  const C* vt = transposed_values<C>().of(P.call, g, P.v + P.v_at(g), P.dv, P.Lk, P.ldv()) + Transposed<C>::at(j0, P.dv);
  blas_gemm(false, false, nk, nq, P.dv, 1, vt, kKeyBlock, dout, P.dv, 0, dp, nk);
  // dS = p (dP ∘ factors - D), in dp.
  for (int64_t c = 0; c < nq; ++c) {
    C* d = dp + c * nk;
    const C* p = s + c * nk;
    const C Di = v.D[i0 + c];
    if (dropped) {
      const C* fc = f + c * nk;
      for (int64_t jj = 0; jj < nk; ++jj) d[jj] = p[jj] * (d[jj] * fc[jj] - Di);
    } else {
      for (int64_t jj = 0; jj < nk; ++jj) d[jj] = p[jj] * (d[jj] - Di);
    }
  }
  if (dkdv && P.dbias) {
    for (int64_t c = 0; c < nq; ++c) {
      B* out = P.dbias + (j0 + P.Lk * (i0 + c + P.Lq * g));
      for (int64_t jj = 0; jj < nk; ++jj) out[jj] = store<B>(dp[c * nk + jj]);
    }
  }
  // dQ += scale K dS; dK += scale Q dSᵀ.
  if (v.dq)
    blas_gemm(false, false, P.dq, nq, nk, double(P.scale), v.k + j0 * P.dq, P.dq, dp, nk, 1,
              v.dq + (i0 - v.dq_first) * P.dq, P.dq);
  if (dkdv) blas_gemm(false, true, P.dq, nk, nq, double(P.scale), v.q + i0 * P.dq, P.dq, dp, nk, 1, v.dk, P.dq);
}

// n columns of d contiguous elements into x (leading dim ld), rounded to x's type.
template <class C, class B>
void scatter_columns(const C* src, int64_t d, int64_t n, B* x, int64_t ld) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t e = 0; e < d; ++e) x[i * ld + e] = store<B>(src[i * d + e]);
}

// The first query block a causal key block j0 meets (queries i >= j0).
int64_t first_query_block(bool causal, int64_t j0, int64_t qb) { return causal ? (j0 / qb) * qb : 0; }

template <class C, class B>
void backward(const Problem<C, B>& P) {
  const int64_t G = P.groups(), KB = kBackKeyBlock, QB = kBackQueryBlock;
  const int64_t kblocks = (P.Lk + KB - 1) / KB, qblocks = (P.Lq + QB - 1) / QB;
  std::vector<C> D(size_t(P.Lq * G));
  parallel_for(G, std::max<int64_t>(1, grain_of(P.Lq * P.dv)), [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) row_dots(P, g, D.data() + P.Lq * g);
  });
  if (P.dbias && P.causal) {  // entries of the tiles the loops skip (keys after the query) are 0
    parallel_for(G, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) std::fill(P.dbias + P.Lk * P.Lq * g, P.dbias + P.Lk * P.Lq * (g + 1), store<B>(0.0f));
    });
  }
  // The task's view of group g (its sums set by the caller).
  auto view = [&](int64_t g) {
    TaskView<C> v{};
    v.q = packed<C, 0>().of(P.call, g, P.q + P.q_at(g), P.dq, P.Lq, P.ldq());
    v.k = packed<C, 1>().of(P.call, g, P.k + P.k_at(g), P.dq, P.Lk, P.ldq());
    v.dout = packed<C, 2>().of(P.call, g, P.dout + P.o_at(g), P.dv, P.Lq, P.ldv());
    v.D = D.data() + P.Lq * g;
    return v;
  };
  // Keys j0.. against every query block they meet, in order; their dK and
  // dV summed in the task's own buffers, then written.
  auto key_block = [&](int64_t g, int64_t j0, TaskView<C> v) {
    TaskScratch<C>& t = task_scratch<C>();
    const int64_t nk = std::min(KB, P.Lk - j0);
    t.dk.assign(size_t(P.dq * KB), C(0));
    t.dv.assign(size_t(P.dv * KB), C(0));
    v.dk = t.dk.data();
    v.dv = t.dv.data();
    for (int64_t i0 = first_query_block(P.causal, j0, QB); i0 < P.Lq; i0 += QB)
      backward_tile(P, g, j0, nk, i0, std::min(QB, P.Lq - i0), v);
    scatter_columns(t.dk.data(), P.dq, nk, P.dk + P.k_at(g) + j0 * P.ldq(), P.ldq());
    scatter_columns(t.dv.data(), P.dv, nk, P.dv_ + P.v_at(g) + j0 * P.ldv(), P.ldv());
  };
  if (G >= kGroupsForWholeGroups) {
    parallel_for(G, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) {
        TaskScratch<C>& t = task_scratch<C>();
        t.dq.assign(size_t(P.dq * P.Lq), C(0));
        TaskView<C> v = view(g);
        v.dq = t.dq.data();
        for (int64_t j0 = 0; j0 < P.Lk; j0 += KB) key_block(g, j0, v);
        scatter_columns(t.dq.data(), P.dq, P.Lq, P.dq_ + P.q_at(g), P.ldq());
      }
    });
    return;
  }
  parallel_for(G * kblocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) key_block(task / kblocks, (task % kblocks) * KB, view(task / kblocks));
  });
  parallel_for(G * qblocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t g = task / qblocks, i0 = (task % qblocks) * QB, nq = std::min(QB, P.Lq - i0);
      TaskScratch<C>& t = task_scratch<C>();
      t.dq.assign(size_t(P.dq * nq), C(0));
      TaskView<C> v = view(g);
      v.dq = t.dq.data();
      v.dq_first = i0;
      for (int64_t j0 = 0; j0 < P.key_end(i0, nq); j0 += KB)
        backward_tile(P, g, j0, std::min(KB, P.key_end(i0, nq) - j0), i0, nq, v);
      scatter_columns(t.dq.data(), P.dq, nq, P.dq_ + P.q_at(g) + i0 * P.ldq(), P.ldq());
    }
  });
}

// ---- element types ----------------------------------------------------------------

template <class T>
const T* at(flx_mem m) {
  return reinterpret_cast<const T*>(addr(m));
}
template <class T>
T* at_mut(flx_mem m) {
  return reinterpret_cast<T*>(addr(m));
}

template <class C, class B>
Problem<C, B> problem(const flx_attention_desc& d) {
  Problem<C, B> P{};
  P.dq = d.head_dim_qk;
  P.dv = d.head_dim_v;
  P.H = d.nheads;
  P.Lq = d.q_len;
  P.Lk = d.kv_len;
  P.batch = d.batch;
  P.scale = C(d.scale);
  P.causal = d.causal != 0;
  P.dropout = d.dropout;
  P.dtype = d.dtype;
  P.keep_threshold = dropout_keep::threshold(d.dtype, d.dropout);
  P.keep_scale = C(1.0 / (1.0 - d.dropout));
  P.call = ++g_calls;
  P.seed = d.dropout_seed;
  P.offset = d.dropout_offset;
  P.mask = d.mask.buf ? at<uint8_t>(d.mask) : nullptr;
  P.bias = d.bias.buf ? at<B>(d.bias) : nullptr;
  P.ms = d.mask_stride;
  P.bs = d.bias_stride;
  P.lse = d.lse.buf ? at_mut<C>(d.lse) : nullptr;
  return P;
}

template <class T>
int run(const flx_attention_desc& d, bool backward_pass) {
  using C = compute_t<T>;
  Problem<C, T> P = problem<C, T>(d);
  P.q = at<T>(d.q);
  P.k = at<T>(d.k);
  P.v = at<T>(d.v);
  P.o = at_mut<T>(d.o);
  if (!backward_pass) {
    forward(P);
    return FLX_OK;
  }
  P.dout = at<T>(d.dout);
  P.dq_ = at_mut<T>(d.dq);
  P.dk = at_mut<T>(d.dk);
  P.dv_ = at_mut<T>(d.dv);
  P.dbias = d.dbias.buf ? at_mut<T>(d.dbias) : nullptr;
  backward(P);
  return FLX_OK;
}

int dispatch(const char* call, const flx_attention_desc* d, bool backward_pass) {
  // The pool parallelises: OpenBLAS's own threads stay idle (as cpu_gemm.cpp).
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  if (const int st = check(call, d, backward_pass); st != FLX_OK) return st;
  switch (d->dtype) {
    case FLX_F32: return run<float>(*d, backward_pass);
    case FLX_F64: return run<double>(*d, backward_pass);
    case FLX_F16: return run<Half>(*d, backward_pass);
    default: return run<BHalf>(*d, backward_pass);
  }
}

}  // namespace

int attention_forward(void*, int, const flx_attention_desc* d, flx_stream) {
  return dispatch("attention_forward", d, false);
}
int attention_backward(void*, int, const flx_attention_desc* d, flx_stream) {
  return dispatch("attention_backward", d, true);
}

}  // namespace flx::cpu_backend

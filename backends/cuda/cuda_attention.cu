// The dnn table's attention calls (backend.h, flx_attention_desc, ABI
// minor 7): the entry points, and kernels on the CUDA cores for every
// floating dtype and head size up to 256 (halves computed in float).
// Float16 and BFloat16 with equal head sizes of 16 to 128 run on the tensor
// cores instead (cuda_attention_wmma.cu).
//
// Forward: a block holds 32 query rows of one (head, batch), four lanes a
// row, each lane a quarter of the row's features (d = lane, lane + 4, ...);
// it walks the keys in tiles staged in shared memory, with flash
// attention's running maximum and sum, and writes o and the row's
// log-sum-exp. Backward: a kernel over key rows writes dk and dv, walking
// the queries; one over query rows writes dq, walking the keys; both
// recompute p from the saved log-sum-exp, so nothing quadratic is stored
// and no two blocks write the same element (no atomics: the same bits on
// every run).
#include <algorithm>
#include <cmath>
#include <string>

#include "cuda_attention.hpp"
#include "cuda_attention_elem.cuh"

namespace flx_cuda {
namespace {

constexpr int kLanes = 4;                   // lanes a row
constexpr int kThreads = 128;               // a block
constexpr int kRows = kThreads / kLanes;    // rows a block
constexpr size_t kSharedBytes = 48 * 1024;  // the default dynamic limit

// The four lanes of a row sum their parts (xor shuffles: every lane gets
// the same bits, since each pair adds the same two values).
template <class C>
__device__ __forceinline__ C row_sum(C v) {
  const unsigned group = 0xFu << (threadIdx.x & 28u);
  v += __shfl_xor_sync(group, v, 1);
  v += __shfl_xor_sync(group, v, 2);
  return v;
}

template <class C>
__device__ __forceinline__ C exp_of(C x) {
  if constexpr (std::is_same_v<C, double>) return ::exp(x);
  else return ::expf(x);
}
template <class C>
__device__ __forceinline__ C log_of(C x) {
  if constexpr (std::is_same_v<C, double>) return ::log(x);
  else return ::logf(x);
}
template <class C>
__device__ __forceinline__ C fma_of(C a, C b, C c) {
  if constexpr (std::is_same_v<C, double>) return ::fma(a, b, c);
  else return ::fmaf(a, b, c);
}

// Stage rows [r0, r0 + n) of a (dim, H, L, B) tensor's head h, batch b into
// shared memory as compute values, row after row.
template <class T, class C>
__device__ void stage(C* dst, const T* src, int64_t dim, const AttnArgs& a, int64_t len, int64_t h, int64_t b,
                      int64_t r0, int n) {
  for (int t = threadIdx.x; t < n * dim; t += blockDim.x) {
    const int r = int(t / dim);
    const int64_t d = t - int64_t(r) * dim;
    dst[t] = C(load(src[d + dim * (h + a.H * (r0 + r + len * b))]));
  }
}

// ---- forward ------------------------------------------------------------------
template <class T, int N>  // N: features a lane holds (>= ceil(max(hq, hv) / 4))
__global__ void __launch_bounds__(kThreads) attn_forward_kernel(AttnArgs a, int tile, attn::Dropout<T> drop) {
  using C = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared[];
  C* ks = reinterpret_cast<C*>(shared);
  C* vs = ks + tile * a.hq;
  const int lane = threadIdx.x % kLanes;
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x / kLanes;
  const bool live = i < a.Lq;
  const T* q = static_cast<const T*>(a.q);
  C qr[N], acc[N];
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    qr[t] = live && d < a.hq ? C(load(q[attn::q_at(a, d, h, i, b)])) : C(0);
    acc[t] = C(0);
  }
  const C scale = C(a.scale);
  C m = C(-INFINITY), l = C(0);
  const int64_t end = a.causal ? std::min(a.Lk, (int64_t(blockIdx.x) + 1) * kRows) : a.Lk;
  for (int64_t j0 = 0; j0 < end; j0 += tile) {
    const int n = int(std::min<int64_t>(tile, end - j0));
    __syncthreads();
    stage<T, C>(ks, static_cast<const T*>(a.k), a.hq, a, a.Lk, h, b, j0, n);
    stage<T, C>(vs, static_cast<const T*>(a.v), a.hv, a, a.Lk, h, b, j0, n);
    __syncthreads();
    if (!live) continue;
    for (int jj = 0; jj < n; ++jj) {
      const int64_t j = j0 + jj;
      C dot = C(0);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hq) dot = fma_of(qr[t], ks[jj * a.hq + d], dot);
      }
      dot = row_sum(dot);
      if (!attn::allowed(a, j, i, h, b)) continue;
      const C s = attn::logit<T>(a, dot * scale, j, i, h, b);
      if (s == C(-INFINITY)) continue;  // weight 0 (a -Inf bias)
      if (s > m) {  // a new maximum: rescale what the row holds (m = -Inf: nothing yet)
        const C c = exp_of(m - s);
        l *= c;
#pragma unroll
        for (int t = 0; t < N; ++t) acc[t] *= c;
        m = s;
      }
      const C p = exp_of(s - m);
      l += p;
      const C w = drop.on ? (drop.keep(a, attn::pair_at(a, j, i, h, b)) ? p * drop.scale_t : C(0)) : p;
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hv) acc[t] = fma_of(w, vs[jj * a.hv + d], acc[t]);
      }
    }
  }
  if (!live) return;
  T* o = static_cast<T*>(a.out);
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    if (d < a.hv) o[attn::o_at(a, d, h, i, b)] = store<T>(acc[t] / l);  // l = 0: no key allowed, NaN
  }
  if (a.lse && lane == 0) static_cast<C*>(a.lse)[attn::row_at(a, i, h, b)] = m + log_of(l);
}

// ---- backward -------------------------------------------------------------------
// rowdot[i, h, b] = sum_d dout[d, h, i, b] o[d, h, i, b]: one thread a row.
template <class T>
__global__ void attn_rowdot_kernel(AttnArgs a) {
  using C = compute_t<T>;
  const int64_t rows = a.Lq * a.H * a.B;
  const T* o = static_cast<const T*>(a.o);
  const T* g = static_cast<const T*>(a.dout);
  for (int64_t r = global_index(); r < rows; r += global_stride()) {
    const int64_t i = r % a.Lq, h = (r / a.Lq) % a.H, b = r / (a.Lq * a.H);
    C s = C(0);
    for (int64_t d = 0; d < a.hv; ++d) {
      const int64_t at = attn::o_at(a, d, h, i, b);
      s += C(load(g[at])) * C(load(o[at]));
    }
    static_cast<C*>(a.rowdot)[r] = s;
  }
}

// What the backward needs of pair (j, i): p with dropout applied (for dv)
// and ds = dloss/ds (for dq, dk and dbias).
template <class C>
struct PairGrad {
  C p_kept, ds;
};
template <class T, class C>
__device__ __forceinline__ PairGrad<C> pair_grad(const AttnArgs& a, const attn::Dropout<T>& drop, C kq, C dpv,
                                                    C lse, C rowdot, int64_t j, int64_t i, int64_t h, int64_t b) {
  if (!attn::allowed(a, j, i, h, b)) return {C(0), C(0)};
  const C s = attn::logit<T>(a, kq, j, i, h, b);
  const C p = s == C(-INFINITY) ? C(0) : exp_of(s - lse);
  C kept = C(1);
  if (drop.on) kept = drop.keep(a, attn::pair_at(a, j, i, h, b)) ? drop.scale_t : C(0);
  return {p * kept, p * (dpv * kept - rowdot)};
}

// dk and dv: a block holds 32 key rows, walking the queries.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) attn_dkdv_kernel(AttnArgs a, int tile, attn::Dropout<T> drop) {
  using C = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared[];
  C* qs = reinterpret_cast<C*>(shared);
  C* gs = qs + tile * a.hq;        // dout rows
  C* lses = gs + tile * a.hv;      // the rows' lse
  C* dots = lses + tile;           // the rows' row dots
  const int lane = threadIdx.x % kLanes;
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t j = int64_t(blockIdx.x) * kRows + threadIdx.x / kLanes;
  const bool live = j < a.Lk;
  C kr[N], vr[N], dk[N], dv[N];
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    kr[t] = live && d < a.hq ? C(load(static_cast<const T*>(a.k)[attn::k_at(a, d, h, j, b)])) : C(0);
    vr[t] = live && d < a.hv ? C(load(static_cast<const T*>(a.v)[attn::v_at(a, d, h, j, b)])) : C(0);
    dk[t] = dv[t] = C(0);
  }
  const C scale = C(a.scale);
  const int64_t start = a.causal ? int64_t(blockIdx.x) * kRows : 0;  // queries before the block's first key see none of it
  for (int64_t i0 = start; i0 < a.Lq; i0 += tile) {
    const int n = int(std::min<int64_t>(tile, a.Lq - i0));
    __syncthreads();
    stage<T, C>(qs, static_cast<const T*>(a.q), a.hq, a, a.Lq, h, b, i0, n);
    stage<T, C>(gs, static_cast<const T*>(a.dout), a.hv, a, a.Lq, h, b, i0, n);
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
      lses[t] = static_cast<const C*>(a.lse)[attn::row_at(a, i0 + t, h, b)];
      dots[t] = static_cast<const C*>(a.rowdot)[attn::row_at(a, i0 + t, h, b)];
    }
    __syncthreads();
    if (!live) continue;
    for (int ii = 0; ii < n; ++ii) {
      const int64_t i = i0 + ii;
      C kq = C(0), dpv = C(0);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hq) kq = fma_of(kr[t], qs[ii * a.hq + d], kq);
        if (d < a.hv) dpv = fma_of(vr[t], gs[ii * a.hv + d], dpv);
      }
      kq = row_sum(kq) * scale;
      dpv = row_sum(dpv);
      const PairGrad<C> g = pair_grad<T, C>(a, drop, kq, dpv, lses[ii], dots[ii], j, i, h, b);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hv) dv[t] = fma_of(g.p_kept, gs[ii * a.hv + d], dv[t]);
        if (d < a.hq) dk[t] = fma_of(g.ds, qs[ii * a.hq + d], dk[t]);
      }
      if (a.dbias && lane == 0) static_cast<T*>(a.dbias)[attn::pair_at(a, j, i, h, b)] = store<T>(g.ds);
    }
  }
  if (!live) return;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    if (d < a.hq) static_cast<T*>(a.dk)[attn::k_at(a, d, h, j, b)] = store<T>(dk[t] * scale);
    if (d < a.hv) static_cast<T*>(a.dv)[attn::v_at(a, d, h, j, b)] = store<T>(dv[t]);
  }
}

// dq: a block holds 32 query rows, walking the keys.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) attn_dq_kernel(AttnArgs a, int tile, attn::Dropout<T> drop) {
  using C = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared[];
  C* ks = reinterpret_cast<C*>(shared);
  C* vs = ks + tile * a.hq;
  const int lane = threadIdx.x % kLanes;
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x / kLanes;
  const bool live = i < a.Lq;
  C qr[N], gr[N], dq[N];
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    qr[t] = live && d < a.hq ? C(load(static_cast<const T*>(a.q)[attn::q_at(a, d, h, i, b)])) : C(0);
    gr[t] = live && d < a.hv ? C(load(static_cast<const T*>(a.dout)[attn::o_at(a, d, h, i, b)])) : C(0);
    dq[t] = C(0);
  }
  const C lse = live ? static_cast<const C*>(a.lse)[attn::row_at(a, i, h, b)] : C(0);
  const C rowdot = live ? static_cast<const C*>(a.rowdot)[attn::row_at(a, i, h, b)] : C(0);
  const C scale = C(a.scale);
  const int64_t end = a.causal ? std::min(a.Lk, (int64_t(blockIdx.x) + 1) * kRows) : a.Lk;
  for (int64_t j0 = 0; j0 < end; j0 += tile) {
    const int n = int(std::min<int64_t>(tile, end - j0));
    __syncthreads();
    stage<T, C>(ks, static_cast<const T*>(a.k), a.hq, a, a.Lk, h, b, j0, n);
    stage<T, C>(vs, static_cast<const T*>(a.v), a.hv, a, a.Lk, h, b, j0, n);
    __syncthreads();
    if (!live) continue;
    for (int jj = 0; jj < n; ++jj) {
      const int64_t j = j0 + jj;
      C kq = C(0), dpv = C(0);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hq) kq = fma_of(qr[t], ks[jj * a.hq + d], kq);
        if (d < a.hv) dpv = fma_of(gr[t], vs[jj * a.hv + d], dpv);
      }
      kq = row_sum(kq) * scale;
      dpv = row_sum(dpv);
      const PairGrad<C> g = pair_grad<T, C>(a, drop, kq, dpv, lse, rowdot, j, i, h, b);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int64_t d = lane + kLanes * t;
        if (d < a.hq) dq[t] = fma_of(g.ds, ks[jj * a.hq + d], dq[t]);
      }
    }
  }
  if (!live) return;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int64_t d = lane + kLanes * t;
    if (d < a.hq) static_cast<T*>(a.dq)[attn::q_at(a, d, h, i, b)] = store<T>(dq[t] * scale);
  }
}

// ---- launching --------------------------------------------------------------------
// Rows of a shared tile: as many as 48 KiB holds (at most 64), given the
// bytes a row takes.
int tile_rows(size_t row_bytes) { return int(std::min<size_t>(64, kSharedBytes / row_bytes)); }

constexpr int64_t kMaxHead = kLanes * 64;  // the largest head size the CUDA-core kernels take

template <class T, int N>
int launch_all(cudaStream_t st, int32_t dtype, const AttnArgs& a, int pass) {
  using C = compute_t<T>;
  const attn::Dropout<T> drop(dtype, a.dropout);
  const dim3 block(kThreads);
  if (pass == 0) {
    const int tile = tile_rows(sizeof(C) * size_t(a.hq + a.hv));
    const dim3 grid(unsigned((a.Lq + kRows - 1) / kRows), unsigned(a.H), unsigned(a.B));
    attn_forward_kernel<T, N><<<grid, block, size_t(tile) * (a.hq + a.hv) * sizeof(C), st>>>(a, tile, drop);
    return launched("attention kernel");
  }
  attn_rowdot_kernel<T><<<blocks_for(a.Lq * a.H * a.B), 256, 0, st>>>(a);
  if (int e = launched("attention (gradient) row-dot kernel")) return e;
  {
    const int tile = tile_rows(sizeof(C) * size_t(a.hq + a.hv + 2));
    const dim3 grid(unsigned((a.Lk + kRows - 1) / kRows), unsigned(a.H), unsigned(a.B));
    attn_dkdv_kernel<T, N><<<grid, block, size_t(tile) * (a.hq + a.hv + 2) * sizeof(C), st>>>(a, tile, drop);
    if (int e = launched("attention (gradient) dk/dv kernel")) return e;
  }
  const int tile = tile_rows(sizeof(C) * size_t(a.hq + a.hv));
  const dim3 grid(unsigned((a.Lq + kRows - 1) / kRows), unsigned(a.H), unsigned(a.B));
  attn_dq_kernel<T, N><<<grid, block, size_t(tile) * (a.hq + a.hv) * sizeof(C), st>>>(a, tile, drop);
  return launched("attention (gradient) dq kernel");
}

template <class T>
int launch_cores(cudaStream_t st, int32_t dtype, const AttnArgs& a, int pass) {
  const int64_t d = std::max(a.hq, a.hv);
  if (d <= kLanes * 8) return launch_all<T, 8>(st, dtype, a, pass);
  if (d <= kLanes * 16) return launch_all<T, 16>(st, dtype, a, pass);
  return launch_all<T, 64>(st, dtype, a, pass);
}

size_t stat_bytes(int32_t dtype) { return dtype == FLX_F64 ? sizeof(double) : sizeof(float); }

// The descriptor's checks, before anything is queued: FLX_OK, or a status
// with the message set.
int check_desc(int dev, const flx_attention_desc* d, int pass, const char* what) {
  if (!FLX_DESC_HAS(d, flx_attention_desc, workspace_bytes))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor is older than ABI 2.7's");
  const size_t es = dtype_bytes(d->dtype);
  if (d->dtype != FLX_F32 && d->dtype != FLX_F64 && d->dtype != FLX_F16 && d->dtype != FLX_BF16)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": the CUDA backend attends in Float16, BFloat16, Float32 "
                                                         "and Float64, not " + dtype_name(d->dtype));
  for (int64_t v : {d->head_dim_qk, d->head_dim_v, d->nheads, d->q_len, d->kv_len, d->batch})
    if (v < 1)
      return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": every size must be at least 1; got " +
                                                std::to_string(v));
  if (std::max(d->head_dim_qk, d->head_dim_v) > kMaxHead && !attention_wmma_applies(d->dtype, d->head_dim_qk, d->head_dim_v))
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": heads of more than " + std::to_string(kMaxHead) +
                                         " features run in tiles of the compute table");
  if (d->nheads > 65535 || d->batch > 65535 || (std::max(d->q_len, d->kv_len) + kRows - 1) / kRows > INT32_MAX)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": more than 65535 heads or batches (a launch's grid)");
  if (!(d->dropout >= 0 && d->dropout < 1))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": dropout must lie in [0, 1); got " +
                                              std::to_string(d->dropout));
  const size_t nq = size_t(d->head_dim_qk * d->nheads * d->q_len * d->batch);
  const size_t nk = size_t(d->head_dim_qk * d->nheads * d->kv_len * d->batch);
  const size_t nv = size_t(d->head_dim_v * d->nheads * d->kv_len * d->batch);
  const size_t no = size_t(d->head_dim_v * d->nheads * d->q_len * d->batch);
  const size_t rows = size_t(d->q_len * d->nheads * d->batch);
  // the furthest element a stride reaches, plus one
  auto reach = [&](const int64_t* s) {
    const int64_t n[4] = {d->kv_len, d->q_len, d->nheads, d->batch};
    int64_t r = 0;
    for (int k = 0; k < 4; ++k) {
      if (s[k] < 0) return size_t(0);
      r += (n[k] - 1) * s[k];
    }
    return size_t(r + 1);
  };
  struct Need {
    flx_mem m;
    size_t n, bytes;
    const char* name;
    bool required;
  };
  const Need needs[] = {
      {d->q, nq, es, "q", true}, {d->k, nk, es, "k", true}, {d->v, nv, es, "v", true},
      {d->o, no, es, "o", true},
      {d->mask, reach(d->mask_stride), 1, "mask", false}, {d->bias, reach(d->bias_stride), es, "bias", false},
      {d->lse, rows, stat_bytes(d->dtype), "lse", pass == 1},
      {d->dout, no, es, "dout", pass == 1}, {d->dq, nq, es, "dq", pass == 1}, {d->dk, nk, es, "dk", pass == 1},
      {d->dv, nv, es, "dv", pass == 1},
      {d->dbias, size_t(d->kv_len * d->q_len * d->nheads * d->batch), es, "dbias", false},
  };
  for (const Need& n : needs) {
    if (!n.m.buf) {
      if (n.required)
        return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor's " + n.name + " is not set");
      continue;
    }
    if (n.n == 0)
      return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": a negative stride for " + n.name);
    if (int e = check_elements(dev, n.m, n.n, n.bytes, what)) return e;
  }
  return FLX_OK;
}

AttnArgs args_of(const flx_attention_desc* d) {
  AttnArgs a{};
  auto ptr = [](flx_mem m) -> void* { return m.buf ? addr(m) : nullptr; };
  a.q = ptr(d->q), a.k = ptr(d->k), a.v = ptr(d->v), a.mask = ptr(d->mask), a.bias = ptr(d->bias);
  a.o = ptr(d->o), a.out = ptr(d->o), a.lse = ptr(d->lse), a.dout = ptr(d->dout);
  a.dq = ptr(d->dq), a.dk = ptr(d->dk), a.dv = ptr(d->dv), a.dbias = ptr(d->dbias);
  a.hq = d->head_dim_qk, a.hv = d->head_dim_v, a.H = d->nheads, a.Lq = d->q_len, a.Lk = d->kv_len, a.B = d->batch;
  for (int k = 0; k < 4; ++k) a.mask_stride[k] = d->mask_stride[k], a.bias_stride[k] = d->bias_stride[k];
  a.scale = d->scale, a.dropout = d->dropout, a.seed = d->dropout_seed, a.offset = d->dropout_offset;
  a.causal = d->causal != 0;
  return a;
}

int run(int dev, const flx_attention_desc* d, flx_stream s, int pass) {
  const char* what = pass == 0 ? "attention_forward" : "attention_backward";
  cudaStream_t st;
  if (int e = enter(dev, s, &st, what)) return e;
  if (int e = check_desc(dev, d, pass, what)) return e;
  AttnArgs a = args_of(d);
  if (pass == 1) {
    const size_t need = size_t(d->q_len * d->nheads * d->batch) * stat_bytes(d->dtype);
    if (d->workspace_bytes < need || !d->workspace.buf)
      return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": a workspace of " + std::to_string(need) +
                                                " bytes is needed (attention_workspace); got " +
                                                std::to_string(d->workspace_bytes));
    a.rowdot = addr(d->workspace);
    if (a.dbias) {  // pairs a causal walk skips stay 0
      const size_t n = size_t(d->kv_len * d->q_len * d->nheads * d->batch) * dtype_bytes(d->dtype);
      if (int e = check(cudaMemsetAsync(a.dbias, 0, n, st), "attention_backward (cudaMemsetAsync)")) return e;
    }
  }
  if (attention_wmma_applies(d->dtype, d->head_dim_qk, d->head_dim_v)) {
    if (pass == 0) return attention_wmma_forward(st, d->dtype, a);
    dispatch_float_dtype(d->dtype, [&](auto tag) {
      using T = decltype(tag);
      attn_rowdot_kernel<T><<<blocks_for(a.Lq * a.H * a.B), 256, 0, st>>>(a);
    });
    if (int e = launched("attention (gradient) row-dot kernel")) return e;
    return attention_wmma_backward(st, d->dtype, a);
  }
  int status = FLX_OK;
  dispatch_float_dtype(d->dtype, [&](auto tag) { status = launch_cores<decltype(tag)>(st, d->dtype, a, pass); });
  return status;
}

}  // namespace

int attention_workspace(void*, int dev, const flx_attention_desc* d, int32_t pass, uint64_t* bytes) {
  (void)dev;
  *bytes = pass == 1 ? uint64_t(d->q_len * d->nheads * d->batch) * stat_bytes(d->dtype) : 0;
  return FLX_OK;
}
int attention_forward(void*, int dev, const flx_attention_desc* d, flx_stream s) { return run(dev, d, s, 0); }
int attention_backward(void*, int dev, const flx_attention_desc* d, flx_stream s) { return run(dev, d, s, 1); }

}  // namespace flx_cuda

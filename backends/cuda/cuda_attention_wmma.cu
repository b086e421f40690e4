// Attention on the tensor cores (WMMA, 16x16x16 tiles, float accumulation)
// for Float16 and BFloat16 with equal head sizes of 16, 32, 64 or 128: the
// dnn table's attention calls (cuda_attention.cu) use these kernels where
// they apply, flash attention's algorithm (Dao, 2023) in three kernels.
//
// A block is four warps over a tile of 64 rows of one (head, batch); each
// warp owns 16 of them. Tiles of 64 keys (or queries) are staged in shared
// memory; the products go through WMMA fragments, the per-element work
// (scale, bias, mask, causal, softmax, dropout) through shared memory, two
// lanes a row, with the functions every attention kernel shares
// (cuda_attention_elem.cuh). The probabilities are rounded to the storage
// type before their product with v, as in FlashAttention.
//
//   forward  (queries): S = Q Kᵀ, the running maximum and sum, O += P V;
//   dk, dv   (keys):    Sᵀ = K Qᵀ, dPᵀ = V dOᵀ, dV += Pᵀ dO, dK += dSᵀ Q;
//   dq       (queries): S = Q Kᵀ, dP = dO Vᵀ, dQ += dS K.
// No two blocks write the same element: no atomics, the same bits each run.
#include <mma.h>

#include <algorithm>
#include <cmath>

#include "cuda_attention.hpp"
#include "cuda_attention_elem.cuh"

namespace flx_cuda {
namespace {

using namespace nvcuda;

constexpr int kTile = 64;     // rows of a block's tile and of a staged tile
constexpr int kThreads = 128;  // four warps

constexpr size_t round128(size_t n) { return (n + 127) / 128 * 128; }

// Shared memory of a kernel for head size D: four staged tiles of storage
// values ([64][D + 8]: the padding keeps rows off one bank, and rows stay
// 32-byte aligned as WMMA wants), two float tiles of products ([64][68]),
// two storage tiles of weights ([64][72]), and per-row statistics.
template <class T, int D>
struct Shared {
  static constexpr int ldt = D + 8, lds = kTile + 4, ldp = kTile + 8, ldo = D + 4;
  static constexpr size_t tile_t = round128(sizeof(T) * kTile * ldt);
  static constexpr size_t tile_f = round128(sizeof(float) * kTile * lds);
  static constexpr size_t tile_p = round128(sizeof(T) * kTile * ldp);
  static constexpr size_t t0 = 0, t1 = tile_t, t2 = 2 * tile_t, t3 = 3 * tile_t;
  static constexpr size_t f0 = 4 * tile_t, f1 = f0 + tile_f;
  static constexpr size_t p0 = f1 + tile_f, p1 = p0 + tile_p;
  static constexpr size_t rows = p1 + tile_p;  // float [64] lse, then float [64] row dots
  static constexpr size_t backward_bytes = rows + round128(2 * sizeof(float) * kTile);
  // the forward: q, k, v tiles; the scores (f0); the weights (p0); the output rows ([64][ldo] floats, at f1)
  static constexpr size_t forward_bytes = f1 + round128(sizeof(float) * kTile * ldo) + tile_p;
  static constexpr size_t forward_p = forward_bytes - tile_p;
};

template <class T>
__device__ __forceinline__ T zero() {
  return store<T>(0.0f);
}

// Rows [r0, r0 + 64) of head h, batch b of a (D, H, len, B) tensor into a
// [64][D + 8] tile; rows past len are zeros. vec: 16-byte loads (every
// operand 16-byte aligned).
template <class T, int D>
__device__ void stage(T* dst, const T* src, const AttnArgs& a, int64_t len, int64_t h, int64_t b, int64_t r0,
                      bool vec) {
  constexpr int ldt = D + 8;
  const T* base = src + int64_t(D) * (h + a.H * len * b);  // row r at base + D H r
  const int64_t step = int64_t(D) * a.H;
  if (vec) {
    constexpr int chunks = D / 8;
    for (int t = threadIdx.x; t < kTile * chunks; t += kThreads) {
      const int r = t / chunks, c = t % chunks;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < len) v = *reinterpret_cast<const uint4*>(base + (r0 + r) * step + c * 8);
      *reinterpret_cast<uint4*>(dst + r * ldt + c * 8) = v;
    }
  } else {
    for (int t = threadIdx.x; t < kTile * D; t += kThreads) {
      const int r = t / D, c = t % D;
      dst[r * ldt + c] = r0 + r < len ? base[(r0 + r) * step + c] : zero<T>();
    }
  }
}

// The per-row statistics of rows [r0, r0 + 64): lse (+Inf past the end, so
// p = 0 there) and the row dots.
__device__ void stage_rows(float* lse, float* dots, const AttnArgs& a, int64_t h, int64_t b, int64_t r0) {
  for (int t = threadIdx.x; t < kTile; t += kThreads) {
    const bool in = r0 + t < a.Lq;
    lse[t] = in ? static_cast<const float*>(a.lse)[attn::row_at(a, r0 + t, h, b)] : INFINITY;
    dots[t] = in ? static_cast<const float*>(a.rowdot)[attn::row_at(a, r0 + t, h, b)] : 0.0f;
  }
}

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
template <class T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T, class Layout>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, Layout>;

// out[16][64] (floats, ld lds) = A[16][K] · B[64][K]ᵀ for this warp's 16
// rows of a (row-major, ld lda) and the 64 rows of bt (row-major, ld ldb).
template <class T, int K>
__device__ void product_nt(float* out, int lds, const T* a, int lda, const T* bt, int ldb) {
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      FragA<T> fa;
      FragB<T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, lda);
      wmma::load_matrix_sync(fb, bt + n * 16 * ldb + kk * 16, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, lds, wmma::mem_row_major);
  }
}

// acc[n] (16 x D, fragment n of 16 columns) += P[16][64] · B[64][D] for this
// warp's rows of p (ld ldp) and b (row-major, ld ldb).
template <class T, int D>
__device__ void accumulate_nn(Acc (&acc)[D / 16], const T* p, int ldp, const T* b, int ldb) {
#pragma unroll
  for (int nd = 0; nd < D / 16; ++nd)
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      FragA<T> fa;
      FragB<T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, p + kk * 16, ldp);
      wmma::load_matrix_sync(fb, b + kk * 16 * ldb + nd * 16, ldb);
      wmma::mma_sync(acc[nd], fa, fb, acc[nd]);
    }
}

// Write this warp's 16 rows of acc (times `scale`) to rows [r0, r0 + 16) of
// head h, batch b of a (D, H, len, B) tensor, through `scratch` (16 x lds
// floats of the warp's own).
template <class T, int D>
__device__ void write_rows(T* dst, Acc (&acc)[D / 16], float scale, float* scratch, int lds, const AttnArgs& a,
                           int64_t len, int64_t h, int64_t b, int64_t r0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nd = 0; nd < D / 16; ++nd) {
#pragma unroll
    for (int e = 0; e < acc[nd].num_elements; ++e) acc[nd].x[e] *= scale;
    wmma::store_matrix_sync(scratch, acc[nd], lds, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = e / 16, c = e % 16;
      if (r0 + r < len) dst[(nd * 16 + c) + int64_t(D) * (h + a.H * (r0 + r + len * b))] = store<T>(scratch[r * lds + c]);
    }
    __syncwarp();
  }
}

// What the backward needs of pair (j, i) from its product kq (scaled) and
// dpv = dout_i · v_j: p with dropout (for dv) and ds (for dq, dk, dbias).
template <class T>
__device__ __forceinline__ void pair_grad(const AttnArgs& a, const attn::Dropout<T>& drop, float kq, float dpv,
                                          float lse, float rowdot, int64_t j, int64_t i, int64_t h, int64_t b,
                                          float* p_kept, float* ds) {
  *p_kept = 0.0f, *ds = 0.0f;
  if (j >= a.Lk || i >= a.Lq || !attn::allowed(a, j, i, h, b)) return;
  const float s = attn::logit<T>(a, kq, j, i, h, b);
  const float p = s == -INFINITY ? 0.0f : expf(s - lse);
  float kept = 1.0f;
  if (drop.on) kept = drop.keep(a, attn::pair_at(a, j, i, h, b)) ? drop.scale_t : 0.0f;
  *p_kept = p * kept;
  *ds = p * (dpv * kept - rowdot);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define FLX_WMMA_BODY 1
#endif

template <class T, int D>
__global__ void __launch_bounds__(kThreads) wmma_forward_kernel(AttnArgs a, attn::Dropout<T> drop, bool vec) {
#ifdef FLX_WMMA_BODY
  using S = Shared<T, D>;
  extern __shared__ __align__(128) unsigned char shared[];
  T* qs = reinterpret_cast<T*>(shared + S::t0);
  T* ks = reinterpret_cast<T*>(shared + S::t1);
  T* vs = reinterpret_cast<T*>(shared + S::t2);
  float* ss = reinterpret_cast<float*>(shared + S::f0);
  float* os = reinterpret_cast<float*>(shared + S::f1);
  T* ps = reinterpret_cast<T*>(shared + S::forward_p);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.y, b = blockIdx.z, q0 = int64_t(blockIdx.x) * kTile;
  stage<T, D>(qs, static_cast<const T*>(a.q), a, a.Lq, h, b, q0, vec);
  for (int t = threadIdx.x; t < kTile * S::ldo; t += kThreads) os[t] = 0.0f;
  const int half = lane & 1, row = 16 * w + (lane >> 1);  // two lanes a row, each half of its columns
  const int64_t i = q0 + row;
  const float scale = float(a.scale);
  float m = -INFINITY, l = 0.0f;
  const int64_t end = a.causal ? std::min(a.Lk, q0 + kTile) : a.Lk;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    stage<T, D>(ks, static_cast<const T*>(a.k), a, a.Lk, h, b, j0, vec);
    stage<T, D>(vs, static_cast<const T*>(a.v), a, a.Lk, h, b, j0, vec);
    __syncthreads();
    product_nt<T, D>(ss + 16 * w * S::lds, S::lds, qs + 16 * w * S::ldt, S::ldt, ks, S::ldt);
    __syncwarp();
    float sv[32];
    float tmax = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      const int64_t j = j0 + col;
      float s = -INFINITY;
      if (i < a.Lq && j < a.Lk && attn::allowed(a, j, i, h, b))
        s = attn::logit<T>(a, ss[row * S::lds + col] * scale, j, i, h, b);
      sv[c] = s;
      tmax = fmaxf(tmax, s);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    const float m_new = fmaxf(m, tmax);
    const float corr = m_new == -INFINITY ? 1.0f : expf(m - m_new);  // m = -Inf: 0, nothing held yet
    float psum = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      const float p = sv[c] == -INFINITY ? 0.0f : expf(sv[c] - m_new);
      psum += p;
      float pw = p;
      if (drop.on && p != 0.0f) pw = drop.keep(a, attn::pair_at(a, j0 + col, i, h, b)) ? p * drop.scale_t : 0.0f;
      ps[row * S::ldp + col] = store<T>(pw);
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    l = l * corr + psum;
    m = m_new;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) os[row * S::ldo + c] *= corr;
    __syncwarp();
    Acc acc[D / 16];
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd)
      wmma::load_matrix_sync(acc[nd], os + 16 * w * S::ldo + nd * 16, S::ldo, wmma::mem_row_major);
    accumulate_nn<T, D>(acc, ps + 16 * w * S::ldp, S::ldp, vs, S::ldt);
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd)
      wmma::store_matrix_sync(os + 16 * w * S::ldo + nd * 16, acc[nd], S::ldo, wmma::mem_row_major);
    __syncwarp();
  }
  if (i >= a.Lq) return;
  T* o = static_cast<T*>(a.out);
  for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c)
    o[attn::o_at(a, c, h, i, b)] = store<T>(os[row * S::ldo + c] / l);  // l = 0: no key allowed, NaN
  if (a.lse && half == 0) static_cast<float*>(a.lse)[attn::row_at(a, i, h, b)] = m + logf(l);
#endif
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) wmma_dkdv_kernel(AttnArgs a, attn::Dropout<T> drop, bool vec) {
#ifdef FLX_WMMA_BODY
  using S = Shared<T, D>;
  extern __shared__ __align__(128) unsigned char shared[];
  T* ks = reinterpret_cast<T*>(shared + S::t0);
  T* vs = reinterpret_cast<T*>(shared + S::t1);
  T* qs = reinterpret_cast<T*>(shared + S::t2);
  T* gs = reinterpret_cast<T*>(shared + S::t3);  // dout
  float* st = reinterpret_cast<float*>(shared + S::f0);   // Sᵀ: keys x queries
  float* dpt = reinterpret_cast<float*>(shared + S::f1);  // dPᵀ
  T* pt = reinterpret_cast<T*>(shared + S::p0);           // Pᵀ with dropout
  T* dst = reinterpret_cast<T*>(shared + S::p1);          // dSᵀ
  float* lses = reinterpret_cast<float*>(shared + S::rows);
  float* dots = lses + kTile;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.y, b = blockIdx.z, j0 = int64_t(blockIdx.x) * kTile;
  stage<T, D>(ks, static_cast<const T*>(a.k), a, a.Lk, h, b, j0, vec);
  stage<T, D>(vs, static_cast<const T*>(a.v), a, a.Lk, h, b, j0, vec);
  Acc dk[D / 16], dv[D / 16];
#pragma unroll
  for (int nd = 0; nd < D / 16; ++nd) wmma::fill_fragment(dk[nd], 0.0f), wmma::fill_fragment(dv[nd], 0.0f);
  const int half = lane & 1, row = 16 * w + (lane >> 1);
  const int64_t j = j0 + row;
  const float scale = float(a.scale);
  for (int64_t i0 = a.causal ? j0 : 0; i0 < a.Lq; i0 += kTile) {  // causal: queries before j0 see none of these keys
    __syncthreads();
    stage<T, D>(qs, static_cast<const T*>(a.q), a, a.Lq, h, b, i0, vec);
    stage<T, D>(gs, static_cast<const T*>(a.dout), a, a.Lq, h, b, i0, vec);
    stage_rows(lses, dots, a, h, b, i0);
    __syncthreads();
    product_nt<T, D>(st + 16 * w * S::lds, S::lds, ks + 16 * w * S::ldt, S::ldt, qs, S::ldt);
    product_nt<T, D>(dpt + 16 * w * S::lds, S::lds, vs + 16 * w * S::ldt, S::ldt, gs, S::ldt);
    __syncwarp();
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      const int64_t i = i0 + col;
      float pk, ds;
      pair_grad<T>(a, drop, st[row * S::lds + col] * scale, dpt[row * S::lds + col], lses[col], dots[col], j, i, h,
                   b, &pk, &ds);
      pt[row * S::ldp + col] = store<T>(pk);
      dst[row * S::ldp + col] = store<T>(ds);
      if (a.dbias && j < a.Lk && i < a.Lq) static_cast<T*>(a.dbias)[attn::pair_at(a, j, i, h, b)] = store<T>(ds);
    }
    __syncwarp();
    accumulate_nn<T, D>(dv, pt + 16 * w * S::ldp, S::ldp, gs, S::ldt);
    accumulate_nn<T, D>(dk, dst + 16 * w * S::ldp, S::ldp, qs, S::ldt);
  }
  float* scratch = st + 16 * w * S::lds;  // this warp's rows only
  write_rows<T, D>(static_cast<T*>(a.dk), dk, scale, scratch, S::lds, a, a.Lk, h, b, j0 + 16 * w);
  write_rows<T, D>(static_cast<T*>(a.dv), dv, 1.0f, scratch, S::lds, a, a.Lk, h, b, j0 + 16 * w);
#endif
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) wmma_dq_kernel(AttnArgs a, attn::Dropout<T> drop, bool vec) {
#ifdef FLX_WMMA_BODY
  using S = Shared<T, D>;
  extern __shared__ __align__(128) unsigned char shared[];
  T* qs = reinterpret_cast<T*>(shared + S::t0);
  T* gs = reinterpret_cast<T*>(shared + S::t1);  // dout
  T* ks = reinterpret_cast<T*>(shared + S::t2);
  T* vs = reinterpret_cast<T*>(shared + S::t3);
  float* ss = reinterpret_cast<float*>(shared + S::f0);
  float* dps = reinterpret_cast<float*>(shared + S::f1);
  T* dss = reinterpret_cast<T*>(shared + S::p0);
  float* lses = reinterpret_cast<float*>(shared + S::rows);
  float* dots = lses + kTile;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.y, b = blockIdx.z, q0 = int64_t(blockIdx.x) * kTile;
  stage<T, D>(qs, static_cast<const T*>(a.q), a, a.Lq, h, b, q0, vec);
  stage<T, D>(gs, static_cast<const T*>(a.dout), a, a.Lq, h, b, q0, vec);
  stage_rows(lses, dots, a, h, b, q0);
  Acc dq[D / 16];
#pragma unroll
  for (int nd = 0; nd < D / 16; ++nd) wmma::fill_fragment(dq[nd], 0.0f);
  const int half = lane & 1, row = 16 * w + (lane >> 1);
  const int64_t i = q0 + row;
  const float scale = float(a.scale);
  const int64_t end = a.causal ? std::min(a.Lk, q0 + kTile) : a.Lk;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    stage<T, D>(ks, static_cast<const T*>(a.k), a, a.Lk, h, b, j0, vec);
    stage<T, D>(vs, static_cast<const T*>(a.v), a, a.Lk, h, b, j0, vec);
    __syncthreads();
    product_nt<T, D>(ss + 16 * w * S::lds, S::lds, qs + 16 * w * S::ldt, S::ldt, ks, S::ldt);
    product_nt<T, D>(dps + 16 * w * S::lds, S::lds, gs + 16 * w * S::ldt, S::ldt, vs, S::ldt);
    __syncwarp();
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      float pk, ds;
      pair_grad<T>(a, drop, ss[row * S::lds + col] * scale, dps[row * S::lds + col], lses[row], dots[row], j0 + col,
                   i, h, b, &pk, &ds);
      dss[row * S::ldp + col] = store<T>(ds);
    }
    __syncwarp();
    accumulate_nn<T, D>(dq, dss + 16 * w * S::ldp, S::ldp, ks, S::ldt);
  }
  write_rows<T, D>(static_cast<T*>(a.dq), dq, scale, ss + 16 * w * S::lds, S::lds, a, a.Lq, h, b, q0 + 16 * w);
#endif
}

// Launch kernel k with `bytes` of dynamic shared memory (raising the limit
// past the default 48 KiB first).
template <class Kernel, class... A>
int launch(Kernel k, dim3 grid, size_t bytes, cudaStream_t st, const char* what, A... args) {
  if (int e = check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), what)) return e;
  k<<<grid, kThreads, bytes, st>>>(args...);
  return launched(what);
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T, int D>
int run(cudaStream_t st, int32_t dtype, const AttnArgs& a, int pass) {
  using S = Shared<T, D>;
  const attn::Dropout<T> drop(dtype, a.dropout);
  const bool vec = aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.dout);
  const auto tiles = [](int64_t len) { return unsigned((len + kTile - 1) / kTile); };
  if (pass == 0)
    return launch(wmma_forward_kernel<T, D>, dim3(tiles(a.Lq), unsigned(a.H), unsigned(a.B)), S::forward_bytes, st,
                  "attention kernel (tensor cores)", a, drop, vec);
  if (int e = launch(wmma_dkdv_kernel<T, D>, dim3(tiles(a.Lk), unsigned(a.H), unsigned(a.B)), S::backward_bytes, st,
                     "attention (gradient) dk/dv kernel (tensor cores)", a, drop, vec))
    return e;
  return launch(wmma_dq_kernel<T, D>, dim3(tiles(a.Lq), unsigned(a.H), unsigned(a.B)), S::backward_bytes, st,
                "attention (gradient) dq kernel (tensor cores)", a, drop, vec);
}

template <class T>
int run_sized(cudaStream_t st, int32_t dtype, const AttnArgs& a, int pass) {
  switch (a.hq) {
    case 16: return run<T, 16>(st, dtype, a, pass);
    case 32: return run<T, 32>(st, dtype, a, pass);
    case 64: return run<T, 64>(st, dtype, a, pass);
    case 128: return run<T, 128>(st, dtype, a, pass);
  }
  return fail(FLX_ERR_UNSUPPORTED, "attention on the tensor cores: head size " + std::to_string(a.hq));
}

int run_typed(cudaStream_t st, int32_t dtype, const AttnArgs& a, int pass) {
  if (dtype == FLX_F16) return run_sized<__half>(st, dtype, a, pass);
  return run_sized<__nv_bfloat16>(st, dtype, a, pass);
}

}  // namespace

bool attention_wmma_applies(int32_t dtype, int64_t hq, int64_t hv) {
  return (dtype == FLX_F16 || dtype == FLX_BF16) && hq == hv && (hq == 16 || hq == 32 || hq == 64 || hq == 128);
}
int attention_wmma_forward(cudaStream_t st, int32_t dtype, const AttnArgs& a) { return run_typed(st, dtype, a, 0); }
int attention_wmma_backward(cudaStream_t st, int32_t dtype, const AttnArgs& a) { return run_typed(st, dtype, a, 1); }

}  // namespace flx_cuda

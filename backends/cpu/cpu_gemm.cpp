// CPU batched GEMM: tiles on the thread pool, each one single-threaded call:
// Float32 products of a megaflop or more in oneDNN's matmul
// (cpu_gemm_onednn.hpp says why), the rest and Float64 in OpenBLAS; BFloat16
// (and Float16 where oneDNN computes it) in oneDNN's own kernels on the same
// tiles where the CPU has the instructions (cpu_gemm_onednn.cpp), else in
// Float32 on widened copies.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"
#include "cpu_dnn_engine.hpp"
#include "cpu_gemm_onednn.hpp"
#include "cpu_gemm_tiles.hpp"
#include "cpu_native_halves.hpp"
#include "cpu_vector_math.hpp"

namespace flx::cpu_backend {
namespace {

// Below this many flops a GEMM runs on the calling thread (~20 µs on one
// core): waking a helper would cost a good part of it.
constexpr double kParallelGemmFlops = 1e6;

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

// The batched GEMM on the pool: the tiles of gemm_tiles (fixed by the
// shape, so the result is the same on any number of threads), each one
// OpenBLAS call on one thread (see cpu_backend.cpp), so OpenBLAS's threads
// never compete with the pool's.
//
// An epilogue (gemm_epilogue) runs on each tile as it is done, while the
// tile is in cache: before(c, ldc, m0, m1, n1 - n0) may fill the tile and
// return the beta to use instead of d.beta; after(c, ldc, m0, m1, n1 - n0)
// finishes it.
struct NoEpilogue {
  template <class T>
  double before(T*, int64_t, int64_t, int64_t, int64_t, double beta) const {
    return beta;
  }
  double beta_after_fill(double beta) const { return beta; }  // what before returns, for every tile
  template <class T>
  void after(T*, int64_t, int64_t, int64_t, int64_t) const {}
};

// FLX_OK, or the status of a oneDNN tile's failure (not its refusal: a
// product oneDNN has no native kernel for runs on OpenBLAS).
template <class T, class E = NoEpilogue>
int gemm_tiled(const flx_gemm_desc& d, const T* A, const T* B, T* C, const E& ep = E{}) {
  if constexpr (std::is_same_v<T, float>) {
    if (f32_gemm_on_onednn(d)) {  // the same tiles in oneDNN's matmul (cpu_gemm_onednn.hpp)
      flx_gemm_desc o = d;
      o.beta = ep.beta_after_fill(d.beta);
      const GemmTileHooks hooks{
          [&](float* c, int64_t ld, int64_t m0, int64_t m1, int64_t n) { ep.before(c, ld, m0, m1, n, d.beta); },
          [&](float* c, int64_t ld, int64_t m0, int64_t m1, int64_t n) { ep.after(c, ld, m0, m1, n); }};
      constexpr int kRefused = -1;  // (no flx status)
      const int st = onednn::guarded("gemm", [&] { return gemm_f32_onednn(o, &hooks) ? FLX_OK : kRefused; });
      if (st != kRefused) return st;
    }
  }
  const GemmTiles tiles = gemm_tiles(d.m, d.n, d.k, d.batch);
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const GemmTiles::Tile t = tiles.tile(i);
      const T* a = A + t.product * d.stride_a + (d.trans_a ? t.m0 * d.lda : t.m0);
      const T* b = B + t.product * d.stride_b + (d.trans_b ? t.n0 : t.n0 * d.ldb);
      T* c = C + t.product * d.stride_c + t.m0 + t.n0 * d.ldc;
      const double beta = ep.before(c, d.ldc, t.m0, t.m1, t.n1 - t.n0, d.beta);
      blas_gemm(d.trans_a, d.trans_b, t.m1 - t.m0, t.n1 - t.n0, d.k, d.alpha, a, d.lda, b, d.ldb, beta, c, d.ldc);
      ep.after(c, d.ldc, t.m0, t.m1, t.n1 - t.n0);
    }
  };
  // Which thread runs a tile changes nothing in it: small products stay on
  // the calling thread.
  const double flops = 2.0 * double(d.m) * double(d.n) * double(d.k) * double(d.batch);
  if (flops < kParallelGemmFlops) run(0, tiles.count());
  else parallel_for(tiles.count(), 1, run);
  return FLX_OK;
}

// Halves that oneDNN does not compute natively go through float: convert
// each operand, sgemm, convert back (each output rounded once).
template <class T>
int gemm_halves(const flx_gemm_desc& d) {
  auto rows_a = d.trans_a ? d.k : d.m, cols_a = d.trans_a ? d.m : d.k;
  auto rows_b = d.trans_b ? d.n : d.k, cols_b = d.trans_b ? d.k : d.n;
  std::vector<float> a(size_t(rows_a * cols_a)), b(size_t(rows_b * cols_b)), c(size_t(d.m * d.n));
  flx_gemm_desc f = d;
  f.lda = std::max<int64_t>(rows_a, 1);
  f.ldb = std::max<int64_t>(rows_b, 1);
  f.ldc = std::max<int64_t>(d.m, 1);
  f.batch = 1;
  for (int64_t t = 0; t < d.batch; ++t) {
    const T* pa = reinterpret_cast<const T*>(addr(d.a)) + t * d.stride_a;
    const T* pb = reinterpret_cast<const T*>(addr(d.b)) + t * d.stride_b;
    T* pc = reinterpret_cast<T*>(addr(d.c)) + t * d.stride_c;
    for (int64_t j = 0; j < cols_a; ++j)
      for (int64_t i = 0; i < rows_a; ++i) a[size_t(i + j * rows_a)] = float(pa[i + j * d.lda]);
    for (int64_t j = 0; j < cols_b; ++j)
      for (int64_t i = 0; i < rows_b; ++i) b[size_t(i + j * rows_b)] = float(pb[i + j * d.ldb]);
    for (int64_t j = 0; j < d.n; ++j)
      for (int64_t i = 0; i < d.m; ++i) c[size_t(i + j * d.m)] = d.beta == 0 ? 0.f : float(pc[i + j * d.ldc]);
    if (int st = gemm_tiled<float>(f, a.data(), b.data(), c.data())) return st;
    for (int64_t j = 0; j < d.n; ++j)
      for (int64_t i = 0; i < d.m; ++i) pc[i + j * d.ldc] = T(c[size_t(i + j * d.m)]);
  }
  return FLX_OK;
}

// Bias and activation on C's tiles (flx_gemm_epilogue_desc): with beta 0
// the tile starts as the bias, so that the GEMM adds onto it (OpenBLAS
// skips its scaling pass for beta 1, where beta 0 would zero the tile
// first): the identity costs no pass of its own, relu and gelu one pass over
// a tile still in cache. The formulas are FLX_OP_RELU's and FLX_OP_GELU's.
template <class T>
struct BiasEpilogue {
  int32_t kind;
  const T* bias;
  T* aux;  // gelu's pre-activation, or null
  int64_t aux_ld;
  T* c0;   // C, to place a tile in aux
  int64_t ldc;

  double beta_after_fill(double beta) const { return beta != 0 ? beta : 1.0; }
  double before(T* c, int64_t ld, int64_t m0, int64_t m1, int64_t n, double beta) const {
    if (beta != 0) return beta;
    for (int64_t j = 0; j < n; ++j) std::memcpy(c + j * ld, bias + m0, size_t(m1 - m0) * sizeof(T));
    return 1.0;
  }
  void after(T* c, int64_t ld, int64_t m0, int64_t m1, int64_t n) const {
    const int64_t rows = m1 - m0;
    if (beta_was_nonzero)  // the bias was not the tile's start
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) c[i + j * ld] += bias[m0 + i];
    if (kind == FLX_EPILOGUE_BIAS_RELU) {
      for (int64_t j = 0; j < n; ++j) {
        T* col = c + j * ld;
        for (int64_t i = 0; i < rows; ++i) {
          const T x = col[i];
          col[i] = x > T(0) || x != x ? x : T(0);
        }
      }
    } else if (kind == FLX_EPILOGUE_BIAS_GELU) {
      // The tile's place in aux: C's offset of the tile, in aux's leading dimension.
      const int64_t off = c - c0, ci = off % ldc, cj = off / ldc;
      for (int64_t j = 0; j < n; ++j) {
        T* col = c + j * ld;
        T* acol = aux ? aux + ci + (cj + j) * aux_ld : nullptr;
        if (acol) std::copy(col, col + rows, acol);
        // Float32: the map's GELU row (cpu_vector_math.hpp), so that the
        // fused Dense gives the unfused ops' bits
        if constexpr (std::is_same_v<T, float>) {
          vmath::row(vmath::Unary::gelu, col, col, rows);
        } else {
          for (int64_t i = 0; i < rows; ++i) {
            const T x = col[i];
            col[i] = T(0.5) * x * (T(1) + std::tanh(T(FLX_GELU_K) * (x + T(0.044715) * x * x * x)));
          }
        }
      }
    }
  }
  bool beta_was_nonzero = false;
};

// bias[i] = sum over l < k of op(A)[i, l], summed in double as the CPU's
// reductions are.
template <class T>
void row_sums(const flx_gemm_desc& d, const T* A, T* bias) {
  const int64_t m = d.m, k = d.k;
  if (!d.trans_a) {  // op(A) = A, m×k: add up columns, rows split over the pool
    const int64_t grain = std::max<int64_t>(64, (1 << 16) / std::max<int64_t>(k, 1));
    parallel_for(m, grain, [&](int64_t lo, int64_t hi) {
      std::vector<double> acc(size_t(hi - lo), 0.0);
      for (int64_t l = 0; l < k; ++l) {
        const T* col = A + l * d.lda;
        for (int64_t i = lo; i < hi; ++i) acc[size_t(i - lo)] += double(col[i]);
      }
      for (int64_t i = lo; i < hi; ++i) bias[i] = T(acc[size_t(i - lo)]);
    });
  } else {  // op(A) = Aᵀ: bias[i] is the sum of A's column i
    const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(k, 1));
    parallel_for(m, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        double acc = 0;
        const T* col = A + i * d.lda;
        for (int64_t l = 0; l < k; ++l) acc += double(col[l]);
        bias[i] = T(acc);
      }
    });
  }
}

template <class T>
int gemm_epilogue_typed(const flx_gemm_epilogue_desc& e) {
  const flx_gemm_desc& d = e.gemm;
  const T* A = reinterpret_cast<const T*>(addr(d.a));
  const T* B = reinterpret_cast<const T*>(addr(d.b));
  T* C = reinterpret_cast<T*>(addr(d.c));
  if (e.epilogue == FLX_EPILOGUE_BGRADA) {
    row_sums<T>(d, A, reinterpret_cast<T*>(addr(e.bias)));
    return gemm_tiled<T>(d, A, B, C);
  }
  BiasEpilogue<T> ep{e.epilogue, reinterpret_cast<const T*>(addr(e.bias)),
                     e.aux.buf ? reinterpret_cast<T*>(addr(e.aux)) : nullptr, e.aux_ld, C, d.ldc};
  ep.beta_was_nonzero = d.beta != 0;
  return gemm_tiled<T>(d, A, B, C, ep);
}

}  // namespace

int gemm_epilogue(void*, int, const flx_gemm_epilogue_desc* ep, flx_stream) {
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  const flx_gemm_epilogue_desc& e = *ep;
  const flx_gemm_desc& d = e.gemm;
  // Halves, batches, empty products and sizes past OpenBLAS's int: unfused.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if ((d.dtype != FLX_F32 && d.dtype != FLX_F64) || d.batch != 1 || d.m <= 0 || d.n <= 0 || d.k <= 0 ||
      std::max({d.m, d.n, d.k, d.lda, d.ldb, d.ldc}) > kIntMax || e.epilogue < FLX_EPILOGUE_BIAS ||
      e.epilogue > FLX_EPILOGUE_BGRADA || (e.aux.buf && e.aux_ld < d.m))
    return fail(FLX_ERR_UNSUPPORTED, "gemm_epilogue: not fused on the CPU for this case");
  return d.dtype == FLX_F32 ? gemm_epilogue_typed<float>(e) : gemm_epilogue_typed<double>(e);
}

int gemm(void*, int, const flx_gemm_desc* dp, flx_stream) {
  // The pool parallelises (gemm_tiled): OpenBLAS's own threads stay idle.
  static const bool single = (openblas_set_num_threads(1), true);
  (void)single;
  const flx_gemm_desc& d = *dp;
  if (d.m == 0 || d.n == 0) return FLX_OK;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();  // OpenBLAS's interface takes int
  if (std::max({d.m, d.n, d.k, d.lda, d.ldb, d.ldc}) > kIntMax)
    return fail(FLX_ERR_UNSUPPORTED, "gemm: a dimension above 2^31 - 1 (m " + std::to_string(d.m) + ", n " +
                                         std::to_string(d.n) + ", k " + std::to_string(d.k) +
                                         ") does not fit OpenBLAS's int interface; split the product");
  switch (d.dtype) {
    case FLX_F32:
      return gemm_tiled<float>(d, reinterpret_cast<const float*>(addr(d.a)),
                               reinterpret_cast<const float*>(addr(d.b)), reinterpret_cast<float*>(addr(d.c)));
    case FLX_F64:
      return gemm_tiled<double>(d, reinterpret_cast<const double*>(addr(d.a)),
                                reinterpret_cast<const double*>(addr(d.b)), reinterpret_cast<double*>(addr(d.c)));
    case FLX_F16:
    case FLX_BF16:
      return onednn::guarded("gemm", [&] {
        if (gemm_half_native(d)) return int(FLX_OK);
        return d.dtype == FLX_F16 ? gemm_halves<Half>(d) : gemm_halves<BHalf>(d);
      });
  }
  return fail(FLX_ERR_UNSUPPORTED, "gemm: needs a floating dtype");
}

}  // namespace flx::cpu_backend

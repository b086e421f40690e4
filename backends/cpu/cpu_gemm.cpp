// CPU batched GEMM: OpenBLAS per tile, tiles on the thread pool.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

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

// The batched GEMM on the pool: whole products in parallel when the batch
// has enough of them, else each product cut into one tile per thread along
// C's longer side. OpenBLAS runs each tile on one thread (see
// cpu_backend.cpp), so its threads never compete with the pool's.
template <class T>
void gemm_tiled(const flx_gemm_desc& d, const T* A, const T* B, T* C) {
  auto tile = [&](int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const T* a = A + t * d.stride_a + (d.trans_a ? m0 * d.lda : m0);
    const T* b = B + t * d.stride_b + (d.trans_b ? n0 : n0 * d.ldb);
    T* c = C + t * d.stride_c + m0 + n0 * d.ldc;
    blas_gemm(d.trans_a, d.trans_b, m1 - m0, n1 - n0, d.k, d.alpha, a, d.lda, b, d.ldb, d.beta, c, d.ldc);
  };
  double flops = 2.0 * double(d.m) * double(d.n) * double(d.k) * double(d.batch);
  int threads = flops < kParallelGemmFlops ? 1 : pool_threads_now();
  if (threads <= 1) {
    for (int64_t t = 0; t < d.batch; ++t) tile(t, 0, d.m, 0, d.n);
    return;
  }
  if (d.batch >= threads) {
    parallel_for(d.batch, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) tile(t, 0, d.m, 0, d.n);
    });
    return;
  }
  // Cut points aligned to the micro-kernel's tile (16 rows, 4 columns).
  bool by_cols = d.n >= d.m;
  int64_t extent = by_cols ? d.n : d.m, align = by_cols ? 4 : 16;
  int64_t parts = std::clamp<int64_t>(extent / align, 1, threads);
  auto cut = [&](int64_t p) { return std::min(extent, (extent * p / parts + align - 1) / align * align); };
  parallel_for(d.batch * parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t t = i / parts, p = i % parts, a = cut(p), b = p + 1 == parts ? extent : cut(p + 1);
      if (a >= b) continue;
      if (by_cols) tile(t, 0, d.m, a, b);
      else tile(t, a, b, 0, d.n);
    }
  });
}

template <class T>
void gemm_halves(const flx_gemm_desc& d) {
  // Halves go through float: convert each operand, sgemm, convert back.
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
    gemm_tiled<float>(f, a.data(), b.data(), c.data());
    for (int64_t j = 0; j < d.n; ++j)
      for (int64_t i = 0; i < d.m; ++i) pc[i + j * d.ldc] = T(c[size_t(i + j * d.m)]);
  }
}

}  // namespace

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
      gemm_tiled<float>(d, reinterpret_cast<const float*>(addr(d.a)), reinterpret_cast<const float*>(addr(d.b)),
                        reinterpret_cast<float*>(addr(d.c)));
      return FLX_OK;
    case FLX_F64:
      gemm_tiled<double>(d, reinterpret_cast<const double*>(addr(d.a)), reinterpret_cast<const double*>(addr(d.b)),
                         reinterpret_cast<double*>(addr(d.c)));
      return FLX_OK;
    case FLX_F16:
      gemm_halves<Half>(d);
      return FLX_OK;
    case FLX_BF16:
      gemm_halves<BHalf>(d);
      return FLX_OK;
  }
  return fail(FLX_ERR_UNSUPPORTED, "gemm: needs a floating dtype");
}

}  // namespace flx::cpu_backend

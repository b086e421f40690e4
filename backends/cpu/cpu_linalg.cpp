// CPU GEMM (OpenBLAS), permute, gather/scatter, softmax and fused optimiser
// steps.
#include <cblas.h>

#include <algorithm>
#include <cmath>
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

int permute(void*, int, const flx_permute_desc* dp, flx_stream) {
  const flx_permute_desc& d = *dp;
  size_t es = dtype_size(DType(d.dtype));
  int64_t in_strides[FLX_MAX_DIMS], out_shape[FLX_MAX_DIMS], src_stride[FLX_MAX_DIMS];
  int64_t s = 1, total = 1;
  for (int k = 0; k < d.ndim; ++k) {
    in_strides[k] = s;
    s *= d.shape[k];
  }
  for (int k = 0; k < d.ndim; ++k) {
    out_shape[k] = d.shape[d.perm[k]];
    src_stride[k] = in_strides[d.perm[k]];
    total *= out_shape[k];
  }
  const char* src = addr(d.src);
  char* dst = addr(d.dst);
  int64_t n0 = d.ndim ? out_shape[0] : 1, st0 = d.ndim ? src_stride[0] : 0;
  int64_t rows = n0 ? total / n0 : 0;
  auto copy_rows = [&](auto tag) {
    using E = decltype(tag);
    const E* sp = reinterpret_cast<const E*>(src);
    E* dp2 = reinterpret_cast<E*>(dst);
    parallel_for(rows, grain_of(n0), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        int64_t off = 0, rem = r;
        for (int k = 1; k < d.ndim; ++k) {
          off += (rem % out_shape[k]) * src_stride[k];
          rem /= out_shape[k];
        }
        E* o = dp2 + r * n0;
        for (int64_t i = 0; i < n0; ++i) o[i] = sp[off + i * st0];
      }
    });
  };
  switch (es) {
    case 1: copy_rows(uint8_t{}); break;
    case 2: copy_rows(uint16_t{}); break;
    case 4: copy_rows(uint32_t{}); break;
    case 8: copy_rows(uint64_t{}); break;
    default: return fail(FLX_ERR_INVALID_ARGUMENT, "permute: bad dtype");
  }
  return FLX_OK;
}

int gather(void*, int, const flx_index_desc* dp, flx_stream) {
  const flx_index_desc& d = *dp;
  size_t es = dtype_size(DType(d.dtype));
  const int64_t* idx = reinterpret_cast<const int64_t*>(addr(d.idx));
  const char* src = addr(d.src);
  char* dst = addr(d.dst);
  size_t row = size_t(d.inner) * es;
  for (int64_t j = 0; j < d.nidx; ++j)
    if (idx[j] < 0 || idx[j] >= d.axis_len) return fail(FLX_ERR_INVALID_ARGUMENT, "gather: index out of range");
  parallel_for(d.outer * d.nidx, grain_of(d.inner), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / d.nidx, j = t % d.nidx;
      std::memcpy(dst + t * row, src + (o * d.axis_len + idx[j]) * row, row);
    }
  });
  return FLX_OK;
}

int scatter_add(void*, int, const flx_index_desc* dp, flx_stream) {
  const flx_index_desc& d = *dp;
  const int64_t* idx = reinterpret_cast<const int64_t*>(addr(d.idx));
  for (int64_t j = 0; j < d.nidx; ++j)
    if (idx[j] < 0 || idx[j] >= d.axis_len) return fail(FLX_ERR_INVALID_ARGUMENT, "scatter_add: index out of range");
  int status = FLX_OK;
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      status = fail(FLX_ERR_UNSUPPORTED, "scatter_add on Bool");
    } else {
      const T* src = reinterpret_cast<const T*>(addr(d.src));
      T* dst = reinterpret_cast<T*>(addr(d.dst));
      // Serial over j: repeated indices accumulate without races.
      for (int64_t o = 0; o < d.outer; ++o)
        for (int64_t j = 0; j < d.nidx; ++j) {
          const T* s = src + (o * d.nidx + j) * d.inner;
          T* t = dst + (o * d.axis_len + idx[j]) * d.inner;
          for (int64_t i = 0; i < d.inner; ++i) t[i] = store<T>(load(t[i]) + load(s[i]));
        }
    }
  });
  return status;
}

template <class T>
static void softmax_t(const flx_softmax_desc& d, bool backward) {
  using C = compute_t<T>;
  const T* x = reinterpret_cast<const T*>(addr(backward ? d.y : d.x));
  const T* dy = backward ? reinterpret_cast<const T*>(addr(d.dy)) : nullptr;
  T* out = reinterpret_cast<T*>(addr(backward ? d.dx : d.y));
  int64_t n = d.inner * d.outer;
  auto one = [&](int64_t t) {
    int64_t i = t % d.inner, o = t / d.inner;
    int64_t base = o * d.inner * d.axis_len + i, st = d.inner;
    if (!backward) {
      C mx = -INFINITY;
      for (int64_t j = 0; j < d.axis_len; ++j) mx = std::max(mx, C(load(x[base + j * st])));
      double s = 0;
      for (int64_t j = 0; j < d.axis_len; ++j) s += std::exp(double(load(x[base + j * st]) - mx));
      if (d.log) {
        C ls = C(std::log(s));
        for (int64_t j = 0; j < d.axis_len; ++j) out[base + j * st] = store<T>(C(load(x[base + j * st]) - mx - ls));
      } else {
        C inv = C(1.0 / s);
        for (int64_t j = 0; j < d.axis_len; ++j)
          out[base + j * st] = store<T>(C(std::exp(load(x[base + j * st]) - mx) * inv));
      }
    } else {
      // softmax: dx = y .* (dy - sum(dy .* y)); logsoftmax: dx = dy - exp(y) .* sum(dy)
      double s = 0;
      for (int64_t j = 0; j < d.axis_len; ++j)
        s += d.log ? double(load(dy[base + j * st])) : double(load(dy[base + j * st])) * load(x[base + j * st]);
      for (int64_t j = 0; j < d.axis_len; ++j) {
        C y = load(x[base + j * st]), g = load(dy[base + j * st]);
        out[base + j * st] = store<T>(d.log ? C(g - std::exp(y) * C(s)) : C(y * (g - C(s))));
      }
    }
  };
  parallel_for(n, grain_of(d.axis_len), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) one(t);
  });
}

static int softmax_any(const flx_softmax_desc* d, bool backward) {
  int status = FLX_OK;
  dispatch_dtype(d->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) softmax_t<T>(*d, backward);
    else status = fail(FLX_ERR_UNSUPPORTED, "softmax needs a floating dtype");
  });
  return status;
}
int softmax(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, false); }
int softmax_backward(void*, int, const flx_softmax_desc* d, flx_stream) { return softmax_any(d, true); }

namespace {

// Fused Adam over a chunk; In_place writes x -= step, else dx = step.
template <class T, bool In_place>
inline __attribute__((always_inline)) void adam_chunk(const flx_optim_desc& d, int64_t lo, int64_t hi) {
  using C = compute_t<T>;
  const T* __restrict g = reinterpret_cast<const T*>(addr(d.grad));
  T* __restrict m = reinterpret_cast<T*>(addr(d.m));
  T* __restrict v = reinterpret_cast<T*>(addr(d.v));
  T* __restrict out = reinterpret_cast<T*>(addr(In_place ? d.x : d.dx));
  const C b1 = C(d.beta1), b2 = C(d.beta2), eps = C(d.eps), eta = C(d.eta);
  const C c1 = C(1) / C(1 - d.beta1_pow), c2 = C(1) / C(1 - d.beta2_pow);
  const C tiny = std::numeric_limits<C>::min();
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    C gi = load(g[i]);
    C mi = b1 * C(load(m[i])) + (C(1) - b1) * gi;
    C vi = b2 * C(load(v[i])) + (C(1) - b2) * gi * gi;
    // Moments of parameters whose gradient stays zero (dead units) decay
    // into denormals, where x86 arithmetic is ~100x slower: flush them.
    mi = (mi < tiny && mi > -tiny) ? C(0) : mi;
    vi = vi < tiny ? C(0) : vi;
    m[i] = store<T>(mi);
    v[i] = store<T>(vi);
    C step = eta * (mi * c1) / (std::sqrt(vi * c2) + eps);
    if constexpr (In_place) out[i] = store<T>(C(load(out[i])) - step);
    else out[i] = store<T>(step);
  }
}

// Float32, the common case, also gets an AVX2 build picked at run time
// (sqrt and division dominate; 8 lanes instead of 4).
__attribute__((target_clones("avx2", "default"))) void adam_f32(const flx_optim_desc& d, int64_t lo, int64_t hi,
                                                                 bool in_place) {
  if (in_place) adam_chunk<float, true>(d, lo, hi);
  else adam_chunk<float, false>(d, lo, hi);
}

}  // namespace

int optim_step(void*, int, const flx_optim_desc* dp, flx_stream) {
  const flx_optim_desc& d = *dp;
  if (d.kind != FLX_OPTIM_ADAM) return fail(FLX_ERR_UNSUPPORTED, "optim_step: unknown kind");
  int status = FLX_OK;
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) {
      bool in_place = d.dx.buf == nullptr;
      parallel_for(d.n, parallel_grain, [&](int64_t lo, int64_t hi) {
        if constexpr (std::is_same_v<T, float>) adam_f32(d, lo, hi, in_place);
        else if (in_place) adam_chunk<T, true>(d, lo, hi);
        else adam_chunk<T, false>(d, lo, hi);
      });
    } else {
      status = fail(FLX_ERR_UNSUPPORTED, "optim_step needs a floating dtype");
    }
  });
  return status;
}

}  // namespace flx::cpu_backend

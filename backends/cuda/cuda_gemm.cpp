// Batched GEMM through cuBLAS (cublasGemmStridedBatchedEx), column-major as
// the ABI. Float32 computes in FP32 (TF32 off, so results match the CPU to
// rounding) unless FLX_CUDA_ALLOW_TF32=1; Float16/BFloat16 store half and
// accumulate in FP32. cuBLAS is opened by the first call (cuda_blas_libs.hpp).
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_blas_libs.hpp"
#include "cuda_common.hpp"
#include "cuda_thread_handles.hpp"
#include "backend_common/env_switch.hpp"

namespace flx_cuda {
namespace {

int cublas_fail(const CublasApi& api, cublasStatus_t st, const std::string& what) {
  return fail(st == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
              what + " failed: " + api.status_string(st));
}

// This thread's handle for (dev, st); dev is the current device (enter()
// made it so).
int handle_for(const CublasApi& api, int dev, cudaStream_t st, cublasHandle_t* out) {
  thread_local ThreadHandles<CublasApi, cublasHandle_t> handles;  // cuda_thread_handles.hpp
  handles.api = &api;
  return handles.hs.get(dev, st, [&](cublasHandle_t* h) -> int {
    if (cublasStatus_t e = api.create(h); e != CUBLAS_STATUS_SUCCESS) return cublas_fail(api, e, "cublasCreate");
    // TF32 tensor cores for Float32 only when allowed (the compute type
    // says so too, per call); the default math mode keeps FP32.
    cublasStatus_t e = api.set_math_mode(*h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (e == CUBLAS_STATUS_SUCCESS) e = api.set_stream(*h, st);  // for good: the handle serves this stream only
    if (e != CUBLAS_STATUS_SUCCESS) {
      (void)api.destroy(*h);
      return cublas_fail(api, e, "cublasSetMathMode/cublasSetStream");
    }
    return FLX_OK;
  }, out);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

bool allow_tf32() {
  static const bool on = flx::backend_common::env_switch("FLX_CUDA_ALLOW_TF32", false);
  return on;
}

int gemm(void*, int dev, const flx_gemm_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "gemm")) return e;
  if (d->m == 0 || d->n == 0 || d->batch == 0) return FLX_OK;
  for (int64_t v : {d->m, d->n, d->k, d->lda, d->ldb, d->ldc, d->batch})
    if (!fits_int(v))
      return fail(FLX_ERR_UNSUPPORTED, "gemm: a dimension or leading dimension of " + std::to_string(v) +
                                           " is more than cuBLAS takes (2^31-1); split the product");
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (d->dtype) {
    case FLX_F32: type = CUDA_R_32F, compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case FLX_F64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case FLX_F16: type = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F; break;
    case FLX_BF16: type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    default:
      return fail(FLX_ERR_UNSUPPORTED, "gemm: the CUDA backend multiplies Float16, BFloat16, Float32 and Float64 "
                                       "matrices, not dtype code " + std::to_string(d->dtype) +
                                           "; convert to a floating dtype first");
  }
  // cuBLAS is opened here, by the first product on a device, never by probing.
  const CublasApi* api = nullptr;
  if (int e = cublas_api(&api, FLX_ERR_DEVICE, "gemm")) return e;
  cublasHandle_t h = nullptr;
  if (int e = handle_for(*api, dev, st, &h)) return e;
  const double alpha64 = d->alpha, beta64 = d->beta;
  const float alpha32 = float(d->alpha), beta32 = float(d->beta);
  // alpha and beta in the compute type's scalar type (double for 64F, float
  // for the 32F ones, TF32 included), on the host (the default pointer mode)
  const void* alpha = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta64) : &beta32;
  // cuBLAS wants leading dimensions of at least 1 even for empty operands.
  auto ld = [](int64_t v) { return int(v < 1 ? 1 : v); };
  cublasStatus_t r = api->gemm_strided_batched_ex(
      h, d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(d->m), int(d->n),
      int(d->k), alpha, addr(d->a), type, ld(d->lda), d->stride_a, addr(d->b), type, ld(d->ldb), d->stride_b, beta,
      addr(d->c), type, ld(d->ldc), d->stride_c, int(d->batch), compute, CUBLAS_GEMM_DEFAULT);
  if (r != CUBLAS_STATUS_SUCCESS)
    return fail(r == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
                std::string("cublasGemmStridedBatchedEx failed: ") + api->status_string(r) + " (m=" +
                    std::to_string(d->m) + ", n=" + std::to_string(d->n) + ", k=" + std::to_string(d->k) +
                    ", batch=" + std::to_string(d->batch) + ")");
  return FLX_OK;
}

}  // namespace flx_cuda

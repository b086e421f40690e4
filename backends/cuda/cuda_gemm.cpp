// Batched GEMM through cuBLAS (cublasGemmStridedBatchedEx), column-major as
// the ABI. Float32 computes in FP32 (TF32 off, so results match the CPU to
// rounding); Float16/BFloat16 store half and accumulate in FP32.
#include <cublas_v2.h>

#include <climits>
#include <string>
#include <vector>

#include "cuda_common.hpp"

namespace flx_cuda {
namespace {

// cuBLAS handles are bound to a device and a stream; one per thread and
// device, so that setting the stream never races with another thread.
// (Released at process exit by the driver; a handle per thread is small.)
int handle_for(int dev, cublasHandle_t* out) {
  thread_local std::vector<cublasHandle_t> handles;
  if (handles.size() <= size_t(dev)) handles.resize(size_t(dev) + 1, nullptr);
  if (!handles[size_t(dev)]) {
    cublasHandle_t h = nullptr;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
      return fail(st == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
                  std::string("cublasCreate failed: ") + cublasGetStatusString(st));
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);  // no TF32
    handles[size_t(dev)] = h;
  }
  *out = handles[size_t(dev)];
  return FLX_OK;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

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
    case FLX_F32: type = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F; break;
    case FLX_F64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case FLX_F16: type = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F; break;
    case FLX_BF16: type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    default:
      return fail(FLX_ERR_UNSUPPORTED, "gemm: the CUDA backend multiplies Float16, BFloat16, Float32 and Float64 "
                                       "matrices, not dtype code " + std::to_string(d->dtype) +
                                           "; convert to a floating dtype first");
  }
  cublasHandle_t h = nullptr;
  if (int e = handle_for(dev, &h)) return e;
  cublasSetStream(h, st);
  const double alpha64 = d->alpha, beta64 = d->beta;
  const float alpha32 = float(d->alpha), beta32 = float(d->beta);
  const void* alpha = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta64) : &beta32;
  // cuBLAS wants leading dimensions of at least 1 even for empty operands.
  auto ld = [](int64_t v) { return int(v < 1 ? 1 : v); };
  cublasStatus_t r = cublasGemmStridedBatchedEx(
      h, d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(d->m), int(d->n),
      int(d->k), alpha, addr(d->a), type, ld(d->lda), d->stride_a, addr(d->b), type, ld(d->ldb), d->stride_b, beta,
      addr(d->c), type, ld(d->ldc), d->stride_c, int(d->batch), compute, CUBLAS_GEMM_DEFAULT);
  if (r != CUBLAS_STATUS_SUCCESS)
    return fail(r == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
                std::string("cublasGemmStridedBatchedEx failed: ") + cublasGetStatusString(r) + " (m=" +
                    std::to_string(d->m) + ", n=" + std::to_string(d->n) + ", k=" + std::to_string(d->k) +
                    ", batch=" + std::to_string(d->batch) + ")");
  return FLX_OK;
}

}  // namespace flx_cuda

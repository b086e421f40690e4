// cuBLAS and cuBLASLt, opened when a device first needs them (the first
// gemm or gemm_epilogue), not linked: probing the plugin (functional(),
// which flx-info and every get_device() ask) then maps neither, and a
// process that never multiplies matrices on a GPU never pays their 150 MB.
// The entry points keep the types of the headers the plugin was built with.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace flx_cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasGetStatusString) status_string;
  // The C entry point (the header adds a C++ overload taking a cudaDataType
  // compute type): picked by its signature, without odr-using it.
  decltype(static_cast<cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void*, const void*, cudaDataType, int, long long int, const void*,
                                          cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                          long long int, int, cublasComputeType_t, cublasGemmAlgo_t)>(
      &cublasGemmStridedBatchedEx)) gemm_strided_batched_ex;
};

struct CublasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtGetStatusString) status_string;
  // The *_internal calls behind the header's inline *Init helpers, which
  // pass the descriptor's size.
  decltype(&cublasLtMatmulDescInit_internal) matmul_desc_init;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set;
  decltype(&cublasLtMatrixLayoutInit_internal) layout_init;
  decltype(&cublasLtMatmulPreferenceInit_internal) preference_init;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
};

// The loaded library's entry points in *out: FLX_OK, or `status` with
// last_error() saying which library could not be loaded, why, and what to
// do. Loaded once per process (a failure is not retried); thread-safe.
int cublas_api(const CublasApi** out, int status, const char* what);
int cublaslt_api(const CublasLtApi** out, int status, const char* what);

}  // namespace flx_cuda

// Opens cuBLAS and cuBLASLt on first use (see cuda_blas_libs.hpp): by their
// sonames for the CUDA major version the plugin was built with, then beside
// the CUDA runtime the plugin is using (a toolkit's lib64, or the lib
// directory of pip's nvidia wheels).
#include "cuda_blas_libs.hpp"

#include <string>

#include "backend_common/vendor_library.hpp"
#include "cuda_common.hpp"

#define FLX_CUDA_STR2(x) #x
#define FLX_CUDA_STR(x) FLX_CUDA_STR2(x)

namespace flx_cuda {
namespace {

constexpr const char* kFix =
    "install cuBLAS " FLX_CUDA_STR(CUBLAS_VER_MAJOR) ".x (the CUDA toolkit's libcublas, or pip's nvidia-cublas) "
    "or put the directory holding it on LD_LIBRARY_PATH";

flx::vendor::VendorLibrary open_beside_runtime(const char* title, const std::string& soname) {
  const std::string runtime_dir = flx::vendor::directory_of(reinterpret_cast<const void*>(&cudaGetDeviceCount));
  return flx::vendor::open_vendor_library(title, {soname, runtime_dir.empty() ? "" : runtime_dir + "/" + soname}, kFix);
}

using flx::vendor::LoadedApi;
using flx::vendor::VendorLibrary;

const LoadedApi<CublasApi>& loaded_cublas() {
  return flx::vendor::load_once<CublasApi>(
      [] { return open_beside_runtime("cuBLAS", "libcublas.so." FLX_CUDA_STR(CUBLAS_VER_MAJOR)); },
      [](VendorLibrary& lib, CublasApi& api) {
        lib.resolve("cublasCreate_v2", api.create);
        lib.resolve("cublasDestroy_v2", api.destroy);
        lib.resolve("cublasSetStream_v2", api.set_stream);
        lib.resolve("cublasSetMathMode", api.set_math_mode);
        lib.resolve("cublasGetStatusString", api.status_string);
        lib.resolve("cublasGemmStridedBatchedEx", api.gemm_strided_batched_ex);
      });
}

const LoadedApi<CublasLtApi>& loaded_cublaslt() {
  return flx::vendor::load_once<CublasLtApi>(
      [] { return open_beside_runtime("cuBLASLt", "libcublasLt.so." FLX_CUDA_STR(CUBLAS_VER_MAJOR)); },
      [](VendorLibrary& lib, CublasLtApi& api) {
        lib.resolve("cublasLtCreate", api.create);
        lib.resolve("cublasLtGetStatusString", api.status_string);
        lib.resolve("cublasLtMatmulDescInit_internal", api.matmul_desc_init);
        lib.resolve("cublasLtMatmulDescSetAttribute", api.matmul_desc_set);
        lib.resolve("cublasLtMatrixLayoutInit_internal", api.layout_init);
        lib.resolve("cublasLtMatmulPreferenceInit_internal", api.preference_init);
        lib.resolve("cublasLtMatmulPreferenceSetAttribute", api.preference_set);
        lib.resolve("cublasLtMatmulAlgoGetHeuristic", api.heuristic);
        lib.resolve("cublasLtMatmul", api.matmul);
      });
}

template <class Api>
int answer(const LoadedApi<Api>& l, const Api** out, int status, const char* what) {
  if (!l.error.empty()) return fail(status, std::string(what) + ": " + l.error);
  *out = &l.api;
  return FLX_OK;
}

}  // namespace

int cublas_api(const CublasApi** out, int status, const char* what) {
  return answer(loaded_cublas(), out, status, what);
}
int cublaslt_api(const CublasLtApi** out, int status, const char* what) {
  return answer(loaded_cublaslt(), out, status, what);
}

}  // namespace flx_cuda

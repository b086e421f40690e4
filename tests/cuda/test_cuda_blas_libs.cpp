// cuBLAS and cuBLASLt opened on first use (backends/cuda/cuda_blas_libs.cpp),
// without a GPU: before the first request neither is mapped; a request maps
// it and resolves every entry point with the header's type, and the
// host-only cuBLASLt calls (descriptor set-up) work through those pointers.
// The vendor-library helper (backends/backend_common/vendor_library.hpp) too.
// The plugin's fail() is replaced here by one that keeps the message.
#include <gtest/gtest.h>

#include <string>

#include "backend_common/vendor_library.hpp"
#include "cuda/cuda_blas_libs.hpp"
#include "flx/backend.h"
#include "vendor_library_test.hpp"

using flx_cuda_test::mapped;

// One test, in order: which library is mapped is a property of the process.
// cuBLAS first: its own dependency on cuBLASLt must resolve (through its
// RUNPATH, $ORIGIN) without the plugin having opened cuBLASLt.
TEST(CudaBlasLibs, OpenedOnFirstRequestWithEveryEntryPoint) {
  ASSERT_FALSE(mapped("libcublas.so")) << "linked, not opened on demand";
  ASSERT_FALSE(mapped("libcublasLt.so")) << "linked, not opened on demand";

  const flx_cuda::CublasApi* blas = nullptr;
  ASSERT_EQ(flx_cuda::cublas_api(&blas, FLX_ERR_DEVICE, "test"), FLX_OK) << flx_cuda::g_last_error;
  EXPECT_TRUE(mapped("libcublas.so"));
  for (const void* f : {(const void*)blas->create, (const void*)blas->destroy, (const void*)blas->set_stream,
                        (const void*)blas->set_math_mode, (const void*)blas->status_string,
                        (const void*)blas->gemm_strided_batched_ex})
    EXPECT_NE(f, nullptr);
  EXPECT_NE(std::string(blas->status_string(CUBLAS_STATUS_ALLOC_FAILED)).find("allocation failed"), std::string::npos);
  // A second request answers the same table.
  const flx_cuda::CublasApi* again = nullptr;
  ASSERT_EQ(flx_cuda::cublas_api(&again, FLX_ERR_DEVICE, "test"), FLX_OK);
  EXPECT_EQ(again, blas);

  const flx_cuda::CublasLtApi* lt = nullptr;
  ASSERT_EQ(flx_cuda::cublaslt_api(&lt, FLX_ERR_UNSUPPORTED, "test"), FLX_OK) << flx_cuda::g_last_error;
  EXPECT_TRUE(mapped("libcublasLt.so"));
  for (const void* f :
       {(const void*)lt->create, (const void*)lt->status_string, (const void*)lt->matmul_desc_init,
        (const void*)lt->matmul_desc_set, (const void*)lt->layout_init, (const void*)lt->preference_init,
        (const void*)lt->preference_set, (const void*)lt->heuristic, (const void*)lt->matmul})
    EXPECT_NE(f, nullptr);
  EXPECT_NE(std::string(lt->status_string(CUBLAS_STATUS_NOT_SUPPORTED)).find("not supported"), std::string::npos);
  // The descriptors gemm_epilogue builds, as it builds them: host-only calls.
  cublasLtMatmulDescOpaque_t op_store;
  cublasLtMatrixLayoutOpaque_t layout_store;
  cublasLtMatmulPreferenceOpaque_t pref_store;
  cublasLtMatmulDesc_t op = &op_store;
  cublasLtMatrixLayout_t layout = &layout_store;
  cublasLtMatmulPreference_t pref = &pref_store;
  EXPECT_EQ(lt->matmul_desc_init(op, sizeof *op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const uint32_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
  EXPECT_EQ(lt->matmul_desc_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt->layout_init(layout, sizeof *layout, CUDA_R_32F, 256, 64, 256), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt->preference_init(pref, sizeof *pref), CUBLAS_STATUS_SUCCESS);
  const uint64_t ws = 1 << 20;
  EXPECT_EQ(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), CUBLAS_STATUS_SUCCESS);
  // A descriptor smaller than the library's is refused, as the header's
  // inline helpers rely on: the size really is passed through.
  EXPECT_NE(lt->matmul_desc_init(op, 8, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
}

// A library that is nowhere: an error naming it, every candidate tried and
// the fix; nothing resolves.
TEST(VendorLibrary, MissingLibraryIsAnErrorWithEveryCandidateAndTheFix) {
  auto lib = flx::vendor::open_vendor_library("cuFake", {"libcufake.so.99", "/nonexistent/libcufake.so.99"},
                                              "install cuFake");
  EXPECT_FALSE(lib.ok());
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_NE(lib.error.find("cuFake could not be loaded:"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find("libcufake.so.99: cannot open shared object file"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find("/nonexistent/libcufake.so.99"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find("To fix: install cuFake"), std::string::npos) << lib.error;
  int (*fn)(int) = nullptr;
  lib.resolve("anything", fn);
  EXPECT_EQ(fn, nullptr);
}

// A library that loads but lacks an entry point (older than the headers).
TEST(VendorLibrary, MissingSymbolIsNamed) {
  auto lib = flx::vendor::open_vendor_library("libm", {"libm.so.6"}, "n/a");
  ASSERT_TRUE(lib.ok()) << lib.error;
  double (*cosine)(double) = nullptr;
  lib.resolve("cos", cosine);
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  void (*missing)() = nullptr;
  lib.resolve("flx_no_such_function", missing);
  EXPECT_EQ(missing, nullptr);
  EXPECT_FALSE(lib.ok());
  EXPECT_NE(lib.error.find("it lacks flx_no_such_function"), std::string::npos) << lib.error;
}

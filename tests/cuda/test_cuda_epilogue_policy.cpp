// Which fused GEMMs the CUDA plugin hands to cuBLASLt
// (backends/cuda/cuda_epilogue_policy.hpp), on the host: Float64 is
// declined until a GPU run has measured it, and so is what cuBLASLt cannot do.
#include <gtest/gtest.h>

#include "cuda/cuda_epilogue_policy.hpp"

using flx_cuda::epilogue_declined;

namespace {
// A Dense layer's forward product: (m x k) (k x n), bias of m.
flx_gemm_epilogue_desc dense(int32_t dtype, int32_t epilogue, int64_t m = 16, int64_t n = 8, int64_t k = 4) {
  flx_gemm_epilogue_desc e{};
  e.gemm.dtype = dtype;
  e.gemm.m = m, e.gemm.n = n, e.gemm.k = k;
  e.gemm.lda = m, e.gemm.ldb = k, e.gemm.ldc = m;
  e.gemm.batch = 1;
  e.gemm.alpha = 1;
  e.epilogue = epilogue;
  return e;
}
}  // namespace

TEST(CudaEpiloguePolicy, FloatAndHalfProductsAreFused) {
  for (int32_t t : {FLX_F32, FLX_F16, FLX_BF16})
    for (int32_t epi : {FLX_EPILOGUE_BIAS, FLX_EPILOGUE_BIAS_RELU, FLX_EPILOGUE_BIAS_GELU, FLX_EPILOGUE_BGRADA})
      EXPECT_EQ(epilogue_declined(dense(t, epi)), "") << t << " " << epi;
  flx_gemm_epilogue_desc g = dense(FLX_F32, FLX_EPILOGUE_BIAS_GELU);
  g.aux.buf = reinterpret_cast<flx_buffer>(0x100);
  g.aux_ld = 16;
  EXPECT_EQ(epilogue_declined(g), "");
}

TEST(CudaEpiloguePolicy, Float64IsDeclinedUntilMeasuredOnAGpu) {
  for (int32_t epi : {FLX_EPILOGUE_BIAS, FLX_EPILOGUE_BIAS_RELU, FLX_EPILOGUE_BIAS_GELU, FLX_EPILOGUE_BGRADA}) {
    const std::string why = epilogue_declined(dense(FLX_F64, epi));
    EXPECT_NE(why.find("Float64"), std::string::npos) << why;
    EXPECT_NE(why.find("measured"), std::string::npos) << why;
  }
  EXPECT_NE(epilogue_declined(dense(FLX_I32, FLX_EPILOGUE_BIAS)).find("floating"), std::string::npos);
}

TEST(CudaEpiloguePolicy, WhatCublasLtCannotDoIsDeclined) {
  flx_gemm_epilogue_desc b = dense(FLX_F32, FLX_EPILOGUE_BIAS);
  b.gemm.batch = 2;
  EXPECT_NE(epilogue_declined(b).find("single products"), std::string::npos);
  EXPECT_NE(epilogue_declined(dense(FLX_F32, FLX_EPILOGUE_BIAS, 16, 0)), "");
  EXPECT_NE(epilogue_declined(dense(FLX_F32, 7)).find("unknown epilogue 7"), std::string::npos);
  // gelu's pre-activation: a leading dimension that is a multiple of 8, at least m
  flx_gemm_epilogue_desc g = dense(FLX_F32, FLX_EPILOGUE_BIAS_GELU, 12);
  g.aux.buf = reinterpret_cast<flx_buffer>(0x100);
  g.aux_ld = 12;
  EXPECT_NE(epilogue_declined(g).find("multiple of 8"), std::string::npos);
  g.aux_ld = 16;
  EXPECT_EQ(epilogue_declined(g), "");
  g.aux_ld = 8;  // below m
  EXPECT_NE(epilogue_declined(g), "");
  flx_gemm_epilogue_desc r = dense(FLX_F32, FLX_EPILOGUE_BIAS_RELU);
  r.aux.buf = reinterpret_cast<flx_buffer>(0x100);
  r.aux_ld = 16;
  EXPECT_NE(epilogue_declined(r), "") << "aux with an epilogue other than gelu";
}

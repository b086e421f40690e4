// Which fused GEMMs (gemm_epilogue) the CUDA plugin hands to cuBLASLt, and
// why it declines the others (libflx then runs the unfused ops on the same
// device). No CUDA header: tests/cuda/test_cuda_epilogue_policy.cpp checks
// it on the host.
#pragma once

#include <string>

#include "flx/backend.h"

namespace flx_cuda {

// Empty when cuBLASLt is asked for this product; otherwise the reason it
// is not, for FLX_ERR_UNSUPPORTED's message:
// - a batch, or an empty matrix;
// - Float64, until a GPU run has measured cuBLASLt's Float64 epilogues
//   (GELU's above all) against Float64's 1e-12 tolerance; integer dtypes;
// - an unknown epilogue;
// - gelu's pre-activation (aux) whose leading dimension is not a multiple
//   of 8 at least m (cuBLASLt's rule), or aux with another epilogue.
std::string epilogue_declined(const flx_gemm_epilogue_desc& e);

}  // namespace flx_cuda

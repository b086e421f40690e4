// Host-only: which fused GEMMs go to cuBLASLt (see cuda_epilogue_policy.hpp).
#include "cuda_epilogue_policy.hpp"

namespace flx_cuda {

std::string epilogue_declined(const flx_gemm_epilogue_desc& e) {
  const flx_gemm_desc& d = e.gemm;
  if (d.batch != 1 || d.m <= 0 || d.n <= 0 || d.k <= 0) return "only single products of non-empty matrices are fused";
  switch (d.dtype) {
    case FLX_F32: case FLX_F16: case FLX_BF16: break;
    case FLX_F64:
      return "Float64 products are not fused until a GPU run has measured cuBLASLt's Float64 epilogues against "
             "Float64's tolerance";
    default: return "only floating dtypes are fused (dtype code " + std::to_string(d.dtype) + ")";
  }
  if (e.epilogue < FLX_EPILOGUE_BIAS || e.epilogue > FLX_EPILOGUE_BGRADA)
    return "unknown epilogue " + std::to_string(e.epilogue);
  if (e.aux.buf && (e.epilogue != FLX_EPILOGUE_BIAS_GELU || e.aux_ld < d.m || e.aux_ld % 8 != 0))
    return "cuBLASLt needs gelu's pre-activation (aux) to have a leading dimension that is a multiple of 8, at least " +
           std::to_string(d.m) + " (got " + std::to_string(e.aux_ld) + ")";
  return {};
}

}  // namespace flx_cuda

// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1, every call set (gemm_epilogue, optional, too).
#include "cuda_common.hpp"
#include "cuda_device.hpp"

namespace flx_cuda {
namespace {

const flx_compute_table compute_table = [] {
  auto t = flx::abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, flx_cuda)
  t.reduce_workspace = reduce_workspace;  // long reductions split over blocks
#if FLX_BACKEND_TARGET_MINOR >= 2
  t.gemm_epilogue = gemm_epilogue;  // cuBLASLt epilogues (cuda_gemm_lt.cpp)
#endif
  return t;
}();

const flx_backend core_table = [] {
  flx_backend f = flx::abi::core_table_header("CUDA");
  FLX_SET_CORE_CALLS(f, flx_cuda)
#if FLX_BACKEND_TARGET_MINOR >= 1
  f.release_cached = release_cached;
#endif
#if FLX_BACKEND_TARGET_MINOR >= 2
  f.memory_info = memory_info;
#endif
  return f;
}();

}  // namespace

FLX_SERVE_TABLES(compute_table)

}  // namespace flx_cuda

FLX_DEFINE_BACKEND_ENTRY(flx_cuda::core_table)

// The map kernels of Float16 and BFloat16, computing in float (see
// cuda_map_impl.cuh).
#include "cuda_map_impl.cuh"

namespace flx_cuda {
template int map_dtype<__half>(const flx_map_desc&, cudaStream_t);
template int map_dtype<__nv_bfloat16>(const flx_map_desc&, cudaStream_t);
}  // namespace flx_cuda

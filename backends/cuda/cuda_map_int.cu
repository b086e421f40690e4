// The map kernels of the integer dtypes and Bool (see cuda_map_impl.cuh).
#include "cuda_map_impl.cuh"

namespace flx_cuda {
template int map_dtype<int32_t>(const flx_map_desc&, cudaStream_t);
template int map_dtype<int64_t>(const flx_map_desc&, cudaStream_t);
template int map_dtype<uint8_t>(const flx_map_desc&, cudaStream_t);
template int map_dtype<bool>(const flx_map_desc&, cudaStream_t);
}  // namespace flx_cuda

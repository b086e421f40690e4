// map: the entry point and the kernels of the floating dtypes (the integer
// ones are in cuda_map_int.cu, compiled in parallel).
#include "cuda_map_impl.cuh"

namespace flx_cuda {

template int map_dtype<float>(const flx_map_desc&, cudaStream_t);
template int map_dtype<double>(const flx_map_desc&, cudaStream_t);

int map(void*, int dev, const flx_map_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "map")) return e;
  if (d->ndim < 1 || d->ndim > FLX_MAX_DIMS)
    return fail(FLX_ERR_INVALID_ARGUMENT, "map: ndim " + std::to_string(d->ndim) + " is outside 1.." +
                                              std::to_string(FLX_MAX_DIMS) + " (the descriptor is not canonical)");
  if (d->numel == 0) return FLX_OK;
  int status = FLX_OK;
  if (!dispatch_dtype(d->in_dtype, [&](auto tag) { status = map_dtype<decltype(tag)>(*d, st); }))
    return dtype_error("map", d->in_dtype);
  return status;
}

}  // namespace flx_cuda

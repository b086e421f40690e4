// fill and cast: one grid-stride kernel per dtype (pair), converting each
// element as the CPU does (cast_element, cuda_kernels.cuh: halves rounded
// once, integers saturating, NaNs with the CPU's bits).
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

template <class T>
__global__ void fill_kernel(T* p, int64_t n, T v) {
  for (int64_t i = global_index(); i < n; i += global_stride()) p[i] = v;
}

template <class D, class S>
__global__ void cast_kernel(D* d, const S* s, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] = cast_element<D>(s[i]);
}

}  // namespace

int fill(void*, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "fill")) return e;
  if (n == 0) return FLX_OK;
  if (!dtype_bytes(dtype)) return dtype_error("fill", dtype);
  if (int e = check_elements(dev, dst, n, dtype_bytes(dtype), "fill")) return e;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = cast_element<T>(value);  // as the CPU
    fill_kernel<T><<<blocks_for(int64_t(n)), 256, 0, st>>>(reinterpret_cast<T*>(addr(dst)), int64_t(n), v);
  });
  return launched("fill kernel");
}

int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "cast")) return e;
  if (n == 0) return FLX_OK;
  if (!dtype_bytes(src_dtype)) return dtype_error("cast", src_dtype);
  if (!dtype_bytes(dst_dtype)) return dtype_error("cast", dst_dtype);
  if (int e = check_elements(dev, dst, n, dtype_bytes(dst_dtype), "cast")) return e;
  if (int e = check_elements(dev, src, n, dtype_bytes(src_dtype), "cast")) return e;
  dispatch_dtype(src_dtype, [&](auto stag) {
    using S = decltype(stag);
    dispatch_dtype(dst_dtype, [&](auto dtag) {
      using D = decltype(dtag);
      cast_kernel<D, S><<<blocks_for(int64_t(n)), 256, 0, st>>>(
          reinterpret_cast<D*>(addr(dst)), reinterpret_cast<const S*>(addr(src)), int64_t(n));
    });
  });
  return launched("cast kernel");
}

}  // namespace flx_cuda

// fill and cast: one grid-stride kernel per dtype (pair).
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
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    if constexpr (std::is_same_v<D, bool>) d[i] = s[i] != S(0);
    else d[i] = static_cast<D>(s[i]);
  }
}

}  // namespace

int fill(void*, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "fill")) return e;
  if (n == 0) return FLX_OK;
  bool unsupported = false;
  bool ok = dispatch_dtype(
      dtype,
      [&](auto tag) {
        using T = decltype(tag);
        T v;
        if constexpr (std::is_same_v<T, bool>) v = value != 0;
        else v = static_cast<T>(value);
        fill_kernel<T><<<blocks_for(int64_t(n)), 256, 0, st>>>(reinterpret_cast<T*>(addr(dst)), int64_t(n), v);
      },
      &unsupported);
  if (!ok) return dtype_error("fill", dtype, unsupported);
  return launched("fill kernel");
}

int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "cast")) return e;
  if (n == 0) return FLX_OK;
  bool unsupported = false;
  bool ok_dst = true;
  bool ok_src = dispatch_dtype(
      src_dtype,
      [&](auto stag) {
        using S = decltype(stag);
        ok_dst = dispatch_dtype(
            dst_dtype,
            [&](auto dtag) {
              using D = decltype(dtag);
              cast_kernel<D, S><<<blocks_for(int64_t(n)), 256, 0, st>>>(reinterpret_cast<D*>(addr(dst)),
                                                                        reinterpret_cast<const S*>(addr(src)),
                                                                        int64_t(n));
            },
            &unsupported);
      },
      &unsupported);
  if (!ok_src) return dtype_error("cast", src_dtype, unsupported);
  if (!ok_dst) return dtype_error("cast", dst_dtype, unsupported);
  return launched("cast kernel");
}

}  // namespace flx_cuda

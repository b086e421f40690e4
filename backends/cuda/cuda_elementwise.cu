// fill and cast: one grid-stride kernel per dtype (pair); Float16 and
// BFloat16 convert through float, as on the CPU.
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

// s as D: halves go through float (rounding to nearest even, as the CPU's
// Half and BFloat16); Bool is "not zero".
template <class D, class S>
__host__ __device__ __forceinline__ D convert(S s) {
  if constexpr (std::is_same_v<S, __half>) return convert<D>(__half2float(s));
  else if constexpr (std::is_same_v<S, __nv_bfloat16>) return convert<D>(__bfloat162float(s));
  else if constexpr (std::is_same_v<D, bool>) return s != S(0);
  else if constexpr (std::is_same_v<D, __half>) return __float2half_rn(float(s));
  else if constexpr (std::is_same_v<D, __nv_bfloat16>) return __float2bfloat16_rn(float(s));
  else return static_cast<D>(s);
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, T v) {
  for (int64_t i = global_index(); i < n; i += global_stride()) p[i] = v;
}

template <class D, class S>
__global__ void cast_kernel(D* d, const S* s, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] = convert<D>(s[i]);
}

}  // namespace

int fill(void*, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "fill")) return e;
  if (n == 0) return FLX_OK;
  bool ok = dispatch_dtype(
      dtype,
      [&](auto tag) {
        using T = decltype(tag);
        // as the CPU: halves from the value rounded to float first
        const T v = is_half_v<T> ? convert<T>(float(value)) : convert<T>(value);
        fill_kernel<T><<<blocks_for(int64_t(n)), 256, 0, st>>>(reinterpret_cast<T*>(addr(dst)), int64_t(n), v);
      });
  if (!ok) return dtype_error("fill", dtype);
  return launched("fill kernel");
}

int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "cast")) return e;
  if (n == 0) return FLX_OK;
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
            });
      });
  if (!ok_src) return dtype_error("cast", src_dtype);
  if (!ok_dst) return dtype_error("cast", dst_dtype);
  return launched("cast kernel");
}

}  // namespace flx_cuda

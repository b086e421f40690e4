// Random fills with Philox4x32-10: element i of a fill made with (seed,
// offset) gets the same bits as on the CPU (backends/backend_common/philox.hpp,
// compiled here for the device), so rand() is reproducible across devices.
// Uniform numbers match exactly; normal ones to the last bit or two (the
// device's log and cos round differently from glibc's).
#include <cmath>
#include <string>

#include "backend_common/philox.hpp"
#include "backend_common/uniform_bound.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

// T is the storage type; values are made in double and stored through
// float for the halves, as on the CPU (a NaN, from NaN parameters, is
// stored by the CPU's rules: store()). top: the largest value of T below b
// (uniform_bound.hpp), exact in T.
template <class T>
__global__ void random_kernel(T* p, int64_t n, int32_t dist, uint64_t seed, uint64_t offset, double a, double b,
                              double top) {
  const T top_t = store<T>(top);
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const flx::philox::U4 r = flx::philox::bits(seed, offset, uint64_t(i));
    if (dist == FLX_RANDOM_UNIFORM) {
      const T v = store<T>(a + (b - a) * flx::philox::uniform01(r));
      p[i] = double(load(v)) >= b ? top_t : v;  // rounding may reach b: keep [a, b) half-open
    } else {
      p[i] = store<T>(a + b * flx::philox::normal01(r));
    }
  }
}

template <class T>
void launch(flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset, double a, double b,
            cudaStream_t st) {
  random_kernel<T><<<blocks_for(int64_t(n)), 256, 0, st>>>(reinterpret_cast<T*>(addr(dst)), int64_t(n), dist, seed,
                                                           offset, a, b, flx::uniform_bound::largest_below(dtype, b));
}

}  // namespace

int random(void*, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
           double a, double b, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "random")) return e;
  if (dist != FLX_RANDOM_UNIFORM && dist != FLX_RANDOM_NORMAL)
    return fail(FLX_ERR_INVALID_ARGUMENT,
                "random: unknown distribution code " + std::to_string(dist) + " (expected UNIFORM or NORMAL)");
  if (n == 0) return FLX_OK;
  if (dtype_bytes(dtype))
    if (int e = check_elements(dev, dst, n, dtype_bytes(dtype), "random")) return e;
  switch (dtype) {
    case FLX_F32: launch<float>(dst, dtype, n, dist, seed, offset, a, b, st); break;
    case FLX_F64: launch<double>(dst, dtype, n, dist, seed, offset, a, b, st); break;
    case FLX_F16: launch<__half>(dst, dtype, n, dist, seed, offset, a, b, st); break;
    case FLX_BF16: launch<__nv_bfloat16>(dst, dtype, n, dist, seed, offset, a, b, st); break;
    default:
      return fail(FLX_ERR_UNSUPPORTED, std::string("random: only floating dtypes can be filled with random numbers, "
                                                   "got ") + dtype_name(dtype));
  }
  return launched("random kernel");
}

}  // namespace flx_cuda

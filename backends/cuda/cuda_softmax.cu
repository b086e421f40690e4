// softmax and logsoftmax over the middle axis of (inner, axis, outer), and
// their backward: one warp per (inner, outer) row, its lanes striding along
// the axis, with warp-shuffle reductions. The sums run in double, the rest
// in the compute type (float for Float16/BFloat16), as on the CPU.
#include <cmath>
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {

// The row maximum's step (softmax_max: a NaN never wins, as on the CPU; the
// row still comes out NaN through its sum), the body that the CPU's and
// OpenCL's softmax compile too.
namespace window {
#define FLX_ELEM_FN template <class CT> __device__ inline
#include "flx/backend_window.h"
#undef FLX_ELEM_FN
}  // namespace window

namespace {

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int o = 16; o > 0; o /= 2) {
    v = window::softmax_max(v, __shfl_xor_sync(0xffffffffu, v, o));  // the lanes' maxima combined
  }
  return v;
}

// T is the storage type; the arithmetic runs in C = compute_t<T> (float
// for the halves), as on the CPU.
template <class T>
__global__ void softmax_kernel(const T* x, const T* dy, T* out, int64_t inner, int64_t len, int64_t rows,
                               bool log_, bool backward) {
  using C = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warp = global_index() / 32, nwarps = global_stride() / 32;
  for (int64_t t = warp; t < rows; t += nwarps) {
    const int64_t i = t % inner, o = t / inner;
    const int64_t base = o * inner * len + i, st = inner;
    if (!backward) {
      C mx = C(-INFINITY);
      for (int64_t j = lane; j < len; j += 32) {
        mx = window::softmax_max(mx, C(load(x[base + j * st])));
      }
      mx = warp_max(mx);
      double s = 0;
      for (int64_t j = lane; j < len; j += 32) s += exp(double(load(x[base + j * st]) - mx));
      s = warp_sum(s);
      if (log_) {
        const C ls = C(log(s));
        for (int64_t j = lane; j < len; j += 32) out[base + j * st] = store<T>(C(load(x[base + j * st]) - mx - ls));
      } else {
        const C inv = C(1.0 / s);
        for (int64_t j = lane; j < len; j += 32)
          out[base + j * st] = store<T>(C(exp(load(x[base + j * st]) - mx) * inv));
      }
    } else {
      // softmax: dx = y .* (dy - sum(dy .* y)); logsoftmax: dx = dy - exp(y) .* sum(dy)
      double s = 0;
      for (int64_t j = lane; j < len; j += 32)
        s += log_ ? double(load(dy[base + j * st])) : double(load(dy[base + j * st])) * load(x[base + j * st]);
      s = warp_sum(s);
      for (int64_t j = lane; j < len; j += 32) {
        const C y = load(x[base + j * st]), g = load(dy[base + j * st]);
        out[base + j * st] = store<T>(log_ ? C(g - exp(y) * C(s)) : C(y * (g - C(s))));
      }
    }
  }
}

int softmax_any(int dev, const flx_softmax_desc* d, flx_stream s, bool backward) {
  const char* what = backward ? "softmax_backward" : "softmax";
  cudaStream_t st;
  if (int e = enter(dev, s, &st, what)) return e;
  const int64_t rows = d->inner * d->outer;
  if (rows == 0 || d->axis_len == 0) return FLX_OK;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T><<<blocks_for(rows * 32), 256, 0, st>>>(
        reinterpret_cast<const T*>(addr(backward ? d->y : d->x)),
        backward ? reinterpret_cast<const T*>(addr(d->dy)) : nullptr,
        reinterpret_cast<T*>(addr(backward ? d->dx : d->y)), d->inner, d->axis_len, rows, d->log != 0, backward);
  };
  if (!dispatch_float_dtype(d->dtype, run))
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + " needs a floating dtype, got " + dtype_name(d->dtype));
  return launched(backward ? "softmax_backward kernel" : "softmax kernel");
}

}  // namespace

int softmax(void*, int dev, const flx_softmax_desc* d, flx_stream s) { return softmax_any(dev, d, s, false); }
int softmax_backward(void*, int dev, const flx_softmax_desc* d, flx_stream s) { return softmax_any(dev, d, s, true); }

}  // namespace flx_cuda

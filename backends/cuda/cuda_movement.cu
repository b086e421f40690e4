// Data movement: permute, gather and scatter_add. permute and gather move
// elements by size (1, 2, 4 or 8 bytes), so they serve every dtype, halves
// included; scatter_add adds (halves in float, as on the CPU), so it
// dispatches on the dtype.
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

struct PermuteArgs {
  int32_t ndim;
  int64_t numel;
  int64_t shape[FLX_MAX_DIMS], stride[FLX_MAX_DIMS];
};

template <class E>
__global__ void permute_kernel(PermuteArgs a, const E* src, E* dst) {
  for (int64_t t = global_index(); t < a.numel; t += global_stride()) {
    int64_t off = 0, r = t;
    for (int k = 0; k < a.ndim; ++k) {
      off += (r % a.shape[k]) * a.stride[k];
      r /= a.shape[k];
    }
    dst[t] = src[off];
  }
}

// dst[i, j, o] = src[i, idx[j], o]; an index outside the axis (which the
// frontend prevents) leaves the element unwritten rather than read wild.
template <class E>
__global__ void gather_kernel(const E* src, E* dst, const int64_t* idx, int64_t inner, int64_t axis_len,
                              int64_t nidx, int64_t total) {
  for (int64_t t = global_index(); t < total; t += global_stride()) {
    const int64_t i = t % inner, jo = t / inner, j = jo % nidx, o = jo / nidx;
    const int64_t k = idx[j];
    if (k >= 0 && k < axis_len) dst[t] = src[(o * axis_len + k) * inner + i];
  }
}

// One thread per (i, o) walks j in order: repeated indices accumulate
// without atomics, in the same order as the CPU (deterministic sums).
template <class T>
__global__ void scatter_add_kernel(const T* src, T* dst, const int64_t* idx, int64_t inner, int64_t axis_len,
                                   int64_t nidx, int64_t outer) {
  for (int64_t t = global_index(); t < inner * outer; t += global_stride()) {
    const int64_t i = t % inner, o = t / inner;
    for (int64_t j = 0; j < nidx; ++j) {
      const int64_t k = idx[j];
      if (k < 0 || k >= axis_len) continue;
      T* p = dst + (o * axis_len + k) * inner + i;
      *p = store<T>(load(*p) + load(src[(o * nidx + j) * inner + i]));
    }
  }
}

size_t elem_size(int32_t t) {
  switch (t) {
    case FLX_F32: case FLX_I32: return 4;
    case FLX_F64: case FLX_I64: return 8;
    case FLX_F16: case FLX_BF16: return 2;
    case FLX_U8: case FLX_BOOL: return 1;
  }
  return 0;
}

// Call f(E{}) with an unsigned type of dtype t's size.
template <class F>
bool by_size(int32_t t, F&& f) {
  switch (elem_size(t)) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
  }
  return false;
}

}  // namespace

int permute(void*, int dev, const flx_permute_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "permute")) return e;
  if (d->ndim < 0 || d->ndim > FLX_MAX_DIMS)
    return fail(FLX_ERR_INVALID_ARGUMENT, "permute: ndim " + std::to_string(d->ndim) + " outside 0.." +
                                              std::to_string(FLX_MAX_DIMS));
  if (d->numel == 0) return FLX_OK;
  PermuteArgs a{};
  a.ndim = d->ndim;
  a.numel = d->numel;
  for (int k = 0; k < d->ndim; ++k) a.shape[k] = d->out_shape[k], a.stride[k] = d->src_strides[k];
  bool ok = by_size(d->dtype, [&](auto tag) {
    using E = decltype(tag);
    permute_kernel<E><<<blocks_for(a.numel), 256, 0, st>>>(a, reinterpret_cast<const E*>(addr(d->src)),
                                                          reinterpret_cast<E*>(addr(d->dst)));
  });
  if (!ok) return dtype_error("permute", d->dtype);
  return launched("permute kernel");
}

int gather(void*, int dev, const flx_index_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "gather")) return e;
  const int64_t total = d->inner * d->nidx * d->outer;
  if (total == 0) return FLX_OK;
  bool ok = by_size(d->dtype, [&](auto tag) {
    using E = decltype(tag);
    gather_kernel<E><<<blocks_for(total), 256, 0, st>>>(
        reinterpret_cast<const E*>(addr(d->src)), reinterpret_cast<E*>(addr(d->dst)),
        reinterpret_cast<const int64_t*>(addr(d->idx)), d->inner, d->axis_len, d->nidx, total);
  });
  if (!ok) return dtype_error("gather", d->dtype);
  return launched("gather kernel");
}

int scatter_add(void*, int dev, const flx_index_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "scatter_add")) return e;
  if (d->inner * d->outer == 0 || d->nidx == 0) return FLX_OK;
  int status = FLX_OK;
  auto body = [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
          status = fail(FLX_ERR_UNSUPPORTED, "scatter_add: Bool cannot be added; convert to an integer dtype first");
        } else {
          scatter_add_kernel<T><<<blocks_for(d->inner * d->outer), 256, 0, st>>>(
              reinterpret_cast<const T*>(addr(d->src)), reinterpret_cast<T*>(addr(d->dst)),
              reinterpret_cast<const int64_t*>(addr(d->idx)), d->inner, d->axis_len, d->nidx, d->outer);
        }
  };
  const bool ok = dispatch_dtype(d->dtype, body);
  if (!ok) return dtype_error("scatter_add", d->dtype);
  if (status) return status;
  return launched("scatter_add kernel");
}

}  // namespace flx_cuda

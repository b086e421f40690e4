// Data movement: permute, gather and scatter_add. permute and gather move
// elements by size (1, 2, 4 or 8 bytes), so they serve every dtype, halves
// included; scatter_add adds (halves in float, as on the CPU), so it
// dispatches on the dtype.
#include <algorithm>
#include <string>

#include <cub/device/device_radix_sort.cuh>

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

// scatter_add adds each destination element's sources in index order (j
// ascending), as the CPU does: repeated indices accumulate without atomics,
// to the CPU's bits, run after run. Two kernels do it:
//  - scatter_add_kernel: one thread per (i, o) walks every j in order. As
//    parallel as inner * outer: fine for a few indices, or slices wide
//    enough to fill the GPU.
//  - for many indices into narrow slices (an embedding's gradient: d
//    features, thousands of tokens), the indices are sorted by value with
//    CUB's radix sort, which is stable, so equal indices keep position order;
//    then scatter_add_sorted_kernel gives one thread per (i, sorted position,
//    o), and the thread at the start of a run of one index k adds the run's
//    sources to dst[i, k, o] in position order. The same sums in the same
//    order, parallel over the indices too. (A segmented tree reduction would
//    balance a very long run better, but would add in another order: other
//    bits than the CPU's.)
// An index outside the axis (which the frontend prevents) is skipped by both.

// One thread per (i, o) walks j in order.
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

// The sort's input: each index as its key, or axis_len (past every row, so
// it sorts last and is skipped) for one outside the axis; its position as
// its value.
__global__ void scatter_keys_kernel(const int64_t* idx, uint64_t* keys, int64_t* pos, int64_t axis_len,
                                    int64_t nidx) {
  for (int64_t j = global_index(); j < nidx; j += global_stride()) {
    const int64_t k = idx[j];
    keys[j] = uint64_t(k >= 0 && k < axis_len ? k : axis_len);
    pos[j] = j;
  }
}

// After the sort: thread (i, p, o) for every sorted position p; the one at
// the first position of a run of index k adds the run's sources to
// dst[i, k, o] in position order, rounding to T at each step as the serial
// kernel does. Consecutive threads take consecutive i: coalesced rows.
template <class T>
__global__ void scatter_add_sorted_kernel(const T* src, T* dst, const uint64_t* keys, const int64_t* pos,
                                          int64_t inner, int64_t axis_len, int64_t nidx, int64_t total) {
  for (int64_t t = global_index(); t < total; t += global_stride()) {
    const int64_t i = t % inner, po = t / inner, p = po % nidx, o = po / nidx;
    const uint64_t k = keys[p];
    if (k >= uint64_t(axis_len) || (p > 0 && keys[p - 1] == k)) continue;
    T* out = dst + (o * axis_len + int64_t(k)) * inner + i;
    T acc = *out;
    for (int64_t q = p; q < nidx && keys[q] == k; ++q)
      acc = store<T>(load(acc) + load(src[(o * nidx + pos[q]) * inner + i]));
    *out = acc;
  }
}

// Few indices: the serial kernel's loops are short. Otherwise the sorted
// path, unless inner * outer threads already fill the GPU (each
// multiprocessor keeps 2048 threads resident), where both do the same work.
constexpr int64_t kSerialMaxIndices = 32;

bool use_sorted_path(const flx_index_desc& d) {
  const int64_t resident = int64_t(std::max(current_sm_count(), 1)) * 2048;
  return d.nidx > kSerialMaxIndices && d.inner * d.outer < resident;
}

// The bits a key needs to hold 0..axis_len (the largest key is axis_len).
int key_bits(int64_t axis_len) {
  int bits = 1;
  while (bits < 63 && (uint64_t(1) << bits) <= uint64_t(axis_len)) ++bits;
  return bits;
}

// Offset rounded up to 256 bytes: each scratch array starts aligned.
size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t(255); }

// Sorts the indices into scratch memory from the device's pool
// (stream-ordered: allocated, used and freed on st, with no wait) and
// launches scatter_add_sorted_kernel. false, with nothing launched, when the
// scratch memory cannot be had; the caller then runs the serial kernel,
// which gives the same bits.
template <class T>
bool scatter_add_sorted(const flx_index_desc* d, cudaStream_t st, int* status) {
  const int64_t n = d->nidx;
  const int end_bit = key_bits(d->axis_len);
  size_t sort_bytes = 0;
  if (cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                      static_cast<uint64_t*>(nullptr), static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), n, 0, end_bit, st) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const size_t array = aligned(size_t(n) * 8);  // keys and positions, in and out: 8 bytes each
  void* scratch = nullptr;
  if (cudaMallocAsync(&scratch, 4 * array + aligned(sort_bytes), st) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<uint64_t*>(base);
  auto* keys = reinterpret_cast<uint64_t*>(base + array);
  auto* pos_in = reinterpret_cast<int64_t*>(base + 2 * array);
  auto* pos = reinterpret_cast<int64_t*>(base + 3 * array);
  void* sort_scratch = base + 4 * array;
  scatter_keys_kernel<<<blocks_for(n), 256, 0, st>>>(reinterpret_cast<const int64_t*>(addr(d->idx)), keys_in, pos_in,
                                                     d->axis_len, n);
  *status = launched("scatter_add's key kernel");
  if (*status == FLX_OK) {
    const cudaError_t e =
        cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, keys_in, keys, pos_in, pos, n, 0, end_bit, st);
    if (e != cudaSuccess) (void)cudaGetLastError();
    *status = check(e, "scatter_add's sort (cub::DeviceRadixSort::SortPairs)");
  }
  if (*status == FLX_OK) {
    const int64_t total = d->inner * n * d->outer;
    scatter_add_sorted_kernel<T><<<blocks_for(total), 256, 0, st>>>(
        reinterpret_cast<const T*>(addr(d->src)), reinterpret_cast<T*>(addr(d->dst)), keys, pos, d->inner,
        d->axis_len, n, total);
    *status = launched("scatter_add sorted kernel");
  }
  // Freed in stream order: after the kernels above have read it.
  if (cudaFreeAsync(scratch, st) != cudaSuccess) (void)cudaGetLastError();
  return true;
}

// Call f(E{}) with an unsigned type of dtype t's size.
template <class F>
bool by_size(int32_t t, F&& f) {
  switch (dtype_bytes(t)) {
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
  if (d->inner * d->outer == 0 || d->nidx == 0 || d->axis_len == 0) return FLX_OK;
  int status = FLX_OK;
  bool sorted = false;
  auto body = [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
          status = fail(FLX_ERR_UNSUPPORTED, "scatter_add: Bool cannot be added; convert to an integer dtype first");
        } else {
          if (use_sorted_path(*d)) sorted = scatter_add_sorted<T>(d, st, &status);
          if (!sorted)
            scatter_add_kernel<T><<<blocks_for(d->inner * d->outer), 256, 0, st>>>(
                reinterpret_cast<const T*>(addr(d->src)), reinterpret_cast<T*>(addr(d->dst)),
                reinterpret_cast<const int64_t*>(addr(d->idx)), d->inner, d->axis_len, d->nidx, d->outer);
        }
  };
  const bool ok = dispatch_dtype(d->dtype, body);
  if (!ok) return dtype_error("scatter_add", d->dtype);
  if (status || sorted) return status;
  return launched("scatter_add kernel");
}

}  // namespace flx_cuda

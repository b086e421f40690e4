// CPU data movement: permute, gather and scatter_add.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {

int permute(void*, int, const flx_permute_desc* dp, flx_stream) {
  // Canonical: out_shape/src_strides already permuted and merged.
  const flx_permute_desc& d = *dp;
  size_t es = dtype_size(DType(d.dtype));
  const int64_t* out_shape = d.out_shape;
  const int64_t* src_stride = d.src_strides;
  const int64_t total = d.numel;
  const char* src = addr(d.src);
  char* dst = addr(d.dst);
  int64_t n0 = d.ndim ? out_shape[0] : 1, st0 = d.ndim ? src_stride[0] : 0;
  int64_t rows = n0 ? total / n0 : 0;
  auto copy_rows = [&](auto tag) {
    using E = decltype(tag);
    const E* sp = reinterpret_cast<const E*>(src);
    E* dp2 = reinterpret_cast<E*>(dst);
    parallel_for(rows, grain_of(n0), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        int64_t off = 0, rem = r;
        for (int k = 1; k < d.ndim; ++k) {
          off += (rem % out_shape[k]) * src_stride[k];
          rem /= out_shape[k];
        }
        E* o = dp2 + r * n0;
        for (int64_t i = 0; i < n0; ++i) o[i] = sp[off + i * st0];
      }
    });
  };
  switch (es) {
    case 1: copy_rows(uint8_t{}); break;
    case 2: copy_rows(uint16_t{}); break;
    case 4: copy_rows(uint32_t{}); break;
    case 8: copy_rows(uint64_t{}); break;
    default: return fail(FLX_ERR_INVALID_ARGUMENT, "permute: bad dtype");
  }
  return FLX_OK;
}

int gather(void*, int, const flx_index_desc* dp, flx_stream) {
  const flx_index_desc& d = *dp;
  size_t es = dtype_size(DType(d.dtype));
  const int64_t* idx = reinterpret_cast<const int64_t*>(addr(d.idx));
  const char* src = addr(d.src);
  char* dst = addr(d.dst);
  size_t row = size_t(d.inner) * es;
  for (int64_t j = 0; j < d.nidx; ++j)
    if (idx[j] < 0 || idx[j] >= d.axis_len) return fail(FLX_ERR_INVALID_ARGUMENT, "gather: index out of range");
  // Rows of one element (flip_kernel's reversal, a vector's elements):
  // typed loads and stores, with one division per chunk rather than a
  // memcpy call and a division per element.
  auto elements = [&](auto tag) {
    using E = decltype(tag);
    const E* sp = reinterpret_cast<const E*>(src);
    E* dp2 = reinterpret_cast<E*>(dst);
    parallel_for(d.outer * d.nidx, grain_of(1), [&](int64_t lo, int64_t hi) {
      int64_t j = lo % d.nidx;
      const E* s = sp + (lo / d.nidx) * d.axis_len;
      for (int64_t t = lo; t < hi; ++t) {
        dp2[t] = s[idx[j]];
        if (++j == d.nidx) j = 0, s += d.axis_len;
      }
    });
    return FLX_OK;
  };
  if (d.inner == 1 && es == 4) return elements(uint32_t{});
  if (d.inner == 1 && es == 8) return elements(uint64_t{});
  if (d.inner == 1 && es == 2) return elements(uint16_t{});
  if (d.inner == 1 && es == 1) return elements(uint8_t{});
  parallel_for(d.outer * d.nidx, grain_of(d.inner), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / d.nidx, j = t % d.nidx;
      std::memcpy(dst + t * row, src + (o * d.axis_len + idx[j]) * row, row);
    }
  });
  return FLX_OK;
}

// dst[i, idx[j], o] += src[i, j, o]. Every destination element adds its
// contributions in index order (j ascending), as one serial loop would, so
// repeated indices give the same bits however the work is split: threads
// take pieces of (o, a block of i), each block a cache line of T wide so
// that no two threads write one line (for rows that start on a line), and
// walk j in order over their blocks. (A problem
// one block wide, such as an embedding of 8 floats, runs on one thread.)
int scatter_add(void*, int, const flx_index_desc* dp, flx_stream) {
  const flx_index_desc& d = *dp;
  const int64_t* idx = reinterpret_cast<const int64_t*>(addr(d.idx));
  for (int64_t j = 0; j < d.nidx; ++j)
    if (idx[j] < 0 || idx[j] >= d.axis_len) return fail(FLX_ERR_INVALID_ARGUMENT, "scatter_add: index out of range");
  int status = FLX_OK;
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      status = fail(FLX_ERR_UNSUPPORTED, "scatter_add on Bool");
    } else {
      const T* src = reinterpret_cast<const T*>(addr(d.src));
      T* dst = reinterpret_cast<T*>(addr(d.dst));
      constexpr int64_t block = std::max<int64_t>(1, 64 / int64_t(sizeof(T)));  // one cache line of T
      const int64_t blocks = (d.inner + block - 1) / block;
      const int64_t per_piece = block * std::max<int64_t>(1, d.nidx);  // the additions of one piece
      parallel_for(d.outer * blocks, grain_of(per_piece), [&](int64_t lo, int64_t hi) {
        // The range's pieces of one o are adjacent blocks: one span of i.
        for (int64_t p = lo; p < hi;) {
          const int64_t o = p / blocks, end = std::min(hi, (o + 1) * blocks);
          const int64_t i0 = (p - o * blocks) * block, i1 = std::min(d.inner, (end - o * blocks) * block);
          for (int64_t j = 0; j < d.nidx; ++j) {
            const T* s = src + (o * d.nidx + j) * d.inner;
            T* t = dst + (o * d.axis_len + idx[j]) * d.inner;
            for (int64_t i = i0; i < i1; ++i) t[i] = store<T>(load(t[i]) + load(s[i]));
          }
          p = end;
        }
      });
    }
  });
  return status;
}

}  // namespace flx::cpu_backend

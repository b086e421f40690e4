// Canonical descriptors: the dim coalescing, reduce runs and permute
// strides every backend would otherwise compute again. The frontend builds
// descriptors with these; backends receive them simplified (backend.h).
// Not installed.
#pragma once

#include <cstdint>

#include "flx/backend.h"

namespace flx::detail {

// Drop size-1 dims and merge adjacent dims that every operand (scalars
// count as stride 0) and the contiguous output continue contiguously.
// d.ndim/shape/in[].strides describe the output's dims on entry; on return
// they are canonical and d.numel is set.
void canonicalize_dims(flx_map_desc& d);
inline void canonicalize(flx_map_desc& d) {
  if (d.ndim == 1 && d.shape[0] != 1) {  // a vector, the most common small case: canonical as it is
    for (int i = 0; i < 3; ++i)
      if (i >= d.ninputs) d.in[i] = flx_operand{};
      else if (d.in[i].is_scalar) d.in[i].strides[0] = 0;
    d.numel = d.shape[0];
    return;
  }
  canonicalize_dims(d);
}

// Reduce a contiguous tensor of `shape` over the dims in `mask`.
flx_reduce_desc reduce_desc(int32_t op, int32_t dtype, int ndim, const int64_t* shape, uint32_t mask, double scale,
                            flx_mem in, flx_mem out);

// dst = permutedims(src, perm) for a contiguous src of `shape`.
flx_permute_desc permute_desc(int32_t dtype, int ndim, const int64_t* shape, const int32_t* perm, flx_mem src,
                              flx_mem dst);

}  // namespace flx::detail

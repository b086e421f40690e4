// Dropout's keep decision for one element of a uniform fill, as every
// backend's `random` (FLX_RANDOM_UNIFORM on [0, 1)) and map (GE against a
// scalar) make it: attention that draws its dropout in pieces (the dnn
// table's attention_*, libflx's tiled attention) keeps exactly the weights
// that the materialising path's dropout(α, p) keeps, r >= p with r drawn
// whole. Host code (the CPU backend and libflx).
#pragma once

#include <cstdint>

#include "backend_common/philox.hpp"
#include "backend_common/uniform_bound.hpp"
#include "flx/backend.h"
#include "flx/dtype.hpp"

namespace flx::dropout_keep {

// Element e of a uniform fill of dtype made with (seed, offset), as a double
// (exact in dtype): the draw rounded to the dtype (halves through float, as
// the backends compute them), a value rounded up to 1 replaced by the
// largest one below (uniform_bound.hpp).
inline double uniform(int32_t dtype, uint64_t seed, uint64_t offset, uint64_t e) {
  const double u = philox::uniform01(philox::bits(seed, offset, e));
  double v = u;
  switch (dtype) {
    case FLX_F32: v = double(float(u)); break;
    case FLX_F16: v = double(half_to_float(float_to_half(float(u)))); break;
    case FLX_BF16: v = double(bf16_to_float(float_to_bf16(float(u)))); break;
    default: break;
  }
  return v >= 1.0 ? uniform_bound::largest_below(dtype, 1.0) : v;
}

// The scalar p as a map op compares with it in dtype (stored in the dtype,
// halves through float): keep an element when uniform(...) >= threshold.
inline double threshold(int32_t dtype, double p) {
  switch (dtype) {
    case FLX_F32: return double(float(p));
    case FLX_F16: return double(half_to_float(float_to_half(float(p))));
    case FLX_BF16: return double(bf16_to_float(float_to_bf16(float(p))));
    default: return p;
  }
}

}  // namespace flx::dropout_keep

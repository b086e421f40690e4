// Upsampling layers (Flux's upsample.jl): Upsample and PixelShuffle, on
// NNlib's upsample_nearest, upsample_bilinear and pixel_shuffle
// (flx/arrays.hpp). Inputs are (spatial..., channels, batch).
//
// Each layer's declarations follow its struct: FLX_FUNCTOR (its tensors) or
// FLX_LEAF (none), show_compact (its one-line form, as Flux prints it;
// `os << layer` adds the counts: show.hpp) and outputsize (its shape rule:
// the forward pass's checks and sizes without computing: outputsize.hpp).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "flx/arrays.hpp"
#include "flx/functor.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// Flux's Upsample(mode; scale or size):
//   Upsample({.scale = {2, 2}})                    nearest, (W, H) × 2
//   Upsample({.scale = {2}})                       one scale for every spatial dim
//   Upsample({.mode = "bilinear", .size = {64, 48}})
//   Upsample(2), Upsample(2, "bilinear")           Flux's Upsample(scale, mode)
// .mode: "nearest" (the default; whole scales, sizes whole multiples),
// "bilinear" (2 spatial dims) or "trilinear" (3), interpolating as NNlib
// does, with its align_corners (true; `.align_corners = false` is
// PyTorch's default). One of .scale and .size, not both: an ArgumentError
// when the layer is made, as Flux's.
struct FLX_API Upsample {
  UpsampleOptions options;

  explicit Upsample(UpsampleOptions o);
  explicit Upsample(double scale, std::string mode = "nearest");
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(Upsample)
FLX_API void show_compact(std::ostream& os, const Upsample& l);      // Upsample(:nearest, scale = (2, 3))
FLX_API Shape outputsize(const Upsample& l, const Shape& x);

// Flux's PixelShuffle(r): (W, H, r²C, N) to (rW, rH, C, N), for 1 to 3
// spatial dims (NNlib's pixel_shuffle).
struct FLX_API PixelShuffle {
  int64_t r = 1;
  explicit PixelShuffle(int64_t r);
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(PixelShuffle)
FLX_API void show_compact(std::ostream& os, const PixelShuffle& l);  // PixelShuffle(2)
FLX_API Shape outputsize(const PixelShuffle& l, const Shape& x);

}  // namespace flx

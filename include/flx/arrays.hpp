// Array operations (Julia's Base, MLUtils and NNlib names, 0-based dims):
// concatenating, splitting, slicing, repeating, reversing, cumulative sums,
// padding, upsampling and pixel shuffling. Every op is differentiable (in
// floating inputs) and runs on every device, built from the backend's
// copies, maps, gathers and scatter-adds; docs/arrays.md has the details.
// Shapes are column-major, so the last dim is the one whose slices are
// contiguous: selectdim, slice and chunk along it (or along any dim after
// which every dim has size 1) are views that share x's storage.
#pragma once

#include "flx/export.hpp"

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "flx/tensor.hpp"

namespace flx {

// cat(xs, dim): Julia's cat(xs...; dims = dim + 1). Every tensor needs the
// same extents in every dim but `dim`; a tensor with fewer dims counts as
// having trailing dims of size 1, so that hcat of vectors is a matrix and
// cat along a new dim stacks. Element types promote; one device.
FLX_API Tensor cat(const std::vector<Tensor>& xs, int dim);
// vcat (dim 0) and hcat (dim 1), of a list or of tensors given one by one.
FLX_API Tensor vcat(const std::vector<Tensor>& xs);
FLX_API Tensor hcat(const std::vector<Tensor>& xs);
template <class... T>
  requires(std::same_as<T, Tensor> && ...)
Tensor vcat(const Tensor& x, const T&... xs) {
  return vcat(std::vector<Tensor>{x, xs...});
}
template <class... T>
  requires(std::same_as<T, Tensor> && ...)
Tensor hcat(const Tensor& x, const T&... xs) {
  return hcat(std::vector<Tensor>{x, xs...});
}

// stack(xs, dim): Julia's stack(xs; dims = dim + 1): tensors of one shape
// along a new dim inserted at `dim` (0 <= dim <= ndims; ndims: the last).
FLX_API Tensor stack(const std::vector<Tensor>& xs, int dim);
FLX_API Tensor stack(const std::vector<Tensor>& xs);  // a new last dim (Julia's stack(xs))
// unstack(x, dim): MLUtils' unstack: selectdim(x, dim, i) for each i.
FLX_API std::vector<Tensor> unstack(const Tensor& x, int dim);
// chunk(x, n, dim): MLUtils' chunk: x split along `dim` (the last dim when
// omitted) into pieces of cld(size, n), the last one shorter when size is
// not a multiple; so there may be fewer than n pieces (10 in 6: 5 of 2).
FLX_API std::vector<Tensor> chunk(const Tensor& x, int64_t n, int dim);
FLX_API std::vector<Tensor> chunk(const Tensor& x, int64_t n);

// selectdim(x, dim, i): the slice at index i (0-based) along dim, with dim
// dropped (Julia's selectdim). slice(x, dim, start, stop): indices
// [start, stop) along dim, dim kept (slice_last generalised).
FLX_API Tensor selectdim(const Tensor& x, int dim, int64_t i);
FLX_API Tensor slice(const Tensor& x, int dim, int64_t start, int64_t stop);

// repeat(x, counts): Julia's repeat(x, counts...): x tiled counts[k] times
// along dim k (size[k] * counts[k]); more counts than dims add dims.
FLX_API Tensor repeat(const Tensor& x, const std::vector<int64_t>& counts);
// reverse(x, dim): the elements along dim in reverse order; reverse(x):
// along every dim (Julia's reverse(x; dims = :)).
FLX_API Tensor reverse(const Tensor& x, int dim);
FLX_API Tensor reverse(const Tensor& x);
// cumsum(x, dim): y[.., j, ..] = sum of x[.., 0:j, ..] along dim; cumsum(x)
// of a vector. Integer and Bool inputs sum in Int64, as sum does.
FLX_API Tensor cumsum(const Tensor& x, int dim);
FLX_API Tensor cumsum(const Tensor& x);

// Padding, NNlib's: `pad` holds (lo, hi) pairs for the leading dims,
// {lo0, hi0, lo1, hi1, ...} (fewer pairs than dims leave the rest alone);
// an integer pads both sides of every dim (pad_zeros, pad_constant) or of
// the spatial dims, all but the last two (the others, as NNlib).
//   pad_constant  the value, converted to x's element type
//   pad_zeros     pad_constant with 0
//   pad_reflect   mirrored without the edge ([1 2 3] by 2: 3 2 1 2 3 2 1);
//                 a side pads at most size - 1
//   pad_symmetric mirrored with the edge ([1 2 3] by 2: 2 1 1 2 3 3 2);
//                 a side pads at most size
//   pad_repeat    the edge repeated ([1 2 3] by 2: 1 1 1 2 3 3 3)
//   pad_circular  wrapped around ([1 2 3] by 2: 2 3 1 2 3 1 2); a side
//                 pads at most size
FLX_API Tensor pad_constant(const Tensor& x, const std::vector<int64_t>& pad, double value = 0);
FLX_API Tensor pad_constant(const Tensor& x, int64_t pad, double value = 0);
FLX_API Tensor pad_zeros(const Tensor& x, const std::vector<int64_t>& pad);
FLX_API Tensor pad_zeros(const Tensor& x, int64_t pad);
FLX_API Tensor pad_reflect(const Tensor& x, const std::vector<int64_t>& pad);
FLX_API Tensor pad_reflect(const Tensor& x, int64_t pad);
FLX_API Tensor pad_symmetric(const Tensor& x, const std::vector<int64_t>& pad);
FLX_API Tensor pad_symmetric(const Tensor& x, int64_t pad);
FLX_API Tensor pad_repeat(const Tensor& x, const std::vector<int64_t>& pad);
FLX_API Tensor pad_repeat(const Tensor& x, int64_t pad);
FLX_API Tensor pad_circular(const Tensor& x, const std::vector<int64_t>& pad);
FLX_API Tensor pad_circular(const Tensor& x, int64_t pad);

// Upsampling, NNlib's, as the Upsample layer's options spell it: a scale
// per leading (spatial) dim, or the output's size there.
//   upsample_nearest(x, {.scale = {2, 2}})   whole scales, over the first
//                                            scale.size() dims (any number)
//   upsample_nearest(x, {.size = {8, 6}})    each a multiple of x's size
//   upsample_bilinear(x, {.scale = {2, 2}})  real scales (the output is
//                                            floor(scale * size)), one per
//                                            spatial dim: 2 for (W, H, C, N)
//                                            (1 and 3, linear and trilinear,
//                                            work alike)
// upsample_bilinear interpolates as NNlib and PyTorch do; align_corners
// (NNlib's default, true) maps the corner pixels' centres onto each other;
// false maps the corners of the image (PyTorch's default). Integer inputs
// interpolate in Float32.
// .mode is the Upsample layer's ("nearest" when empty, "bilinear",
// "trilinear"; layers/upsample.hpp); each function takes its own or none.
// .scale: a list of scales, or one number (`.scale = 2`, Flux's
// Upsample(scale = 2), the same as `.scale = {2}`).
struct FLX_API UpsampleScale : std::vector<double> {
  using std::vector<double>::vector;
  UpsampleScale() = default;
  UpsampleScale(double s) : std::vector<double>{s} {}  // NOLINT: implicit on purpose
  UpsampleScale(std::vector<double> v) : std::vector<double>(std::move(v)) {}  // NOLINT
};
struct FLX_API UpsampleOptions {
  std::string mode = {};
  UpsampleScale scale = {};
  std::vector<int64_t> size = {};
  bool align_corners = true;
};
FLX_API Tensor upsample_nearest(const Tensor& x, const UpsampleOptions& o);
FLX_API Tensor upsample_bilinear(const Tensor& x, const UpsampleOptions& o);

// pixel_shuffle(x, r): NNlib's: (W, H, r²C, N) to (rW, rH, C, N), and the
// same for 1 to 3 spatial dims (r^d channels become an r-fold of each).
FLX_API Tensor pixel_shuffle(const Tensor& x, int64_t r);

}  // namespace flx

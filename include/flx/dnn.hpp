// Convolution, pooling, batch normalisation and dropout as functions (NNlib's
// conv, maxpool, meanpool, Flux's batchnorm and dropout), differentiable and
// run by each device's dnn table (oneDNN, cuDNN, OpenCL kernels). The layers
// (flx/layers/conv.hpp, flx/layers/normalise.hpp) are built on them.
//
// Images are WHCN as in Flux: (width, height, channels, batch), width
// fastest; 1-D and 3-D data drop or add a spatial dim: (W, C, N), (W, H, D,
// C, N). A convolution's weight is (kernel..., in_channels / groups,
// out_channels).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "flx/initialisers.hpp"
#include "flx/tensor.hpp"

namespace flx {

// Convolutions and pools run over 1 to 3 spatial dims.
inline constexpr int kMaxSpatialDims = 3;

// One value for every spatial dim (2), or one per dim, first dim first ({2, 1}).
struct FLX_API PerDim {
  std::vector<int64_t> values{1};
  PerDim(int64_t v) : values{v} {}  // NOLINT: `.stride = 2` reads as Flux's stride=2
  PerDim(std::initializer_list<int64_t> v) : values(v) {}
  explicit PerDim(std::vector<int64_t> v) : values(std::move(v)) {}
  // The value for each of n spatial dims; ArgumentError naming `what` and
  // `layer` when the count is neither 1 nor n or a value is below `min`.
  std::vector<int64_t> expand(int n, const char* what, const char* layer, int64_t min) const;
};

// Flux's SamePad(): the output keeps the input's size at stride 1 (the
// total padding (kernel - 1) * dilation, its larger half first); a
// transposed convolution's output is the input times the stride (the total
// (kernel - stride) * dilation).
struct FLX_API SamePad {};

// Padding: one number for every side (1), one per spatial dim ({1, 2}: both
// sides of dim 1, then of dim 2), one per side of each dim ({1, 0, 2, 2}:
// low and high side of dim 1, then dim 2; Flux's order), or SamePad().
struct FLX_API Padding {
  std::vector<int64_t> values{0};
  bool same = false;
  Padding(int64_t v) : values{v} {}  // NOLINT
  Padding(std::initializer_list<int64_t> v) : values(v) {}
  explicit Padding(std::vector<int64_t> v) : values(std::move(v)) {}
  Padding(SamePad) : same(true) {}  // NOLINT
  bool operator==(const Padding&) const = default;
};

// A convolution's options, Flux's keywords in Flux's order (outpad after
// groups, so that older spellings keep theirs): outpad, one value or one per
// spatial dim, adds to a transposed convolution's output (ConvTranspose
// only; each below the stride or the dilation); init and bias are the
// layers' (Conv, CrossCor, ConvTranspose, DepthwiseConv): the weight's
// initialiser (empty: glorot_uniform) and whether it has a bias. The ops
// read stride, pad, dilation, groups and outpad.
struct FLX_API ConvOptions {
  PerDim stride = 1;
  Padding pad = 0;
  PerDim dilation = 1;
  int64_t groups = 1;
  PerDim outpad = 0;
  InitFn init = {};
  bool bias = true;
};

// The resolved geometry of one convolution or pooling window over nspatial
// dims (libflx fills it from the options and the kernel size; ops check it).
struct FLX_API WindowGeometry {
  int nspatial = 0;
  std::vector<int64_t> kernel, stride, dilation, pad_lo, pad_hi;
};
// `transposed`: the geometry of a transposed convolution (SamePad pads it
// so that the output is the input times the stride, as Flux's). Sizes that
// would overflow int64 raise ArgumentError naming `layer` and the option.
FLX_API WindowGeometry conv_geometry(const std::vector<int64_t>& kernel, const ConvOptions& o, const char* layer,
                             bool transposed = false);

// Cross-correlation of x with w (+ bias b, one per output channel; an
// undefined b for none): NNlib's conv with flipped = true. `conv` flips the
// kernel first: a true convolution, as Flux's Conv computes. `layer` names
// the caller in errors.
FLX_API Tensor crosscor(const Tensor& x, const Tensor& w, const Tensor& b, const ConvOptions& o = {},
                        const char* layer = "crosscor");
FLX_API Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvOptions& o = {}, const char* layer = "conv");
// The transpose of conv (the gradient of its input: a cross-correlation's
// with the kernel flipped), as Flux's ConvTranspose and PyTorch's
// ConvTranspose2d compute it: w is (kernel..., out_channels / groups,
// in_channels).
// out_pad (per spatial dim, 0 by default) adds to the output's high side
// the rows a strided forward would drop.
FLX_API Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor& b, const ConvOptions& o = {},
                              const std::vector<int64_t>& out_pad = {}, const char* layer = "conv_transpose");
// The kernel reversed along its spatial dims (Conv's flip; PyTorch's Conv2d
// weight as Flux's Conv needs it).
FLX_API Tensor flip_kernel(const Tensor& w, int nspatial);

struct FLX_API PoolOptions {
  std::optional<PerDim> stride;  // default: the window
  Padding pad = 0;
};
FLX_API Tensor maxpool(const Tensor& x, const std::vector<int64_t>& window, const PoolOptions& o = {},
                       const char* layer = "maxpool");
FLX_API Tensor meanpool(const Tensor& x, const std::vector<int64_t>& window, const PoolOptions& o = {},
                        const char* layer = "meanpool");  // padding counts in each window's size
// NNlib's lpnormpool (PyTorch's LPPool): (Σ x^p)^(1/p) over each window,
// 0 < p < Inf; padding adds zeros to the sums. Composed of pow and meanpool.
FLX_API Tensor lpnormpool(const Tensor& x, double p, const std::vector<int64_t>& window, const PoolOptions& o = {},
                          const char* layer = "lpnormpool");

// Batch normalisation over every dim but the channels (the second last) of x.
// training: batch statistics, and running_mean/var (when defined) move by
// momentum as Flux's do; else the running statistics normalise. scale and
// bias may be undefined (1 and 0).
FLX_API Tensor batchnorm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& running_mean,
                 const Tensor& running_var, bool training, double momentum = 0.1, double epsilon = 1e-5,
                 const char* layer = "batchnorm");

// x with each element (or each slice along `dims`' complement, Flux's dims)
// zeroed with probability p and the rest scaled by 1 / (1 - p); the mask is
// drawn on x's device from the global seed (set_seed).
FLX_API Tensor dropout(const Tensor& x, double p, const std::vector<int>& dims = {});

// Dropout for self-normalising (selu) networks, as Flux's AlphaDropout: each
// element is set to selu's negative saturation α' = -λα with probability p,
// then the whole is scaled and shifted (A .* x′ .+ B) so that inputs of mean
// 0 and variance 1 keep them. The mask is drawn as dropout's.
FLX_API Tensor alphadropout(const Tensor& x, double p);

// (..., N) -> (prod(...), N), Flux's flatten / MLUtils.flatten. A function
// object, as the activations are, so that `flatten` in a Chain is a layer
// with a name and a shape rule (Flux users write Flux.flatten there;
// Flatten() is the same layer).
struct FLX_API Flatten {
  Tensor operator()(const Tensor& x) const;
  static const char* name() { return "flatten"; }
};
inline constexpr Flatten flatten{};

}  // namespace flx

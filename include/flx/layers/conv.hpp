// Convolution and pooling layers (Flux's conv.jl): Conv, CrossCor,
// ConvTranspose, DepthwiseConv, MaxPool, MeanPool, GlobalMaxPool, GlobalMeanPool,
// AdaptiveMaxPool, AdaptiveMeanPool, Flatten and LPNormPool. Inputs are WHCN
// (flx/dnn.hpp); each layer prints as Flux prints it:
//   Conv((3, 3), 1 => 16, relu, pad=1)
//
// Each layer's declarations follow its struct: FLX_FUNCTOR (its tensors) or
// FLX_LEAF (none), show_compact (its one-line form, as Flux prints it;
// `os << layer` adds the counts: show.hpp) and outputsize (its shape rule:
// the forward pass's checks and sizes without computing: outputsize.hpp).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include "flx/activations.hpp"
#include "flx/dnn.hpp"
#include "flx/functor.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// The options of a convolution layer, resolved for its kernel: one stride
// and dilation per spatial dim, padding per side (low and high of dim 1,
// then of dim 2, ...), as Flux keeps them after calc_padding; outpad per
// spatial dim (zeros but for ConvTranspose).
struct FLX_API ConvGeometry {
  std::vector<int64_t> stride, pad, dilation;
  int64_t groups = 1;
  std::vector<int64_t> outpad;
  ConvOptions options() const;  // back to options the ops take
};

// y = act.(conv(x, weight) .+ bias): a true convolution (the kernel
// flipped), as Flux's Conv. weight is (kernel..., in / groups, out), bias
// (out); by default a Glorot-uniform weight and a zero bias, else the
// options' `.init` (called with the weight's dims) and, with `.bias =
// false`, no bias (as Flux's init and bias keywords). `.outpad` is
// ConvTranspose's: an ArgumentError here.
struct FLX_API Conv {
  Tensor weight;
  Tensor bias;
  Activation act;
  ConvGeometry geometry;

  Conv(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation act = {}, const ConvOptions& o = {});
  Conv(std::vector<int64_t> kernel, int64_t in, int64_t out, const ConvOptions& o) : Conv(kernel, in, out, {}, o) {}
  Conv(Tensor weight, Tensor bias, Activation act = {}, const ConvOptions& o = {});  // bias may be undefined
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(Conv, weight, bias)
FLX_API void show_compact(std::ostream& os, const Conv& l);
FLX_API Shape outputsize(const Conv& l, const Shape& x);

// The same with a cross-correlation (the kernel as it is): PyTorch's Conv2d,
// whose weights load into it unchanged.
struct FLX_API CrossCor {
  Tensor weight;
  Tensor bias;
  Activation act;
  ConvGeometry geometry;

  CrossCor(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation act = {}, const ConvOptions& o = {});
  CrossCor(std::vector<int64_t> kernel, int64_t in, int64_t out, const ConvOptions& o)
      : CrossCor(kernel, in, out, {}, o) {}
  CrossCor(Tensor weight, Tensor bias, Activation act = {}, const ConvOptions& o = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(CrossCor, weight, bias)
FLX_API void show_compact(std::ostream& os, const CrossCor& l);
FLX_API Shape outputsize(const CrossCor& l, const Shape& x);

// The transpose of Conv (its input's gradient), as Flux's ConvTranspose:
// weight (kernel..., out / groups, in). `.outpad` adds to the output's size
// in each spatial dim (Flux's rule: (in - 1)·stride + (k - 1)·dilation + 1
// - pad + outpad), each below the stride or the dilation, as PyTorch's
// output_padding (Flux asks for below the stride). Rows an outpad of at
// least the stride adds are reached by no input: they hold the bias.
struct FLX_API ConvTranspose {
  Tensor weight;
  Tensor bias;
  Activation act;
  ConvGeometry geometry;

  ConvTranspose(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation act = {},
                const ConvOptions& o = {});
  ConvTranspose(std::vector<int64_t> kernel, int64_t in, int64_t out, const ConvOptions& o)
      : ConvTranspose(kernel, in, out, {}, o) {}
  ConvTranspose(Tensor weight, Tensor bias, Activation act = {}, const ConvOptions& o = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(ConvTranspose, weight, bias)
FLX_API void show_compact(std::ostream& os, const ConvTranspose& l);
FLX_API Shape outputsize(const ConvTranspose& l, const Shape& x);

// Flux's DepthwiseConv: a Conv with one group per input channel (groups =
// in), so each output channel sees one input channel; out must be a
// multiple of in. It is a Conv, and prints as one:
//   DepthwiseConv({5, 5}, 3, 6, relu, {.bias = false})
//     -> Conv((5, 5), 3 => 6, relu, groups=3, bias=false)
// `.groups` may be left out or be `in`. From a weight (kernel..., m, in)
// (PyTorch's depthwise layout reversed; Flux's DepthwiseConv(weight)), the
// Conv of weight (kernel..., 1, m·in) with groups = in.
FLX_API Conv DepthwiseConv(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation act = {}, ConvOptions o = {});
inline Conv DepthwiseConv(std::vector<int64_t> kernel, int64_t in, int64_t out, const ConvOptions& o) {
  return DepthwiseConv(std::move(kernel), in, out, {}, o);
}
FLX_API Conv DepthwiseConv(const Tensor& weight, const Tensor& bias, Activation act = {}, ConvOptions o = {});

// Max or mean over windows (stride: the window by default).
struct FLX_API MaxPool {
  std::vector<int64_t> window;
  PoolOptions options;
  explicit MaxPool(std::vector<int64_t> window, PoolOptions o = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(MaxPool)
FLX_API void show_compact(std::ostream& os, const MaxPool& l);
FLX_API Shape outputsize(const MaxPool& l, const Shape& x);
struct FLX_API MeanPool {
  std::vector<int64_t> window;
  PoolOptions options;
  explicit MeanPool(std::vector<int64_t> window, PoolOptions o = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(MeanPool)
FLX_API void show_compact(std::ostream& os, const MeanPool& l);
FLX_API Shape outputsize(const MeanPool& l, const Shape& x);
// Over each channel's whole image: (spatial..., C, N) -> (1..., C, N).
struct FLX_API GlobalMaxPool {
  Tensor operator()(const Tensor& x) const;
};
FLX_API void show_compact(std::ostream& os, const GlobalMaxPool& l);
FLX_API Shape outputsize(const GlobalMaxPool& l, const Shape& x);
struct FLX_API GlobalMeanPool {
  Tensor operator()(const Tensor& x) const;
};
FLX_API void show_compact(std::ostream& os, const GlobalMeanPool& l);
FLX_API Shape outputsize(const GlobalMeanPool& l, const Shape& x);
// To a given output size, with Flux's windows: stride in ÷ out, window
// in - (out - 1) × stride.
struct FLX_API AdaptiveMaxPool {
  std::vector<int64_t> out;
  explicit AdaptiveMaxPool(std::vector<int64_t> out);
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(AdaptiveMaxPool)
FLX_API void show_compact(std::ostream& os, const AdaptiveMaxPool& l);
FLX_API Shape outputsize(const AdaptiveMaxPool& l, const Shape& x);
struct FLX_API AdaptiveMeanPool {
  std::vector<int64_t> out;
  explicit AdaptiveMeanPool(std::vector<int64_t> out);
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(AdaptiveMeanPool)
FLX_API void show_compact(std::ostream& os, const AdaptiveMeanPool& l);
FLX_API Shape outputsize(const AdaptiveMeanPool& l, const Shape& x);

FLX_API Shape outputsize(const Flatten& l, const Shape& x);  // (prod of all dims but the last, the last)

// (Σ x^p)^(1/p) over each window (NNlib's lpnormpool, PyTorch's LPPool),
// 0 < p < Inf; stride the window by default:
//   LPNormPool(2, {2, 2}), LPNormPool(1.5, {3, 3}, {.stride = 1, .pad = 1})
struct FLX_API LPNormPool {
  double p;
  std::vector<int64_t> window;
  PoolOptions options;
  LPNormPool(double p, std::vector<int64_t> window, PoolOptions o = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(LPNormPool)
FLX_API void show_compact(std::ostream& os, const LPNormPool& l);  // LPNormPool(2, (2, 2))
FLX_API Shape outputsize(const LPNormPool& l, const Shape& x);

}  // namespace flx

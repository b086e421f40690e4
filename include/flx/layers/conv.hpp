// Convolution and pooling layers (Flux's conv.jl): Conv, CrossCor,
// ConvTranspose, MaxPool, MeanPool, GlobalMaxPool, GlobalMeanPool,
// AdaptiveMaxPool, AdaptiveMeanPool and Flatten. Inputs are WHCN
// (flx/dnn.hpp); each layer prints as Flux prints it:
//   Conv((3, 3), 1 => 16, relu, pad=1)
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "flx/activations.hpp"
#include "flx/dnn.hpp"
#include "flx/functor.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// The options of a convolution layer, resolved for its kernel: one stride
// and dilation per spatial dim, padding per side (low and high of dim 1,
// then of dim 2, ...), as Flux keeps them after calc_padding.
struct ConvGeometry {
  std::vector<int64_t> stride, pad, dilation;
  int64_t groups = 1;
  ConvOptions options() const;  // back to options the ops take
};

// y = act.(conv(x, weight) .+ bias): a true convolution (the kernel
// flipped), as Flux's Conv. weight is (kernel..., in / groups, out), bias
// (out); Glorot-uniform weight and zero bias by default.
struct Conv {
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

// The same with a cross-correlation (the kernel as it is): PyTorch's Conv2d,
// whose weights load into it unchanged.
struct CrossCor {
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

// The transpose of Conv (its input's gradient), as Flux's ConvTranspose:
// weight (kernel..., out / groups, in).
struct ConvTranspose {
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

// Max or mean over windows (stride: the window by default).
struct MaxPool {
  std::vector<int64_t> window;
  PoolOptions options;
  explicit MaxPool(std::vector<int64_t> window, PoolOptions o = {});
  Tensor operator()(const Tensor& x) const;
};
struct MeanPool {
  std::vector<int64_t> window;
  PoolOptions options;
  explicit MeanPool(std::vector<int64_t> window, PoolOptions o = {});
  Tensor operator()(const Tensor& x) const;
};
// Over each channel's whole image: (spatial..., C, N) -> (1..., C, N).
struct GlobalMaxPool {
  Tensor operator()(const Tensor& x) const;
};
struct GlobalMeanPool {
  Tensor operator()(const Tensor& x) const;
};
// To a given output size, with Flux's windows: stride in ÷ out, window
// in - (out - 1) × stride.
struct AdaptiveMaxPool {
  std::vector<int64_t> out;
  explicit AdaptiveMaxPool(std::vector<int64_t> out);
  Tensor operator()(const Tensor& x) const;
};
struct AdaptiveMeanPool {
  std::vector<int64_t> out;
  explicit AdaptiveMeanPool(std::vector<int64_t> out);
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(MaxPool)
FLX_LEAF(MeanPool)
FLX_LEAF(AdaptiveMaxPool)
FLX_LEAF(AdaptiveMeanPool)

// flatten as a layer of a Chain (Flux writes `Flux.flatten` there).
struct Flatten {
  Tensor operator()(const Tensor& x) const { return flatten(x); }
  static const char* name() { return "flatten"; }
};

// The one-line forms, as Flux prints them: Conv((3, 3), 1 => 16, relu, pad=1)
// (`os << layer` adds the parameter count: show.hpp).
void show_compact(std::ostream& os, const Conv& l);
void show_compact(std::ostream& os, const CrossCor& l);
void show_compact(std::ostream& os, const ConvTranspose& l);
void show_compact(std::ostream& os, const MaxPool& l);
void show_compact(std::ostream& os, const MeanPool& l);
void show_compact(std::ostream& os, const GlobalMaxPool& l);
void show_compact(std::ostream& os, const GlobalMeanPool& l);
void show_compact(std::ostream& os, const AdaptiveMaxPool& l);
void show_compact(std::ostream& os, const AdaptiveMeanPool& l);

// Shape rules (outputsize.hpp): the ops' own checks and sizes, without the ops.
Shape outputsize(const Conv& l, const Shape& x);
Shape outputsize(const CrossCor& l, const Shape& x);
Shape outputsize(const ConvTranspose& l, const Shape& x);
Shape outputsize(const MaxPool& l, const Shape& x);
Shape outputsize(const MeanPool& l, const Shape& x);
Shape outputsize(const GlobalMaxPool& l, const Shape& x);
Shape outputsize(const GlobalMeanPool& l, const Shape& x);
Shape outputsize(const AdaptiveMaxPool& l, const Shape& x);
Shape outputsize(const AdaptiveMeanPool& l, const Shape& x);
Shape outputsize(const Flatten& l, const Shape& x);  // (prod of all dims but the last, the last)

}  // namespace flx

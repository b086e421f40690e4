// Convolution and pooling layers: construction (Flux's defaults), checks,
// forward passes through flx/dnn.hpp, and Flux's printing.
#include "flx/layers/conv.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "flx/error.hpp"
#include "flx/layers/basic.hpp"
#include "flx/ops.hpp"
#include "ops/dnn_internal.hpp"

namespace flx {

namespace {

// A new weight of `shape` (kernel..., a, b): the options' initialiser, or
// Glorot-uniform (fans prod(kernel)·a and prod(kernel)·b, as Flux's nfan).
Tensor init_weight(const std::vector<int64_t>& shape, const InitFn& init, const char* layer) {
  if (!init) return glorot_uniform(Shape(shape));
  Tensor w = init(Shape(shape));
  FLX_CHECK(w.defined() && w.shape() == Shape(shape), DimensionMismatch, layer, ": the .init function must return ",
            "an array of the dims it is given, ", Shape(shape), "; got ", w.defined() ? w.shape().str() : "undefined");
  return w;
}

void check_sizes(const std::vector<int64_t>& kernel, int64_t in, int64_t out, int64_t groups, const char* layer) {
  FLX_CHECK(!kernel.empty() && kernel.size() <= kMaxSpatialDims, ArgumentError, layer, ": the kernel has ",
            kernel.size(), " dims; flx convolves over 1 to ", kMaxSpatialDims);
  for (int64_t k : kernel) FLX_CHECK(k >= 1, ArgumentError, layer, ": kernel sizes must be positive; got ", k);
  FLX_CHECK(in >= 1 && out >= 1, ArgumentError, layer, ": channel counts must be positive; got ", in, " => ", out);
  FLX_CHECK(groups >= 1 && in % groups == 0 && out % groups == 0, ArgumentError, layer,
            ": both channel counts must be multiples of groups; got ", in, " => ", out, " with groups=", groups);
}

ConvGeometry resolve(const std::vector<int64_t>& kernel, const ConvOptions& o, const char* layer,
                     bool transposed = false) {
  const WindowGeometry g = conv_geometry(kernel, o, layer, transposed);
  ConvGeometry c;
  c.stride = g.stride;
  c.dilation = g.dilation;
  for (size_t i = 0; i < kernel.size(); ++i) {
    c.pad.push_back(g.pad_lo[i]);
    c.pad.push_back(g.pad_hi[i]);
  }
  c.groups = o.groups;
  c.outpad = o.outpad.expand(int(kernel.size()), "outpad", layer, 0);
  for (size_t i = 0; i < kernel.size(); ++i) {
    FLX_CHECK(transposed || c.outpad[i] == 0, ArgumentError, layer,
              ": outpad applies to ConvTranspose only (the rows a strided convolution drops); got outpad=",
              c.outpad[i], " for dim ", i);
    FLX_CHECK(c.outpad[i] < std::max(c.stride[i], c.dilation[i]), ArgumentError, layer,
              ": outpad must be below the stride or the dilation; got outpad=", c.outpad[i], " with stride ",
              c.stride[i], " and dilation ", c.dilation[i], " in dim ", i);
  }
  return c;
}

std::vector<int64_t> spatial_shape(const Tensor& w) {
  std::vector<int64_t> k;
  for (int i = 0; i + 2 < w.ndims(); ++i) k.push_back(w.shape()[i]);
  return k;
}

void check_weight(const Tensor& w, const Tensor& b, int64_t out, const char* layer) {
  FLX_CHECK(w.defined() && w.ndims() >= 3 && w.ndims() <= kMaxSpatialDims + 2, DimensionMismatch, layer,
            ": the weight must be (kernel..., in, out) with 1 to ", kMaxSpatialDims, " kernel dims; got ",
            w.defined() ? w.shape().str() : std::string("undefined"));
  FLX_CHECK(!b.defined() || b.shape() == Shape{out}, DimensionMismatch, layer, ": the bias must have shape (", out,
            ") to match the weight ", w.shape(), "; got ", b.shape());
}

// Flux's _maybetuple_string: one number when all agree, else the tuple.
void show_values(std::ostream& os, const std::vector<int64_t>& v) {
  bool same = true;
  for (int64_t e : v) same = same && e == v[0];
  if (same && !v.empty()) {
    os << v[0];
    return;
  }
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ")";
}
void show_tuple(std::ostream& os, const std::vector<int64_t>& v) {
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
}
bool all_equal_to(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// Conv((3, 3), 1 => 16, relu, pad=1, stride=2, dilation=2, groups=2, bias=false)
void show_conv(std::ostream& os, const char* name, const Tensor& w, int64_t in, int64_t out, const Activation& act,
               const ConvGeometry& g, bool has_bias) {
  os << name << "(";
  show_tuple(os, spatial_shape(w));
  os << ", " << in << " => " << out;
  if (!act.is_identity()) os << ", " << act;
  if (!all_equal_to(g.pad, 0)) {
    os << ", pad=";
    show_values(os, g.pad);
  }
  if (!all_equal_to(g.stride, 1)) {
    os << ", stride=";
    show_values(os, g.stride);
  }
  if (!all_equal_to(g.dilation, 1)) {
    os << ", dilation=";
    show_values(os, g.dilation);
  }
  if (g.groups != 1) os << ", groups=" << g.groups;
  if (!has_bias) os << ", bias=false";
  if (!all_equal_to(g.outpad, 0)) {  // Flux prints the tuple as it is
    os << ", outpad=";
    show_tuple(os, g.outpad);
  }
  os << ")";
}

}  // namespace

ConvOptions ConvGeometry::options() const {
  return ConvOptions{PerDim(stride), Padding(pad), PerDim(dilation), groups,
                     outpad.empty() ? PerDim(0) : PerDim(outpad)};
}

// ---- Conv, CrossCor, ConvTranspose ---------------------------------------------------

namespace {
// A new layer's Glorot-uniform weight: (kernel..., in / groups, out), or for
// a transposed convolution (kernel..., out / groups, in). Sizes and options
// are checked before a random number is drawn.
Tensor new_weight(std::vector<int64_t> kernel, int64_t in, int64_t out, const ConvOptions& o, const char* layer,
                  bool transposed) {
  check_sizes(kernel, in, out, o.groups, layer);
  (void)resolve(kernel, o, layer, transposed);  // every option checked before a draw
  kernel.push_back(transposed ? out / o.groups : in / o.groups);
  kernel.push_back(transposed ? in : out);
  return init_weight(kernel, o.init, layer);
}
// The size of w's dim `back` places before its last (0: the last); 0 when w has none.
int64_t dim_from_end(const Tensor& w, int back) {
  return w.defined() && w.ndims() > back ? w.shape()[w.ndims() - 1 - back] : 0;
}
}  // namespace

Conv::Conv(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation a, const ConvOptions& o)
    : Conv(new_weight(std::move(kernel), in, out, o, "Conv", false), Tensor(), std::move(a), o) {
  if (o.bias) bias = zeros(out);  // after new_weight has checked `out`
}
Conv::Conv(Tensor w, Tensor b, Activation a, const ConvOptions& o)
    : weight(std::move(w)), bias(o.bias ? std::move(b) : Tensor()), act(std::move(a)) {
  check_weight(weight, bias, dim_from_end(weight, 0), "Conv");
  geometry = resolve(spatial_shape(weight), o, "Conv");
}
Tensor Conv::operator()(const Tensor& x) const {
  return act(conv(x, weight, bias, geometry.options(), detail::layer_string(*this).c_str()));
}

CrossCor::CrossCor(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation a, const ConvOptions& o)
    : CrossCor(new_weight(std::move(kernel), in, out, o, "CrossCor", false), Tensor(), std::move(a), o) {
  if (o.bias) bias = zeros(out);  // after new_weight has checked `out`
}
CrossCor::CrossCor(Tensor w, Tensor b, Activation a, const ConvOptions& o)
    : weight(std::move(w)), bias(o.bias ? std::move(b) : Tensor()), act(std::move(a)) {
  check_weight(weight, bias, dim_from_end(weight, 0), "CrossCor");
  geometry = resolve(spatial_shape(weight), o, "CrossCor");
}
Tensor CrossCor::operator()(const Tensor& x) const {
  return act(crosscor(x, weight, bias, geometry.options(), detail::layer_string(*this).c_str()));
}

ConvTranspose::ConvTranspose(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation a,
                             const ConvOptions& o)
    : ConvTranspose(new_weight(std::move(kernel), in, out, o, "ConvTranspose", true), Tensor(), std::move(a), o) {
  if (o.bias) bias = zeros(out);  // after new_weight has checked `out`
}
ConvTranspose::ConvTranspose(Tensor w, Tensor b, Activation a, const ConvOptions& o)
    : weight(std::move(w)), bias(o.bias ? std::move(b) : Tensor()), act(std::move(a)) {
  check_weight(weight, bias, dim_from_end(weight, 1) * o.groups, "ConvTranspose");
  geometry = resolve(spatial_shape(weight), o, "ConvTranspose", true);
}
Tensor ConvTranspose::operator()(const Tensor& x) const {
  return act(conv_transpose(x, weight, bias, geometry.options(), geometry.outpad, detail::layer_string(*this).c_str()));
}

// ---- DepthwiseConv (a Conv with groups = in) --------------------------------------

Conv DepthwiseConv(std::vector<int64_t> kernel, int64_t in, int64_t out, Activation act, ConvOptions o) {
  FLX_CHECK(in >= 1 && out >= 1, ArgumentError, "DepthwiseConv: channel counts must be positive; got ", in, " => ",
            out);
  FLX_CHECK(o.groups == 1 || o.groups == in, ArgumentError, "DepthwiseConv: groups is the input channel count (",
            in, "); got groups=", o.groups, " (use Conv for other groups)");
  FLX_CHECK(out % in == 0, ArgumentError, "DepthwiseConv: the output channels must be a multiple of the input ",
            "channels (each input channel gives out / in of them); got ", in, " => ", out);
  o.groups = in;
  return Conv(std::move(kernel), in, out, std::move(act), o);
}

Conv DepthwiseConv(const Tensor& w, const Tensor& b, Activation act, ConvOptions o) {
  FLX_CHECK(w.defined() && w.ndims() >= 3 && w.ndims() <= kMaxSpatialDims + 2, DimensionMismatch,
            "DepthwiseConv: the weight must be (kernel..., multiplier, in) with 1 to ", kMaxSpatialDims,
            " kernel dims; got ", w.defined() ? w.shape().str() : std::string("undefined"));
  const int64_t mult = dim_from_end(w, 1), in = dim_from_end(w, 0);
  Shape s;
  for (int i = 0; i + 2 < w.ndims(); ++i) s.push_back(w.shape()[i]);
  s.push_back(1);
  s.push_back(mult * in);
  o.groups = in;
  return Conv(reshape(w, s), b, std::move(act), o);
}

// ---- pools ------------------------------------------------------------------------

namespace {
// A pool's window (or an adaptive pool's output size): 1 to 3 positive sizes,
// checked when the layer is made.
void check_pool_sizes(const std::vector<int64_t>& sizes, const char* layer, const char* what) {
  FLX_CHECK(!sizes.empty() && sizes.size() <= kMaxSpatialDims, ArgumentError, layer, ": the ", what, " has ",
            sizes.size(), " dims; flx pools over 1 to ", kMaxSpatialDims);
  for (int64_t k : sizes)
    FLX_CHECK(k >= 1, ArgumentError, layer, ": ", what, " sizes must be positive; got ", k);
}
}  // namespace

MaxPool::MaxPool(std::vector<int64_t> w, PoolOptions o) : window(std::move(w)), options(std::move(o)) {
  check_pool_sizes(window, "MaxPool", "window");
}
MeanPool::MeanPool(std::vector<int64_t> w, PoolOptions o) : window(std::move(w)), options(std::move(o)) {
  check_pool_sizes(window, "MeanPool", "window");
}
Tensor MaxPool::operator()(const Tensor& x) const { return maxpool(x, window, options, detail::layer_string(*this).c_str()); }
Tensor MeanPool::operator()(const Tensor& x) const { return meanpool(x, window, options, detail::layer_string(*this).c_str()); }

namespace {
// The spatial dims of x (all but the last two), checked to exist.
std::vector<int64_t> image_size(const Shape& x, const char* layer) {
  FLX_CHECK(x.ndims() >= 3 && x.ndims() <= kMaxSpatialDims + 2, DimensionMismatch, layer,
            ": expected an input (spatial..., channels, batch) with 1 to ", kMaxSpatialDims, " spatial dims; got shape ",
            x.str());
  std::vector<int64_t> s;
  for (int i = 0; i + 2 < x.ndims(); ++i) s.push_back(x[i]);
  return s;
}
std::vector<int64_t> image_size(const Tensor& x, const char* layer) {
  FLX_CHECK(x.defined(), DimensionMismatch, layer, ": expected an input (spatial..., channels, batch) with 1 to ",
            kMaxSpatialDims, " spatial dims; got shape undefined");
  return image_size(x.shape(), layer);
}
// Flux's AdaptiveMaxPool windows: stride in ÷ out, window in - (out - 1) stride.
std::pair<std::vector<int64_t>, PoolOptions> adaptive(const Shape& x, const std::vector<int64_t>& out,
                                                      const char* layer) {
  const std::vector<int64_t> in = image_size(x, layer);
  FLX_CHECK(in.size() == out.size(), DimensionMismatch, layer, ": an output size of ", out.size(),
            " dims needs an input with as many spatial dims; got shape ", x);
  std::vector<int64_t> window(in.size()), stride(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    FLX_CHECK(out[i] >= 1 && out[i] <= in[i], DimensionMismatch, layer, ": cannot pool dim ", i,
              " of size ", in[i], " to ", out[i], " (the output must lie in 1:", in[i], ") for input shape ", x);
    stride[i] = in[i] / out[i];
    window[i] = in[i] - (out[i] - 1) * stride[i];
  }
  return {window, PoolOptions{PerDim(stride), 0}};
}
}  // namespace

Tensor GlobalMaxPool::operator()(const Tensor& x) const { return maxpool(x, image_size(x, "GlobalMaxPool()"), {}, "GlobalMaxPool()"); }
Tensor GlobalMeanPool::operator()(const Tensor& x) const {
  return meanpool(x, image_size(x, "GlobalMeanPool()"), {}, "GlobalMeanPool()");
}
AdaptiveMaxPool::AdaptiveMaxPool(std::vector<int64_t> o) : out(std::move(o)) {
  check_pool_sizes(out, "AdaptiveMaxPool", "output");
}
AdaptiveMeanPool::AdaptiveMeanPool(std::vector<int64_t> o) : out(std::move(o)) {
  check_pool_sizes(out, "AdaptiveMeanPool", "output");
}
Tensor AdaptiveMaxPool::operator()(const Tensor& x) const {
  const std::string name = detail::layer_string(*this);
  (void)image_size(x, name.c_str());  // defined, and an image
  auto [window, opts] = adaptive(x.shape(), out, name.c_str());
  return maxpool(x, window, opts, name.c_str());
}
Tensor AdaptiveMeanPool::operator()(const Tensor& x) const {
  const std::string name = detail::layer_string(*this);
  (void)image_size(x, name.c_str());  // defined, and an image
  auto [window, opts] = adaptive(x.shape(), out, name.c_str());
  return meanpool(x, window, opts, name.c_str());
}

// ---- shape rules (outputsize) ---------------------------------------------------------

Shape outputsize(const Conv& l, const Shape& x) {
  return ops::crosscor_shape(x, l.weight.shape(), l.geometry.options(), detail::layer_string(l).c_str());
}
Shape outputsize(const CrossCor& l, const Shape& x) {
  return ops::crosscor_shape(x, l.weight.shape(), l.geometry.options(), detail::layer_string(l).c_str());
}
Shape outputsize(const ConvTranspose& l, const Shape& x) {
  return ops::conv_transpose_shape(x, l.weight.shape(), l.geometry.options(), l.geometry.outpad, detail::layer_string(l).c_str());
}
Shape outputsize(const MaxPool& l, const Shape& x) { return ops::pool_shape(x, l.window, l.options, detail::layer_string(l).c_str()); }
Shape outputsize(const MeanPool& l, const Shape& x) { return ops::pool_shape(x, l.window, l.options, detail::layer_string(l).c_str()); }
Shape outputsize(const GlobalMaxPool&, const Shape& x) {
  return ops::pool_shape(x, image_size(x, "GlobalMaxPool()"), {}, "GlobalMaxPool()");
}
Shape outputsize(const GlobalMeanPool&, const Shape& x) {
  return ops::pool_shape(x, image_size(x, "GlobalMeanPool()"), {}, "GlobalMeanPool()");
}
Shape outputsize(const AdaptiveMaxPool& l, const Shape& x) {
  const std::string name = detail::layer_string(l);
  auto [window, opts] = adaptive(x, l.out, name.c_str());
  return ops::pool_shape(x, window, opts, name.c_str());
}
Shape outputsize(const AdaptiveMeanPool& l, const Shape& x) {
  const std::string name = detail::layer_string(l);
  auto [window, opts] = adaptive(x, l.out, name.c_str());
  return ops::pool_shape(x, window, opts, name.c_str());
}
Shape outputsize(const Flatten&, const Shape& x) { return ops::flatten_shape(x); }

// ---- printing -----------------------------------------------------------------------

void show_compact(std::ostream& os, const Conv& l) {
  show_conv(os, "Conv", l.weight, l.weight.shape()[l.weight.ndims() - 2] * l.geometry.groups,
            l.weight.shape()[l.weight.ndims() - 1], l.act, l.geometry, l.bias.defined());
}
void show_compact(std::ostream& os, const CrossCor& l) {
  show_conv(os, "CrossCor", l.weight, l.weight.shape()[l.weight.ndims() - 2] * l.geometry.groups,
            l.weight.shape()[l.weight.ndims() - 1], l.act, l.geometry, l.bias.defined());
}
void show_compact(std::ostream& os, const ConvTranspose& l) {
  show_conv(os, "ConvTranspose", l.weight, l.weight.shape()[l.weight.ndims() - 1],
            l.weight.shape()[l.weight.ndims() - 2] * l.geometry.groups, l.act, l.geometry, l.bias.defined());
}
// Name(window, pad=..., stride=...), the defaults left out; `head` is what
// comes before the window ("MaxPool(", "LPNormPool(2, ").
template <class P>
void show_pool(std::ostream& os, const std::string& head, const P& l) {
  os << head;
  show_tuple(os, l.window);
  if (!(l.options.pad == Padding(0))) {
    os << ", pad=";
    if (l.options.pad.same) os << "SamePad()";
    else show_values(os, l.options.pad.values);
  }
  if (l.options.stride && l.options.stride->values != l.window &&
      !(l.options.stride->values.size() == 1 && all_equal_to(l.window, l.options.stride->values[0]))) {
    os << ", stride=";
    show_values(os, l.options.stride->values);
  }
  os << ")";
}
void show_compact(std::ostream& os, const MaxPool& l) { show_pool(os, "MaxPool(", l); }
void show_compact(std::ostream& os, const MeanPool& l) { show_pool(os, "MeanPool(", l); }
void show_compact(std::ostream& os, const GlobalMaxPool&) { os << "GlobalMaxPool()"; }
void show_compact(std::ostream& os, const GlobalMeanPool&) { os << "GlobalMeanPool()"; }
void show_compact(std::ostream& os, const AdaptiveMaxPool& l) {
  os << "AdaptiveMaxPool(";
  show_tuple(os, l.out);
  os << ")";
}
void show_compact(std::ostream& os, const AdaptiveMeanPool& l) {
  os << "AdaptiveMeanPool(";
  show_tuple(os, l.out);
  os << ")";
}

// ---- LPNormPool -----------------------------------------------------------------------

LPNormPool::LPNormPool(double pw, std::vector<int64_t> w, PoolOptions o)
    : p(pw), window(std::move(w)), options(std::move(o)) {
  FLX_CHECK(p > 0 && std::isfinite(p), ArgumentError, "LPNormPool: p must lie in (0, Inf); got ", p);
  check_pool_sizes(window, "LPNormPool", "window");
}
Tensor LPNormPool::operator()(const Tensor& x) const {
  return lpnormpool(x, p, window, options, detail::layer_string(*this).c_str());
}
Shape outputsize(const LPNormPool& l, const Shape& x) {
  return ops::pool_shape(x, l.window, l.options, detail::layer_string(l).c_str());
}
void show_compact(std::ostream& os, const LPNormPool& l) {
  std::ostringstream head;
  head << "LPNormPool(" << l.p << ", ";
  show_pool(os, head.str(), l);
}

}  // namespace flx

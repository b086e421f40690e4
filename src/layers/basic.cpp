// Dense, Scale and Bilinear: construction, checks (one shape rule a layer,
// shared by the forward pass and outputsize), forward passes and their
// one-line forms; Chain's index check.
#include "flx/layers/basic.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "layers/layer_input.hpp"
#include "ops/ops_internal.hpp"

namespace flx {

namespace detail {
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) { return ops::broadcast_shape(a, b, op); }

void check_chain_index(size_t i, size_t n) {
  FLX_CHECK(i < n, ArgumentError, "Chain: index ", i, " is past the end of a Chain of ", n,
            " layers (indices are 0-based: 0 to ", n == 0 ? std::string("none") : std::to_string(n - 1), ")");
}
}  // namespace detail

namespace {
std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().str() : std::string("undefined"); }
}  // namespace

// ---- Dense -------------------------------------------------------------------

namespace {
// Checked before the weight is made (a Shape would reject a negative size in its own words).
int64_t dense_in(int64_t in, int64_t out) {
  FLX_CHECK(in > 0 && out > 0, ArgumentError, "Dense: sizes must be positive; got ", in, " => ", out);
  return in;
}
}  // namespace

Dense::Dense(int64_t in, int64_t out, Activation a, const DenseOptions& o) : act(std::move(a)) {
  const Shape dims{out, dense_in(in, out)};
  weight = o.init ? o.init(dims) : glorot_uniform(dims);
  FLX_CHECK(weight.defined() && weight.shape() == dims, DimensionMismatch, "Dense: the .init function must return ",
            "an array of the dims it is given, ", dims, "; got ", shape_of(weight));
  if (o.bias) bias = zeros(out);
}

Dense::Dense(Tensor w, Tensor b, Activation a) : weight(std::move(w)), bias(std::move(b)), act(std::move(a)) {
  FLX_CHECK(weight.defined() && weight.ndims() == 2, DimensionMismatch, "Dense: weight must be a matrix (out, in); got ",
            shape_of(weight));
  FLX_CHECK(!bias.defined() || bias.shape() == Shape{weight.shape()[0]}, DimensionMismatch, "Dense: bias must have shape (",
            weight.shape()[0], ") to match weight ", weight.shape(), "; got ", bias.shape());
}

Shape outputsize(const Dense& d, const Shape& x) {
  const int64_t in = d.weight.shape()[1], out = d.weight.shape()[0];
  FLX_CHECK(x.ndims() >= 1 && x[0] == in, DimensionMismatch, "Dense(", in, " => ", out, ") expects input with ", in,
            " features in dim 0; got shape ", x.str());
  Shape y = x;
  y[0] = out;
  return y;
}

Tensor Dense::operator()(const Tensor& x) const {
  detail::check_layer_input(*this, x, {.arrays = {{"the weight", &weight}, {"the bias", &bias}}});
  (void)outputsize(*this, x.shape());
  return ops::dense(weight, x, bias, act);  // fused where the backend can (src/ops/dense.cpp)
}

void show_compact(std::ostream& os, const Dense& d) {
  os << "Dense(" << d.weight.shape()[1] << " => " << d.weight.shape()[0];
  if (!d.act.is_identity()) os << ", " << d.act;
  if (!d.bias.defined()) os << "; bias=false";
  os << ")";
}

// ---- Scale -------------------------------------------------------------------

namespace {
Shape scale_size(const std::vector<int64_t>& dims) {
  bool positive = !dims.empty() && int(dims.size()) <= Shape::max_dims;
  for (int64_t e : dims) positive = positive && e >= 1;
  if (!positive) {
    std::ostringstream got;
    for (size_t k = 0; k < dims.size(); ++k) got << (k ? ", " : "") << dims[k];
    FLX_THROW(ArgumentError, "Scale: the size must be 1 to ", Shape::max_dims, " positive dims; got (", got.str(),
              ")");
  }
  return Shape(dims);
}
}  // namespace

Scale::Scale(detail::ScaleDims size, Activation a) : Scale(scale_size(size.dims), std::move(a)) {}

Scale::Scale(const Shape& size, Activation a) : act(std::move(a)) {
  bool positive = size.ndims() >= 1;
  for (int64_t e : size) positive = positive && e >= 1;
  FLX_CHECK(positive, ArgumentError, "Scale: the size must be one or more positive dims; got ", size);
  scale = ones(size);
  bias = zeros(size);
}

Scale::Scale(Tensor s, Tensor b, Activation a) : scale(std::move(s)), bias(std::move(b)), act(std::move(a)) {
  FLX_CHECK(scale.defined() && scale.ndims() >= 1, DimensionMismatch,
            "Scale: the scale must be an array of one or more dims; got ", shape_of(scale));
  FLX_CHECK(!bias.defined() || bias.shape() == scale.shape(), DimensionMismatch, "Scale: the bias must have the scale's shape (",
            scale.shape().str(), "); got ", bias.shape());
}

Shape outputsize(const Scale& l, const Shape& x) {
  const std::string name = detail::layer_string(l);
  // Julia's broadcasting: the layer's dims line up with x's leading ones.
  return ops::broadcast_shape(l.scale.shape(), x, name.c_str());
}

Tensor Scale::operator()(const Tensor& x) const {
  detail::check_layer_input(*this, x, {.arrays = {{"the scale", &scale}, {"the bias", &bias}}});
  (void)outputsize(*this, x.shape());
  Tensor y = scale * x;
  if (bias.defined()) y = y + bias;
  return act(y);
}

void show_compact(std::ostream& os, const Scale& l) {
  os << "Scale(";
  for (int k = 0; k < l.scale.ndims(); ++k) os << (k ? ", " : "") << l.scale.shape()[k];
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.bias.defined()) os << "; bias=false";
  os << ")";
}

// ---- Bilinear -----------------------------------------------------------------

namespace {
Tensor bilinear_weight(int64_t in1, int64_t in2, int64_t out) {
  FLX_CHECK(in1 > 0 && in2 > 0 && out > 0, ArgumentError, "Bilinear: sizes must be positive; got (", in1, ", ", in2,
            ") => ", out);
  // Glorot-uniform with Flux's nfan of an (out, in1, in2) array: fans
  // out·in1 and out·in2.
  const double a = std::sqrt(6.0 / (double(out) * double(in1 + in2)));
  return rand(out, in1, in2) * (2 * a) - a;
}
}  // namespace

Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, Activation a)
    : weight(bilinear_weight(in1, in2, out)), bias(zeros(out)), act(std::move(a)) {}

Bilinear::Bilinear(Tensor w, Tensor b, Activation a) : weight(std::move(w)), bias(std::move(b)), act(std::move(a)) {
  FLX_CHECK(weight.defined() && weight.ndims() == 3, DimensionMismatch,
            "Bilinear: the weight must be a 3-dim array (out, in1, in2); got ", shape_of(weight));
  FLX_CHECK(!bias.defined() || bias.shape() == Shape{weight.shape()[0]}, DimensionMismatch,
            "Bilinear: the bias must have shape (", weight.shape()[0], ") to match the weight ", weight.shape(),
            "; got ", bias.shape());
}

Shape outputsize(const Bilinear& l, const Shape& x, const Shape& y) {
  const std::string name = detail::layer_string(l);
  const int64_t out = l.weight.shape()[0], in1 = l.weight.shape()[1], in2 = l.weight.shape()[2];
  FLX_CHECK(x.ndims() >= 1 && y.ndims() >= 1 && x[0] == in1 && y[0] == in2, DimensionMismatch, name,
            ": expected x with ", in1, " features in dim 0 and y with ", in2, "; got x of shape ", x.str(),
            " and y of shape ", y.str());
  bool same_batch = x.ndims() == y.ndims();
  for (int k = 1; same_batch && k < x.ndims(); ++k) same_batch = x[k] == y[k];
  FLX_CHECK(same_batch, DimensionMismatch, name, ": x and y must have the same batch dims (all but the first); got x of shape ",
            x.str(), " and y of shape ", y.str());
  Shape z = x;
  z[0] = out;
  return z;
}

Tensor Bilinear::operator()(const Tensor& x, const Tensor& y) const {
  FLX_CHECK(x.defined() && y.defined(), ArgumentError, detail::layer_string(*this), ": the input ",
            x.defined() ? "y" : "x", " is an undefined tensor");
  const Shape zs = outputsize(*this, x.shape(), y.shape());
  const int64_t out = weight.shape()[0], in1 = weight.shape()[1], in2 = weight.shape()[2];
  const int64_t n = x.numel() / in1;  // observations (1 for vectors)
  // Flux's two products: Wy[o, i, s] = Σ_j W[o, i, j] y[j, s], then
  // z[o, s] = Σ_i Wy[o, i, s] x[i, s] as a batched matrix-vector product.
  const Tensor wy = reshape(matmul(reshape(weight, Shape{out * in1, in2}), reshape(y, Shape{in2, n})), Shape{out, in1, n});
  Tensor z = reshape(matmul(wy, reshape(x, Shape{in1, 1, n})), Shape{out, n});
  if (bias.defined()) z = z + bias;
  return reshape(act(z), zs);
}

void show_compact(std::ostream& os, const Bilinear& l) {
  const int64_t out = l.weight.shape()[0], in1 = l.weight.shape()[1], in2 = l.weight.shape()[2];
  os << "Bilinear(";
  if (in1 == in2) os << in1;
  else os << "(" << in1 << ", " << in2 << ")";
  os << " => " << out;
  if (!l.act.is_identity()) os << ", " << l.act;
  if (!l.bias.defined()) os << "; bias=false";
  os << ")";
}

}  // namespace flx

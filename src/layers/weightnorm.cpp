// WeightNorm's checks, arithmetic and printing (the layer itself is a
// template: include/flx/layers/weightnorm.hpp).
#include "flx/layers/weightnorm.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

#include "flx/ops.hpp"

namespace flx::detail {

namespace {

// Julia's eps(T): the spacing of the element type at 1.
double epsilon(DType t) {
  switch (t) {
    case Float64: return std::numeric_limits<double>::epsilon();
    case Float16: return 0.0009765625;  // 2^-10
    case BFloat16: return 0.0078125;    // 2^-7
    default: return std::numeric_limits<float>::epsilon();
  }
}

std::string dims_text(const std::vector<int>& dims, int ndims) {
  if (int(dims.size()) == ndims && ndims > 1) return ":";
  if (dims.size() == 1) return std::to_string(dims[0]);
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

}  // namespace

std::vector<int> weight_norm_dims(const std::string& layer, const std::string& which, const std::string& fields,
                                  const Tensor* v, const std::vector<int>& dims) {
  FLX_CHECK(v != nullptr, ArgumentError, "WeightNorm: ", layer, " has no array field `", which, "`; its arrays are ",
            fields.empty() ? std::string("none") : fields);
  FLX_CHECK(v->defined(), ArgumentError, "WeightNorm: the field `", which, "` of ", layer,
            " is undefined (a layer made without it, such as bias=false); nothing to normalise");
  FLX_CHECK(is_floating(v->dtype()), TypeError, "WeightNorm: the field `", which, "` of ", layer,
            " must be floating; got ", v->dtype());
  const int n = v->ndims();
  std::vector<int> out;
  if (dims.empty()) {
    for (int k = 0; k < n; ++k) out.push_back(k);
  } else {
    for (int d : dims) {
      const int k = d < 0 ? d + n : d;
      FLX_CHECK(k >= 0 && k < n, ArgumentError, "WeightNorm: dims ", d, " is outside the ", n, " dims of `", which,
                "` of ", layer, ", of shape ", v->shape().str(), " (0-based; negative counts from the end)");
      if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
    std::sort(out.begin(), out.end());
  }
  FLX_CHECK(n > 0 && sum(abs(*v)).item<double>() != 0, ArgumentError, "WeightNorm: the field `", which, "` of ",
            layer, " is all zero, which would give NaN (its direction v / ||v|| is undefined)");
  return out;
}

Tensor weight_norm_magnitude(const Tensor& v, const std::vector<int>& dims) {
  return sqrt(sum(square(v), dims) + epsilon(v.dtype())).detach();
}

Tensor weight_norm_weight(const std::string& layer, const Tensor& g, const Tensor& v, const std::vector<int>& dims) {
  Shape expected = v.shape();
  for (int d : dims) expected[d] = 1;
  FLX_CHECK(g.defined() && g.shape() == expected, DimensionMismatch, layer, ": g must have shape ", expected.str(),
            " (the weight's ", v.shape().str(), " with the normalised dims 1); got ",
            g.defined() ? g.shape().str() : std::string("undefined"));
  return g * v / sqrt(sum(square(v), dims) + epsilon(v.dtype()));
}

void show_weight_norm(std::ostream& os, const std::string& layer, const std::string& which,
                      const std::vector<int>& dims, int ndims) {
  os << "WeightNorm(" << layer << ", :" << which << "; dims=" << dims_text(dims, ndims) << ")";
}

}  // namespace flx::detail

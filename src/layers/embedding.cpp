// Embedding: a gather of the weight's columns (ops::gather_checked, whose
// backward rule is scatter_add: repeated indices add up their gradients), or
// a matrix product for one-hot input, as Flux.
#include "flx/layers/embedding.hpp"

#include <sstream>

#include "flx/layers/basic.hpp"
#include "ops/ops_internal.hpp"

namespace flx {

Embedding::Embedding(int64_t n, int64_t d, const EmbeddingOptions& o) {
  FLX_CHECK(n > 0 && d > 0, ArgumentError,
            "Embedding: the vocabulary size n and the embedding size d must be positive; got ", n, " => ", d);
  weight = o.init ? o.init(Shape{d, n}) : randn(Float32, {d, n});
  FLX_CHECK(weight.defined() && weight.shape() == Shape({d, n}), DimensionMismatch,
            "Embedding: the .init function must return an array of the dims it is given, ", Shape({d, n}), "; got ",
            weight.defined() ? weight.shape().str() : std::string("undefined"));
}

Embedding::Embedding(Tensor w) : weight(std::move(w)) {
  FLX_CHECK(weight.defined() && weight.ndims() == 2, DimensionMismatch,
            "Embedding: the weight must be a matrix (d, n): one column of d features per index; got ",
            weight.defined() ? weight.shape().str() : std::string("undefined"));
  FLX_CHECK(is_floating(weight.dtype()), TypeError, "Embedding: the weight must be floating; got ", weight.dtype());
}

Tensor Embedding::operator()(const Tensor& x) const {
  std::ostringstream name;
  show_compact(name, *this);
  const std::string layer = name.str();
  const int64_t d = weight.shape()[0], n = weight.shape()[1];
  FLX_CHECK(x.defined(), ArgumentError, layer, ": the input is an undefined tensor");
  FLX_CHECK(x.device() == weight.device(), DeviceMismatch, layer, ": the indices are on ", x.device(),
            " but the weight is on ", weight.device(), "; move them with `x | device` (or the model to theirs)");
  if (x.dtype() == DType::Bool) {
    // One-hot columns (onehotbatch): weight * x over the leading dim.
    FLX_CHECK(x.ndims() >= 1 && x.shape()[0] == n, DimensionMismatch, layer,
              ": a Bool (one-hot) input needs ", n, " rows, one per index; got shape ", x.shape());
    Shape out{d};
    for (int k = 1; k < x.ndims(); ++k) out.push_back(x.shape()[k]);
    const Tensor columns = reshape(x.to(weight.dtype()), {n, x.numel() / n});
    return reshape(matmul(weight, columns), out);
  }
  FLX_CHECK(is_integral(x.dtype()), TypeError, layer, ": expected integer indices (0-based, in 0:", n - 1,
            ") or a one-hot Bool array; got ", x.dtype(), " of shape ", x.shape(),
            ". Convert indices held as floats with .to(Int64)");
  const Tensor idx = x.to(DType::Int64);
  if (auto bad = ops::index_outside(idx, n))
    FLX_CHECK(false, ArgumentError, layer, ": index ", *bad, " is out of range; indices must lie in 0:", n - 1,
              " (0-based: the vocabulary has ", n, " entries)");
  return ops::gather_checked(weight, idx);
}

Tensor Embedding::operator()(int64_t index) const {
  return (*this)(tensor(std::vector<int64_t>{index}, Shape{}).to(weight.device()));
}

void show_compact(std::ostream& os, const Embedding& l) {
  os << "Embedding(" << l.weight.shape()[1] << " => " << l.weight.shape()[0] << ")";
}

Shape outputsize(const Embedding& l, const Shape& x) {
  FLX_CHECK(x.ndims() < Shape::max_dims, DimensionMismatch, detail::layer_string(l), ": indices of shape ", x,
            " give an output of ", x.ndims() + 1, " dims; flx holds at most ", Shape::max_dims);
  Shape y{l.weight.shape()[0]};
  for (int64_t e : x) y.push_back(e);
  return y;
}

}  // namespace flx

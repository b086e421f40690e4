// Embedding: a gather of the weight's columns (ops::gather_checked, whose
// backward rule is scatter_add: repeated indices add up their gradients), or
// a matrix product for one-hot input, as Flux. EmbeddingBag: the same gather
// of (L, bags...) indices, then a mean, sum or maximum over each bag (dim 1);
// ragged bags (data and offsets) gathered into a padded (Lmax, bags) matrix
// whose padding reads an extra column that changes nothing (zeros; -Inf for
// the maximum).
#include "flx/layers/embedding.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flx/arrays.hpp"
#include "flx/layers/basic.hpp"
#include "layers/layer_input.hpp"
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
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(*this, x);
  const int64_t d = weight.shape()[0], n = weight.shape()[1];
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

// ---- EmbeddingBag ----------------------------------------------------------------

namespace {

void check_bag_indices(const std::string& layer, const Tensor& idx, int64_t n) {
  if (auto bad = ops::index_outside(idx, n))
    FLX_CHECK(false, ArgumentError, layer, ": index ", *bad, " is out of range; indices must lie in 0:", n - 1,
              " (0-based: the vocabulary has ", n, " entries)");
}

void check_integers(const std::string& layer, const Tensor& x, const char* what, int64_t n) {
  FLX_CHECK(is_integral(x.dtype()), TypeError, layer, ": expected ", what, " as integers (0-based, in 0:", n - 1,
            ")", std::string(what) == "indices" ? " or a one-hot Bool array" : "", "; got ", x.dtype(),
            " of shape ", x.shape(), ". Convert indices held as floats with .to(Int64)");
}

// e (d, L, rest...) reduced over each bag (dim 1): (d, rest...).
Tensor reduce_bags(const Tensor& e, BagReduction r) {
  Shape out{e.shape()[0]};
  for (int k = 2; k < e.ndims(); ++k) out.push_back(e.shape()[k]);
  const Tensor y = r == BagReduction::Mean ? mean(e, {1}) : r == BagReduction::Sum ? sum(e, {1}) : maximum(e, {1});
  return reshape(y, out);
}

}  // namespace

EmbeddingBag::EmbeddingBag(int64_t n, int64_t d, BagReduction r) : reduction(r) {
  FLX_CHECK(n > 0 && d > 0, ArgumentError,
            "EmbeddingBag: the vocabulary size n and the embedding size d must be positive; got ", n, " => ", d);
  weight = randn(Float32, {d, n});
}

EmbeddingBag::EmbeddingBag(Tensor w, BagReduction r) : weight(std::move(w)), reduction(r) {
  FLX_CHECK(weight.defined() && weight.ndims() == 2, DimensionMismatch,
            "EmbeddingBag: the weight must be a matrix (d, n): one column of d features per index; got ",
            weight.defined() ? weight.shape().str() : std::string("undefined"));
  FLX_CHECK(is_floating(weight.dtype()), TypeError, "EmbeddingBag: the weight must be floating; got ",
            weight.dtype());
}

Tensor EmbeddingBag::operator()(const Tensor& x) const {
  const std::string layer = detail::layer_string(*this);
  detail::check_layer_input(*this, x);
  const int64_t n = weight.shape()[1];
  FLX_CHECK(x.device() == weight.device(), DeviceMismatch, layer, ": the indices are on ", x.device(),
            " but the weight is on ", weight.device(), "; move them with `x | device` (or the model to theirs)");
  if (x.dtype() == DType::Bool) {
    // One-hot bags (onehotbatch of each bag): (n, L, rest...).
    FLX_CHECK(x.ndims() >= 2 && x.shape()[0] == n && x.shape()[1] > 0, DimensionMismatch, layer,
              ": a Bool (one-hot) input needs the shape (", n, ", L, bags...): ", n,
              " rows, one per index, and bags of L >= 1 one-hot columns; got shape ", x.shape());
    Shape out{weight.shape()[0]};
    for (int k = 1; k < x.ndims(); ++k) out.push_back(x.shape()[k]);
    const Tensor columns = reshape(x.to(weight.dtype()), {n, x.numel() / n});
    return reduce_bags(reshape(matmul(weight, columns), out), reduction);
  }
  check_integers(layer, x, "indices", n);
  (void)outputsize(*this, x.shape());  // the rank and the bags' length, as the shape rule says them
  const Tensor idx = x.to(DType::Int64);
  check_bag_indices(layer, idx, n);
  const Tensor bags = x.ndims() == 1 ? reshape(idx, {x.shape()[0], 1}) : idx;
  const Tensor y = reduce_bags(ops::gather_checked(weight, bags), reduction);
  return x.ndims() == 1 ? reshape(y, {weight.shape()[0]}) : y;
}

Tensor EmbeddingBag::operator()(const Tensor& data, const Tensor& offsets) const {
  const std::string layer = detail::layer_string(*this);
  const int64_t d = weight.shape()[0], n = weight.shape()[1];
  FLX_CHECK(data.defined() && offsets.defined(), ArgumentError, layer,
            ": the data or the offsets is an undefined tensor");
  FLX_CHECK(data.device() == weight.device(), DeviceMismatch, layer, ": the data (indices) are on ", data.device(),
            " but the weight is on ", weight.device(), "; move them with `x | device` (or the model to theirs)");
  check_integers(layer, data, "indices", n);
  FLX_CHECK(is_integral(offsets.dtype()), TypeError, layer,
            ": expected the offsets (where each bag starts in the data, 0-based) as integers; got ", offsets.dtype());
  (void)outputsize(*this, data.shape(), offsets.shape());
  const int64_t len = data.shape()[0], k = offsets.shape()[0];
  const std::vector<int64_t> at = offsets.to(Device::cpu()).to(DType::Int64).to_vector<int64_t>();
  FLX_CHECK(at[0] == 0, ArgumentError, layer, ": the first offset must be 0 (the first bag starts at data[0]); got ",
            at[0]);
  for (int64_t j = 1; j < k; ++j)
    FLX_CHECK(at[size_t(j)] > at[size_t(j - 1)], ArgumentError, layer,
              ": the offsets must increase strictly (no bag may be empty); got offsets[", j - 1, "] = ",
              at[size_t(j - 1)], " and offsets[", j, "] = ", at[size_t(j)]);
  FLX_CHECK(at.back() < len, ArgumentError, layer, ": the last offset must lie inside the data of length ", len,
            " (no bag may be empty); got ", at.back());
  const Tensor idx = data.to(DType::Int64);
  check_bag_indices(layer, idx, n);
  // Bags of one length: the (L, bags) matrix the first form takes.
  const int64_t l0 = len / k;
  bool even = len % k == 0;
  for (int64_t j = 0; even && j < k; ++j) even = at[size_t(j)] == j * l0;
  if (even) return reduce_bags(ops::gather_checked(weight, reshape(idx, {l0, k})), reduction);
  // Ragged: each bag padded to the longest with index n, a column of zeros
  // (-Inf for the maximum) appended to the weight.
  std::vector<int64_t> lengths(static_cast<size_t>(k));
  int64_t longest = 0;
  for (int64_t j = 0; j < k; ++j) {
    lengths[size_t(j)] = (j + 1 < k ? at[size_t(j + 1)] : len) - at[size_t(j)];
    longest = std::max(longest, lengths[size_t(j)]);
  }
  const std::vector<int64_t> values = idx.to(Device::cpu()).to_vector<int64_t>();
  std::vector<int64_t> padded(size_t(longest * k), n);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t i = 0; i < lengths[size_t(j)]; ++i)
      padded[size_t(j * longest + i)] = values[size_t(at[size_t(j)] + i)];
  const double fill = reduction == BagReduction::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  const Tensor table = hcat(weight, full(weight.dtype(), fill, Shape{d, 1}).to(weight.device()));
  const Tensor e = ops::gather_checked(table, tensor(padded, Shape{longest, k}).to(weight.device()));
  if (reduction != BagReduction::Mean) return reduce_bags(e, reduction);
  std::vector<double> counts(lengths.begin(), lengths.end());
  return reduce_bags(e, BagReduction::Sum) / tensor(counts, Shape{1, k}).to(weight.dtype()).to(weight.device());
}

void show_compact(std::ostream& os, const EmbeddingBag& l) {
  os << "EmbeddingBag(" << l.weight.shape()[1] << " => " << l.weight.shape()[0];
  if (l.reduction == BagReduction::Sum) os << ", sum";
  if (l.reduction == BagReduction::Max) os << ", maximum";
  os << ")";
}

Shape outputsize(const EmbeddingBag& l, const Shape& x) {
  const std::string layer = detail::layer_string(l);
  FLX_CHECK(x.ndims() >= 1, DimensionMismatch, layer,
            ": expected an array of indices, (L) for one bag or (L, bags...) with each column a bag, not just one "
            "index; got shape ", x.str());
  FLX_CHECK(x[0] > 0, DimensionMismatch, layer, ": each bag needs at least one index; got shape ", x.str());
  Shape y{l.weight.shape()[0]};
  for (int k = 1; k < x.ndims(); ++k) y.push_back(x[k]);
  return y;
}

Shape outputsize(const EmbeddingBag& l, const Shape& data, const Shape& offsets) {
  const std::string layer = detail::layer_string(l);
  FLX_CHECK(data.ndims() == 1 && offsets.ndims() == 1 && offsets[0] > 0 && data[0] >= offsets[0],
            DimensionMismatch, layer,
            ": expected the data and the offsets as vectors, (N) indices and (bags) starts with 1 <= bags <= N; "
            "got shapes ", data.str(), " and ", offsets.str());
  return Shape{l.weight.shape()[0], offsets[0]};
}

}  // namespace flx

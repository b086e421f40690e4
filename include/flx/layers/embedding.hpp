// Embedding and EmbeddingBag (Flux's, in basic.jl there): a lookup table of
// n vectors of d features, trained like any weight. Embedding's input is
// 0-based integer indices of any shape, or their one-hot encoding;
// EmbeddingBag's is bags of indices, whose vectors it reduces to one a bag.
//
// Each layer's declarations follow its struct: FLX_FUNCTOR (its tensors) or
// FLX_LEAF (none), show_compact (its one-line form, as Flux prints it;
// `os << layer` adds the counts: show.hpp) and outputsize (its shape rule:
// the forward pass's checks and sizes without computing: outputsize.hpp).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <ostream>

#include "flx/functor.hpp"
#include "flx/initialisers.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// weight is (d, n): column k is the embedding of index k (0-based). For
// indices x of any integer dtype and shape, the output is (d, size(x)...),
// column-major: y[:, j...] = weight[:, x[j...]] (NNlib's gather). A scalar
// index gives a d-vector. A Bool input is taken as one-hot columns (n, rest...)
// (onehotbatch's output): the output is (d, rest...), weight * x. The
// gradient of weight adds up the columns of indices that repeat.
// An index outside 0:n-1 is an ArgumentError naming the layer, the index and
// the range. On a GPU that check reads one count back from the device (a
// round trip per call, as gather's and onehotbatch's checks); indices kept on
// the host cost nothing to check, but must be moved to the weight's device.
// Embedding's options: the weight's initialiser, called with its dims
// (d, n) (empty: randn, Flux's randn32).
struct FLX_API EmbeddingOptions {
  InitFn init = {};
};

struct FLX_API Embedding {
  Tensor weight;

  Embedding(int64_t n, int64_t d, const EmbeddingOptions& o = {});  // weight ~ standard normal, as Flux's randn32
  explicit Embedding(Tensor weight);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(int64_t index) const;  // the d-vector weight[:, index]
};
FLX_FUNCTOR(Embedding, weight)
FLX_API void show_compact(std::ostream& os, const Embedding& l);  // Embedding(n => d)
FLX_API Shape outputsize(const Embedding& l, const Shape& x);

// The shape rule (outputsize.hpp) for indices of shape x: (d, x...). (The
// shape does not say whether x is one-hot; for a one-hot (n, rest...) input,
// ask for the indices' shape (rest...).)

// How EmbeddingBag reduces a bag's vectors: Flux's reduction function (mean,
// sum, maximum), PyTorch's mode ("mean", "sum", "max").
enum class BagReduction { Mean, Sum, Max };

// Flux's EmbeddingBag: weight (d, n) as Embedding's, and each bag of indices
// reduced to one d-vector (the mean by default). Called on
//  - integer indices x (L, rest...): each column a bag of L indices; the
//    output (d, rest...) (a vector x is one bag: a d-vector);
//  - a one-hot Bool array (n, L, rest...): the same bags, one-hot;
//  - data and offsets, two integer vectors (Flux's eb(data, at), PyTorch's
//    input and offsets, 0-based): bag k is data[offsets[k] : offsets[k+1]-1],
//    the last running to the end; offsets start at 0 and increase strictly,
//    so no bag is empty. The output is (d, number of bags).
// Differentiable w.r.t. the weight (repeated indices add up; the maximum's
// gradient goes to the index that gave it, the first of ties). An index
// outside 0:n-1, bad offsets or a wrong rank are errors naming the layer and
// the shapes. The offsets (and, with them, the data) are read on the host:
// from a GPU, one round trip a call.
struct FLX_API EmbeddingBag {
  Tensor weight;
  BagReduction reduction = BagReduction::Mean;

  EmbeddingBag(int64_t n, int64_t d, BagReduction reduction = BagReduction::Mean);  // weight ~ randn, as Flux's
  explicit EmbeddingBag(Tensor weight, BagReduction reduction = BagReduction::Mean);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& data, const Tensor& offsets) const;
};
FLX_FUNCTOR(EmbeddingBag, weight)
// EmbeddingBag(26 => 3), and a reduction other than the mean after the
// sizes: EmbeddingBag(26 => 3, sum), as Flux.
FLX_API void show_compact(std::ostream& os, const EmbeddingBag& l);
FLX_API Shape outputsize(const EmbeddingBag& l, const Shape& x);  // indices (L, rest...) -> (d, rest...)
FLX_API Shape outputsize(const EmbeddingBag& l, const Shape& data, const Shape& offsets);  // (N), (k) -> (d, k)

}  // namespace flx

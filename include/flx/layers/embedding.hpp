// Embedding (Flux's Embedding, in basic.jl there): a lookup table of n
// vectors of d features, trained like any weight. The input is 0-based
// integer indices of any shape, or their one-hot encoding.
#pragma once

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
struct EmbeddingOptions {
  InitFn init = {};
};

struct Embedding {
  Tensor weight;

  Embedding(int64_t n, int64_t d, const EmbeddingOptions& o = {});  // weight ~ standard normal, as Flux's randn32
  explicit Embedding(Tensor weight);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(int64_t index) const;  // the d-vector weight[:, index]
};
FLX_FUNCTOR(Embedding, weight)

void show_compact(std::ostream& os, const Embedding& l);  // Embedding(n => d)
// The shape rule (outputsize.hpp) for indices of shape x: (d, x...). (The
// shape does not say whether x is one-hot; for a one-hot (n, rest...) input,
// ask for the indices' shape (rest...).)
Shape outputsize(const Embedding& l, const Shape& x);

}  // namespace flx

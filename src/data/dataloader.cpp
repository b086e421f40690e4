// DataLoader internals: observation access on tensors, option checks and
// the per-epoch shuffle.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

#include "common/philox.hpp"
#include "../tensor_impl.hpp"
#include "flx/data.hpp"
#include "../ops/ops_internal.hpp"

namespace flx {

namespace {
int64_t last_dim(const Tensor& x, const char* what) {
  FLX_CHECK(x.defined(), ArgumentError, what, ": the data holds an undefined tensor");
  FLX_CHECK(x.ndims() >= 1, DimensionMismatch, what,
            ": observations lie along the last dim, so data needs at least one dim; got a 0-dim tensor");
  return x.shape()[x.ndims() - 1];
}
}  // namespace

int64_t numobs(const Tensor& x) { return last_dim(x, "numobs"); }

Tensor getobs(const Tensor& x, int64_t start, int64_t stop) { return x.slice_last(start, stop); }

Tensor getobs(const Tensor& x, std::span<const int64_t> idx) {
  const int64_t n = last_dim(x, "getobs");
  for (int64_t i : idx)
    FLX_CHECK(i >= 0 && i < n, ArgumentError, "getobs: observation index ", i, " is outside 0:", n - 1,
              " for data of shape ", x.shape());
  Shape s = x.shape();
  s[s.ndims() - 1] = int64_t(idx.size());
  // Host data: copy each observation's contiguous block directly (no kernel
  // launch, so the DataLoader's background thread never touches a device).
  if (const char* src = static_cast<const char*>(detail::host_data(x))) {
    Tensor out = empty(x.dtype(), s);
    const size_t block = n ? size_t(x.numel() / n) * dtype_size(x.dtype()) : 0;
    char* dst = static_cast<char*>(detail::host_data(out));
    for (size_t j = 0; j < idx.size(); ++j) std::memcpy(dst + j * block, src + size_t(idx[j]) * block, block);
    return out;
  }
  // On a device: the indices, checked above, go there and the backend gathers.
  Tensor index = tensor(std::vector<int64_t>(idx.begin(), idx.end()), Shape{int64_t(idx.size())}).to(x.device());
  return ops::gather_checked(x, index);
}

namespace detail {

void collect_obs(const Tensor& x, std::vector<std::pair<int64_t, std::string>>& out) {
  std::ostringstream shape;
  shape << x.shape();
  out.emplace_back(last_dim(x, "DataLoader"), shape.str());
}

void throw_obs_mismatch(const std::vector<std::pair<int64_t, std::string>>& counts) {
  std::ostringstream os;
  for (size_t i = 0; i < counts.size(); ++i)
    os << (i ? ", " : "") << counts[i].second << " with " << counts[i].first;
  FLX_THROW(DimensionMismatch, "DataLoader: every tensor of the data must hold the same number of observations (its "
            "last dim); got ", os.str(), ". Make the last dims agree (observations are columns, as in Flux)");
}

void check_options(const DataLoaderOptions& o) {
  FLX_CHECK(o.batchsize >= 1, ArgumentError, "DataLoader: batchsize must be at least 1; got ", o.batchsize);
}

int64_t batches_per_epoch(int64_t n, const DataLoaderOptions& o) {
  return o.partial ? (n + o.batchsize - 1) / o.batchsize : n / o.batchsize;
}

EpochPlan plan_epoch(int64_t n, const DataLoaderOptions& o, uint64_t seed, uint64_t epoch) {
  EpochPlan p;
  p.n = n;
  p.batchsize = o.batchsize;
  p.nbatches = batches_per_epoch(n, o);
  if (o.shuffle) {
    // Fisher–Yates with Philox bits keyed by (seed, epoch): the same seed
    // gives the same sequence of permutations on every machine.
    p.perm.resize(size_t(n));
    std::iota(p.perm.begin(), p.perm.end(), 0);
    for (int64_t i = n - 1; i > 0; --i) {
      auto r = philox::bits(seed, epoch, uint64_t(i));
      uint64_t u = uint64_t(r.x[0]) << 32 | r.x[1];
      std::swap(p.perm[size_t(i)], p.perm[size_t(u % uint64_t(i + 1))]);
    }
  }
  return p;
}

bool on_host(const Tensor& x) { return x.defined() && host_data(x) != nullptr; }

}  // namespace detail
}  // namespace flx

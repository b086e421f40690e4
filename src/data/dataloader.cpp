// DataLoader internals: observation access on tensors, option checks and
// the per-epoch shuffle.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "backend_common/philox.hpp"
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

Tensor batch(const std::vector<Tensor>& obs) {
  FLX_CHECK(!obs.empty(), ArgumentError, "batch: expected at least one observation; got none");
  for (size_t i = 0; i < obs.size(); ++i) {
    FLX_CHECK(obs[i].defined(), ArgumentError, "batch: expected defined tensors; observation ", i, " is undefined");
    FLX_CHECK(obs[i].shape() == obs[0].shape() && obs[i].dtype() == obs[0].dtype(), DimensionMismatch,
              "batch: expected every observation to have observation 0's shape ", obs[0].shape(), " and type ",
              obs[0].dtype(), "; observation ", i, " has ", obs[i].shape(), " ", obs[i].dtype(),
              " (pad them first, or pass a .collate of your own)");
  }
  return ops::stack_last(obs);
}

std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> kfolds(int64_t n, int64_t k) {
  FLX_CHECK(k >= 2 && k <= n, ArgumentError, "kfolds: expected k within 2:n (n = ", n,
            " observations, each validated once); got k = ", k);
  std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> out;
  auto& [train, val] = out;
  int64_t offset = 0;
  for (int64_t f = 0; f < k; ++f) {
    const int64_t size = n / k + (f < n % k ? 1 : 0);
    std::vector<int64_t> v(static_cast<size_t>(size));
    std::vector<int64_t> t;
    std::iota(v.begin(), v.end(), offset);
    t.reserve(size_t(n - size));
    for (int64_t i = 0; i < n; ++i)
      if (i < offset || i >= offset + size) t.push_back(i);
    val.push_back(std::move(v));
    train.push_back(std::move(t));
    offset += size;
  }
  return out;
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
  // cld(n, batchsize) with a partial batch, written so that a batchsize near
  // INT64_MAX does not overflow (one partial batch, as MLUtils gives).
  return n / o.batchsize + (o.partial && n % o.batchsize != 0);
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream) {
  // Fisher–Yates with Philox bits keyed by (seed, stream): the same seed
  // gives the same permutation on every machine.
  std::vector<int64_t> perm(size_t(std::max<int64_t>(n, 0)));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    auto r = philox::bits(seed, stream, uint64_t(i));
    uint64_t u = uint64_t(r.x[0]) << 32 | r.x[1];
    std::swap(perm[size_t(i)], perm[size_t(u % uint64_t(i + 1))]);
  }
  return perm;
}

EpochPlan plan_epoch(int64_t n, const DataLoaderOptions& o, uint64_t seed, uint64_t epoch) {
  EpochPlan p;
  p.n = n;
  p.batchsize = o.batchsize;
  p.nbatches = batches_per_epoch(n, o);
  if (o.shuffle) p.perm = permutation(n, seed, epoch);
  return p;
}

void check_obs_range(const char* fn, int64_t n, int64_t start, int64_t stop) {
  FLX_CHECK(0 <= start && start <= stop && stop <= n, ArgumentError, fn, ": expected observations [start, stop) within [0, ",
            n, "] (numobs of the subset); got [", start, ", ", stop, ")");
}

int64_t split_point(int64_t n, double at) {
  FLX_CHECK(at >= 0.0 && at <= 1.0, ArgumentError,
            "splitobs: expected .at, the first part's fraction of the observations, in [0, 1]; got ", at,
            std::isnan(at) ? " (.at was not given)" : "");
  // Julia's round(Int, at * n): to nearest, ties to even.
  return std::clamp(int64_t(std::nearbyint(at * double(n))), int64_t(0), n);
}

void throw_collate(const std::string& what) { FLX_THROW(ArgumentError, what); }

Tensor drop_obs_dim(const Tensor& x) {
  Shape s = x.shape();
  FLX_CHECK(s.ndims() >= 1 && s[s.ndims() - 1] == 1, DimensionMismatch,
            "DataLoader: .collate expected one observation (last dim 1) from getobs(data, i, i + 1); got shape ", s);
  std::vector<int64_t> d(s.begin(), s.end() - 1);
  return reshape(x, Shape(d));
}

Tensor BufferPool::take(const Tensor& x, int64_t count) {
  Shape s = x.shape();
  s[s.ndims() - 1] = count;
  std::lock_guard lock(mu_);
  for (Tensor& t : kept_)
    // Free when only the pool holds the record and its memory (no batch,
    // no view of one).
    if (t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1 && t.dtype() == x.dtype() && t.shape() == s)
      return t;
  Tensor t = empty(x.dtype(), s);
  // Keep a few (a partial last batch has a shape of its own); beyond that
  // the batch is a plain allocation.
  if (kept_.size() < 16) kept_.push_back(t);
  return t;
}

Tensor getobs_into(const Tensor& x, std::span<const int64_t> idx, BufferPool& pool) {
  const char* src = static_cast<const char*>(host_data(x));
  if (!src) return getobs(x, idx);
  const int64_t n = last_dim(x, "getobs");
  for (int64_t i : idx)
    FLX_CHECK(i >= 0 && i < n, ArgumentError, "getobs: observation index ", i, " is outside 0:", n - 1,
              " for data of shape ", x.shape());
  Tensor out = pool.take(x, int64_t(idx.size()));
  const size_t block = n ? size_t(x.numel() / n) * dtype_size(x.dtype()) : 0;
  char* dst = static_cast<char*>(host_data(out));
  for (size_t j = 0; j < idx.size(); ++j) std::memcpy(dst + j * block, src + size_t(idx[j]) * block, block);
  return out;
}

bool on_host(const Tensor& x) { return x.defined() && host_data(x) != nullptr; }

}  // namespace detail
}  // namespace flx

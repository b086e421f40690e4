// Data containers, MLUtils' names: numobs and getobs over a tensor (its
// last dim holds the observations), a std::tuple of tensors (that agree on
// the count) or any type of yours with its own numobs/getobs (found by
// argument lookup); mapobs (a lazy transform of batches); batch (stack
// observations); and the subsets shuffleobs, splitobs (ObsView: nothing is
// copied until getobs) and kfolds. The DataLoader (flx/data.hpp) reads data
// through them.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flx/arrays.hpp"
#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {

// MLUtils' batch: observations of one shape stacked along a new last dim.
FLX_API Tensor batch(const std::vector<Tensor>& observations);

namespace detail {
FLX_API [[noreturn]] void throw_collate(const std::string& what);
}  // namespace detail

namespace detail {
// numobs(d) for any data, found by argument-dependent lookup too (data
// types of other namespaces, e.g. distributed::DistributedDataContainer).
template <class D>
int64_t numobs_of(const D& d) {
  return numobs(d);
}
template <class D>
auto getobs_idx_or_range(const D& d, int64_t start, int64_t stop) {
  return getobs(d, start, stop);
}
}  // namespace detail

// ---- data containers: numobs and getobs (MLUtils' names) ------------------
// A tensor holds numobs = size of its last dim observations.
FLX_API int64_t numobs(const Tensor& x);
// Observations [start, stop): a zero-copy view.
FLX_API Tensor getobs(const Tensor& x, int64_t start, int64_t stop);
// Observations idx (0-based): a gathered copy on x's device.
FLX_API Tensor getobs(const Tensor& x, std::span<const int64_t> idx);

namespace detail {
FLX_API [[noreturn]] void throw_obs_mismatch(const std::vector<std::pair<int64_t, std::string>>& counts);
FLX_API void collect_obs(const Tensor& x, std::vector<std::pair<int64_t, std::string>>& out);
template <class... T>
void collect_obs(const std::tuple<T...>& d, std::vector<std::pair<int64_t, std::string>>& out) {
  std::apply([&](const auto&... x) { (collect_obs(x, out), ...); }, d);
}
}  // namespace detail

// A tuple's members must agree on the number of observations.
template <class... T>
int64_t numobs(const std::tuple<T...>& d) {
  static_assert(sizeof...(T) > 0, "flx::DataLoader: an empty tuple holds no data");
  std::vector<std::pair<int64_t, std::string>> counts;
  detail::collect_obs(d, counts);
  for (const auto& c : counts)
    if (c.first != counts[0].first) detail::throw_obs_mismatch(counts);
  return counts[0].first;
}
template <class... T>
std::tuple<T...> getobs(const std::tuple<T...>& d, int64_t start, int64_t stop) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{getobs(x, start, stop)...}; }, d);
}
namespace detail {
template <class D>
auto getobs_idx(const D& d, std::span<const int64_t> idx);
}
template <class... T>
std::tuple<T...> getobs(const std::tuple<T...>& d, std::span<const int64_t> idx) {
  return std::apply([&](const auto&... x) { return std::tuple<T...>{detail::getobs_idx(x, idx)...}; }, d);
}

// mapobs(f, data): data whose batches are f(batch), computed lazily when the
// loader makes each batch (on the background thread of `loader | device`).
// f takes and returns a batch (observations along the last dim) and must
// keep the number of observations.
template <class F, class D>
struct MappedData {
  F f;
  D data;
};
template <class F, class D>
MappedData<F, D> mapobs(F f, D data) {
  return {std::move(f), std::move(data)};
}
template <class F, class D>
int64_t numobs(const MappedData<F, D>& d) {
  return numobs(d.data);
}
template <class F, class D>
auto getobs(const MappedData<F, D>& d, int64_t start, int64_t stop) {
  return d.f(getobs(d.data, start, stop));
}
template <class F, class D>
auto getobs(const MappedData<F, D>& d, std::span<const int64_t> idx) {
  return d.f(detail::getobs_idx(d.data, idx));
}

namespace detail {
// getobs(d, idx) where d has it; else (user types with only the range form)
// one observation at a time, concatenated along the last dim per tensor.
template <class D>
auto getobs_idx(const D& d, std::span<const int64_t> idx) {
  if constexpr (requires { getobs(d, idx); }) {
    return getobs(d, idx);
  } else {
    using B = decltype(getobs(d, int64_t{}, int64_t{}));
    if (idx.empty()) return getobs(d, 0, 0);
    std::vector<B> parts;
    parts.reserve(idx.size());
    for (int64_t i : idx) parts.push_back(getobs(d, i, i + 1));
    if (parts.size() == 1) return parts[0];
    std::vector<std::vector<Tensor>> cols;
    for (const B& p : parts) {
      std::vector<Tensor> ls = leaves(p);
      if (cols.empty()) cols.resize(ls.size());
      if (ls.size() != cols.size()) throw_collate("getobs: every observation must hold the same number of tensors");
      for (size_t j = 0; j < ls.size(); ++j) cols[j].push_back(ls[j]);
    }
    std::vector<Tensor> out;
    for (auto& c : cols) out.push_back(cat(c, int(c[0].ndims()) - 1));
    size_t j = 0;
    return fmap([&](const Tensor&) { return out[j++]; }, parts[0]);
  }
}
}  // namespace detail

// ---- subsets: splitobs, shuffleobs, kfolds (MLUtils) -----------------------
// ObsView: the observations `indices` (or, without indices, the range
// [start, start + count)) of `data`, read with numobs and getobs like any
// data; nothing is copied until getobs.
template <class D>
struct ObsView {
  D data;
  int64_t start = 0, count = 0;
  std::shared_ptr<const std::vector<int64_t>> indices;  // null: a range
  int64_t operator[](int64_t i) const { return indices ? (*indices)[size_t(i)] : start + i; }
};
namespace detail {
FLX_API void check_obs_range(const char* fn, int64_t n, int64_t start, int64_t stop);
FLX_API std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);
FLX_API int64_t split_point(int64_t n, double at);
}  // namespace detail
template <class D>
int64_t numobs(const ObsView<D>& v) {
  return v.count;
}
template <class D>
auto getobs(const ObsView<D>& v, int64_t start, int64_t stop) {
  detail::check_obs_range("getobs", v.count, start, stop);
  if (!v.indices) return detail::getobs_idx_or_range(v.data, v.start + start, v.start + stop);
  return detail::getobs_idx(v.data, std::span<const int64_t>(*v.indices).subspan(size_t(start), size_t(stop - start)));
}
template <class D>
auto getobs(const ObsView<D>& v, std::span<const int64_t> idx) {
  std::vector<int64_t> mapped;
  mapped.reserve(idx.size());
  for (int64_t i : idx) {
    detail::check_obs_range("getobs", v.count, i, i + 1);
    mapped.push_back(v[i]);
  }
  return detail::getobs_idx(v.data, std::span<const int64_t>(mapped));
}

struct FLX_API SplitObsOptions {
  double at = std::numeric_limits<double>::quiet_NaN();  // required: the first part's fraction, in [0, 1]
  bool shuffle = false;                                  // permute the observations before splitting
  std::optional<uint64_t> seed;                          // of that permutation; default: from set_seed's generator
};

// shuffleobs(data): the observations of data in a random order (a
// permutation drawn from `seed`, or from set_seed's generator).
template <class D>
ObsView<D> shuffleobs(D data, std::optional<uint64_t> seed = std::nullopt) {
  const int64_t n = detail::numobs_of(data);
  auto perm = std::make_shared<const std::vector<int64_t>>(detail::permutation(n, seed ? *seed : detail::draw_seed(), 0));
  return ObsView<D>{std::move(data), 0, n, std::move(perm)};
}

// splitobs(data, {.at = 0.7}): {the first round(at * n) observations, the
// rest}, in order (MLUtils' splitobs; .shuffle = true permutes first).
template <class D>
std::pair<ObsView<D>, ObsView<D>> splitobs(D data, const SplitObsOptions& o) {
  const int64_t n = detail::numobs_of(data);
  const int64_t n1 = detail::split_point(n, o.at);
  if (o.shuffle) {
    auto perm = detail::permutation(n, o.seed ? *o.seed : detail::draw_seed(), 0);
    auto a = std::make_shared<const std::vector<int64_t>>(perm.begin(), perm.begin() + n1);
    auto b = std::make_shared<const std::vector<int64_t>>(perm.begin() + n1, perm.end());
    return {ObsView<D>{data, 0, n1, std::move(a)}, ObsView<D>{std::move(data), 0, n - n1, std::move(b)}};
  }
  return {ObsView<D>{data, 0, n1, nullptr}, ObsView<D>{std::move(data), n1, n - n1, nullptr}};
}

// kfolds(n, k): {train index lists, validation index lists}, 0-based, as
// MLUtils: fold i validates a contiguous run; the first n % k folds hold
// one observation more.
FLX_API std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> kfolds(int64_t n, int64_t k = 5);

}  // namespace flx

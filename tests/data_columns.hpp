// Data for the DataLoader's and the data tools' tests: (2, n) data whose
// column j is (j, 10 j), and labels j, so a batch names its own
// observations and any mix-up shows.
#pragma once

#include <numeric>
#include <vector>

#include "flx/flx.hpp"

namespace flx::testing {

inline Tensor columns(int64_t n) {
  std::vector<float> v;
  for (int64_t j = 0; j < n; ++j) v.insert(v.end(), {float(j), float(10 * j)});
  return tensor(v, {2, n});
}
inline Tensor labels(int64_t n) {
  auto v = std::vector<int64_t>(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return tensor(v, {n});
}

}  // namespace flx::testing

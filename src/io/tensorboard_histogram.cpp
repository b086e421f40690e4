// TensorFlow's default histogram buckets (tensorboard_histogram.hpp).
#include "tensorboard_histogram.hpp"

#include <algorithm>
#include <cfloat>

namespace flx::io {

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

HistogramSummary summarize(std::span<const double> values) {
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  HistogramSummary h;
  h.min = values.empty() ? 0 : values[0];
  h.max = h.min;
  for (double v : values) {
    // The first limit above v; DBL_MAX itself has none and goes in the last bucket.
    size_t b = size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    counts[std::min(b, limits.size() - 1)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
  }
  h.num = double(values.size());
  size_t first = 0, last = counts.size();  // the buckets [first, last) that hold the data
  while (first < last && counts[first] == 0) ++first;
  while (last > first && counts[last - 1] == 0) --last;
  for (size_t i = first; i < last;) {
    double end = limits[i];
    const double count = counts[i++];
    if (count == 0)
      while (i < last && counts[i] == 0) end = limits[i++];
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

}  // namespace flx::io

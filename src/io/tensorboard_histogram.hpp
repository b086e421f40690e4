// Histograms as TensorBoard's HistogramProto holds them, bucketed as
// TensorFlow does by default (and tensorboardX, and PyTorch's
// SummaryWriter with bins="tensorflow"): exponential buckets, finest near
// zero, that fit weights of any scale without a choice of range. Internal.
#pragma once

#include <span>
#include <vector>

namespace flx::io {

// The default bucket limits, increasing: -DBL_MAX, then -1e20 < -x_k < ... <
// -1e-12, 0, 1e-12 < ... < x_k < 1e20, then DBL_MAX, where x_k = 1e-12 * 1.1^k
// (computed by repeated multiplication, as TensorFlow computes them).
// Bucket i holds the values v with limit[i-1] <= v < limit[i] (bucket 0:
// v < limit[0]); the last one also takes DBL_MAX itself.
const std::vector<double>& default_bucket_limits();

// What a HistogramProto holds (field for field).
struct HistogramSummary {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  // Right edges and counts, from the first bucket that holds a value to the
  // last; runs of empty buckets between them are merged into one empty bucket
  // that ends where the run ends (as TensorFlow encodes them). TensorFlow
  // also writes the empty runs before and after the data; TensorBoard's
  // readers take the first bucket's left edge as min and the last one's
  // right edge as max, and for those empty runs its data server then shows
  // a bucket whose left edge is past its right one. Left out, every bucket
  // shown is [min or the previous limit, the limit or max).
  std::vector<double> bucket_limit, bucket;
};

// The histogram of values, which must be finite and not empty (the
// logger checks, naming its tag). sum and sum_squares add in index order.
HistogramSummary summarize(std::span<const double> values);

}  // namespace flx::io

// Making arrays larger from their own elements: repeat and upsample_nearest
// (one broadcasting copy each), upsample_bilinear (gathers along each
// spatial dim, weighted) and pixel_shuffle (a permutation). All are made of
// recorded ops, so each differentiates to any order.
#include <cmath>

#include "flx/arrays.hpp"
#include "ops_internal.hpp"
#include "util/checked_size.hpp"
#include "util/host_vector.hpp"

namespace flx {
namespace {

// x tiled: along each dim k < counts.size(), counts[k] copies, of the whole
// dim (Julia's repeat) or, when `each`, of each element in turn
// (upsample_nearest). One broadcasting copy: x read as (d0, 1, d1, 1, ...)
// into (d0, c0, d1, c1, ...) (each: (1, d0, ...) into (c0, d0, ...)), which
// in column-major order is the tiled tensor; a dim with count 1 merges with
// its neighbours. Its gradient (broadcast_to's) sums the copies. `op`
// names the caller in the error for a size past int64.
Tensor tile(const Tensor& x, const std::vector<int64_t>& counts, bool each, const char* op) {
  const int nd = std::max(x.ndims(), int(counts.size()));
  auto count = [&](int k) { return k < int(counts.size()) ? counts[size_t(k)] : int64_t(1); };
  std::vector<int64_t> in, bc;
  Shape out;
  bool last_is_data = false;
  auto data = [&](int64_t d) {
    if (last_is_data) {
      in.back() *= d;
      bc.back() *= d;
    } else {
      in.push_back(d);
      bc.push_back(d);
    }
    last_is_data = true;
  };
  auto copies = [&](int64_t c) {
    in.push_back(1);
    bc.push_back(c);
    last_is_data = false;
  };
  int repeated = 0;
  for (int k = 0; k < nd; ++k) {
    const int64_t d = x.size(k), c = count(k);
    out.push_back(detail::checked_mul(d, c, op, ": dim ", k, " of shape ", x.shape(), " times ", c));
    if (c == 1) {
      data(d);
      continue;
    }
    ++repeated;
    if (each) copies(c), data(d);
    else data(d), copies(c);
  }
  (void)detail::checked_numel(out, op);
  if (repeated == 0) return nd == x.ndims() ? x : reshape(x, out);
  if (in.size() > size_t(Shape::max_dims)) {
    // Too many dims for one copy: the first half of the repeated dims, then
    // the rest.
    std::vector<int64_t> first(size_t(nd), 1), rest(size_t(nd), 1);
    int seen = 0;
    for (int k = 0; k < nd; ++k)
      if (count(k) != 1) (seen++ < repeated / 2 ? first : rest)[size_t(k)] = count(k);
    return tile(tile(x, first, each, op), rest, each, op);
  }
  return reshape(ops::broadcast_to(reshape(x, Shape(in)), Shape(bc)), out);
}

}  // namespace

Tensor repeat(const Tensor& x, const std::vector<int64_t>& counts) {
  ops::check_defined(x, "repeat");
  FLX_CHECK(int(counts.size()) <= Shape::max_dims, DimensionMismatch, "repeat: ", counts.size(),
            " counts make more dims than a tensor can have (", Shape::max_dims, ")");
  for (size_t k = 0; k < counts.size(); ++k)
    FLX_CHECK(counts[k] >= 0, ArgumentError, "repeat: counts must be >= 0; got ", counts[k], " for dim ", k);
  return tile(x, counts, false, "repeat");
}

namespace {

const char* kUpsampleHow = " (give .scale = {...} or .size = {...}, one of them)";

}  // namespace

// floor(scale · in), an output's size along a dim; an ArgumentError naming
// `op` and the scale past int64 (the Upsample layer's rule uses it too).
int64_t ops::scaled_size(double scale, int64_t in, const std::string& op, int dim) {
  const double out = std::floor(scale * double(in));
  if (!(out < 0x1p63)) detail::size_overflow(op, ": dim ", dim, " (", in, ") times scale ", scale);
  return int64_t(out);
}

namespace {

// The output's leading sizes from .scale or .size, checked; nearest: whole
// scales only.
std::vector<int64_t> upsample_sizes(const Tensor& x, const UpsampleOptions& o, size_t expected, bool nearest,
                                    const char* op) {
  ops::check_defined(x, op);
  const bool mode_ok = o.mode.empty() || (nearest ? o.mode == "nearest"
                                                   : o.mode == "bilinear" || o.mode == "linear" || o.mode == "trilinear");
  FLX_CHECK(mode_ok, ArgumentError, op, ": .mode = \"", o.mode, "\" is not this function's (the Upsample layer ",
            "picks the function by its mode)");
  const bool by_scale = !o.scale.empty();
  FLX_CHECK(by_scale != !o.size.empty(), ArgumentError, op, ": got ",
            by_scale ? "both .scale and .size" : "neither .scale nor .size", kUpsampleHow);
  const size_t n = by_scale ? o.scale.size() : o.size.size();
  if (expected)
    FLX_CHECK(n == expected, DimensionMismatch, op, ": expected ", expected, " ", by_scale ? "scales" : "sizes",
              ", one per spatial dim of an input of shape ", x.shape(), "; got ", n);
  else
    FLX_CHECK(int(n) <= x.ndims(), DimensionMismatch, op, ": ", n, " ", by_scale ? "scales" : "sizes",
              " for an input of shape ", x.shape(), " (", x.ndims(), " dims)");
  std::vector<int64_t> out;
  for (size_t k = 0; k < n; ++k) {
    const int64_t in = x.size(int(k));
    if (by_scale) {
      const double s = o.scale[k];
      if (nearest)
        FLX_CHECK(s >= 1 && s == std::floor(s), ArgumentError, op, ": scales must be whole numbers >= 1; got ", s,
                  " for dim ", k);
      else
        FLX_CHECK(s > 0 && std::isfinite(s), ArgumentError, op, ": scales must be > 0; got ", s, " for dim ", k);
      out.push_back(ops::scaled_size(s, in, op, int(k)));
    } else {
      const int64_t s = o.size[k];
      FLX_CHECK(s >= 1, ArgumentError, op, ": sizes must be >= 1; got ", s, " for dim ", k);
      if (nearest)
        FLX_CHECK(in > 0 && s % in == 0, ArgumentError, op, ": size ", s, " of dim ", k,
                  " is not a whole multiple of the input's ", in, " (input shape ", x.shape(), ")");
      out.push_back(s);
    }
    FLX_CHECK(in > 0 || out.back() == 0, ArgumentError, op, ": dim ", k, " of the input (shape ", x.shape(),
              ") is empty: there is nothing to interpolate from");
  }
  Shape full = x.shape();
  for (size_t k = 0; k < out.size(); ++k) full[int(k)] = out[k];
  (void)detail::checked_numel(full, op);
  return out;
}

}  // namespace

Tensor upsample_nearest(const Tensor& x, const UpsampleOptions& o) {
  const auto sizes = upsample_sizes(x, o, 0, true, "upsample_nearest");
  std::vector<int64_t> scales;
  for (size_t k = 0; k < sizes.size(); ++k) scales.push_back(x.size(int(k)) ? sizes[k] / x.size(int(k)) : 1);
  return tile(x, scales, true, "upsample_nearest");
}

Tensor upsample_bilinear(const Tensor& x0, const UpsampleOptions& o) {
  ops::check_defined(x0, "upsample_bilinear");
  FLX_CHECK(x0.ndims() >= 3, DimensionMismatch,
            "upsample_bilinear: expected (spatial dims..., channels, batch), at least 3 dims; got shape ", x0.shape());
  const auto sizes = upsample_sizes(x0, o, size_t(x0.ndims() - 2), false, "upsample_bilinear");
  Tensor x = is_floating(x0.dtype()) ? x0 : x0.to(DType::Float32);
  // NNlib's source_idx_and_λ (PyTorch's linear interpolation), per dim.
  for (int k = 0; k < int(sizes.size()); ++k) {
    const int64_t in = x.size(k), out = sizes[size_t(k)];
    if (in == out) continue;
    // align_corners maps output 0 and out - 1 onto input 0 and in - 1 (a
    // single output pixel onto input 0, as PyTorch: NNlib divides by 0).
    const double ratio = o.align_corners ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0) : double(in) / double(out);
    auto i0 = detail::host_vector<int64_t>(size_t(out), "upsample_bilinear"), i1 = i0;
    auto w0 = detail::host_vector<double>(size_t(out), "upsample_bilinear"), w1 = w0;
    for (int64_t j = 0; j < out; ++j) {
      const double real = o.align_corners ? ratio * double(j) : std::max(0.0, ratio * (double(j) + 0.5) - 0.5);
      const int64_t lo = std::min(int64_t(std::floor(real)), in - 1);
      i0[size_t(j)] = lo;
      i1[size_t(j)] = lo < in - 1 ? lo + 1 : lo;
      w1[size_t(j)] = real - double(lo);
      w0[size_t(j)] = 1.0 - w1[size_t(j)];
    }
    Shape ws;
    for (int d = 0; d < k; ++d) ws.push_back(1);
    ws.push_back(out);
    const Tensor W0 = tensor(w0, ws).to(x.dtype()).to(x.device()), W1 = tensor(w1, ws).to(x.dtype()).to(x.device());
    x = ops::gather_dim(x, k, ops::index_tensor(i0, x)) * W0 + ops::gather_dim(x, k, ops::index_tensor(i1, x)) * W1;
  }
  return x;
}

int64_t ops::upscale_channels(int64_t r, int d, const std::string& op) {
  int64_t rd = 1;
  for (int k = 0; k < d; ++k) rd = detail::checked_mul(rd, r, op, ": r^", d, " (the channels each output channel takes) with r = ", r);
  return rd;
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  ops::check_defined(x, "pixel_shuffle");
  FLX_CHECK(x.ndims() >= 3, DimensionMismatch,
            "pixel_shuffle: expected (spatial dims..., channels, batch), at least 3 dims; got shape ", x.shape());
  const int d = x.ndims() - 2;
  FLX_CHECK(2 * d + 2 <= Shape::max_dims, DimensionMismatch, "pixel_shuffle: at most 3 spatial dims (it permutes ",
            "2d + 2 dims, at most ", Shape::max_dims, "); got shape ", x.shape());
  FLX_CHECK(r >= 1, ArgumentError, "pixel_shuffle: the upscale factor r must be >= 1; got ", r);
  const int64_t rd = ops::upscale_channels(r, d, "pixel_shuffle");
  const int64_t cin = x.size(d), n = x.size(d + 1);
  FLX_CHECK(cin % rd == 0, DimensionMismatch, "pixel_shuffle: the channels (dim ", d, ") of shape ", x.shape(),
            ", ", cin, ", are not a multiple of r^", d, " = ", rd, " (r = ", r, ", ", d, " spatial dims)");
  Shape split, out;
  std::vector<int> perm;
  for (int k = 0; k < d; ++k) split.push_back(x.size(k));
  for (int k = 0; k < d; ++k) split.push_back(r);
  split.push_back(cin / rd);
  split.push_back(n);
  for (int k = 0; k < d; ++k) {
    perm.push_back(d + k);  // each spatial index becomes r * its own + its sub-pixel
    perm.push_back(k);
    out.push_back(detail::checked_mul(r, x.size(k), "pixel_shuffle: dim ", k, " of shape ", x.shape(), " times r = ", r));
  }
  perm.push_back(2 * d);
  perm.push_back(2 * d + 1);
  out.push_back(cin / rd);
  out.push_back(n);
  return reshape(permutedims(reshape(x, split), perm), out);
}

}  // namespace flx

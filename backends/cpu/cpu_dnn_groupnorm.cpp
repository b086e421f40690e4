// Group normalisation (the dnn table's groupnorm_*, ABI minor 10): Float32
// and Float64 as flx's own loops. One set (group, sample) to a thread for
// the statistics and dx, its sums in one order (Lanes), and the scale's and
// bias's gradients summed over the samples in order from per-(channel,
// sample) parts: the same bits at any thread count and load. Two passes
// over the data each way, where the composition from batchnorm and maps
// took eight (libflx composes it for a dtype this answers
// FLX_ERR_UNSUPPORTED: the halves, which GroupNorm widens to Float32 first).
#include <cmath>
#include <string>
#include <vector>

#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"
#include "cpu_lanes.hpp"

namespace flx::cpu_backend {
namespace {

using onednn::guarded;  // what the loops throw (out of memory) as a status

int check(const char* call, const flx_groupnorm_desc* d) {
  if (!d || d->struct_size < sizeof(flx_groupnorm_desc))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": the descriptor is missing or older than this " +
                                              "backend's flx_groupnorm_desc");
  if (d->dtype != FLX_F32 && d->dtype != FLX_F64) return FLX_ERR_UNSUPPORTED;
  if (d->spatial < 1 || d->channels < 1 || d->groups < 1 || d->batch < 1 || d->channels % d->groups != 0 ||
      !(d->epsilon >= 0))
    return fail(FLX_ERR_INVALID_ARGUMENT,
                std::string(call) + ": expected sizes >= 1, groups dividing channels and epsilon >= 0; got spatial " +
                    std::to_string(d->spatial) + ", channels " + std::to_string(d->channels) + ", groups " +
                    std::to_string(d->groups) + ", batch " + std::to_string(d->batch));
  return FLX_OK;
}

// Set (g, n) is the contiguous run of spatial * cpg values from
// (n * channels + g * cpg) * spatial.
template <class T>
void forward(const flx_groupnorm_desc& d) {
  const int64_t S = d.spatial, C = d.channels, G = d.groups, cpg = C / G, m = S * cpg;
  const T *x = ptr_or_null<const T>(d.x), *scale = ptr_or_null<const T>(d.scale);
  const T* bias = ptr_or_null<const T>(d.bias);
  T *y = ptr_or_null<T>(d.y), *saved_mean = ptr_or_null<T>(d.saved_mean);
  T* saved_invstd = ptr_or_null<T>(d.saved_invstd);
  parallel_for(G * d.batch, grain_of(m), [&](int64_t lo, int64_t hi) {
    for (int64_t set = lo; set < hi; ++set) {
      const int64_t g = set % G, n = set / G, c0 = g * cpg;
      const T* xs = x + (n * C + c0) * S;
      Lanes s;
      s.add(m, [&](int64_t p) { return double(xs[p]); });
      const double mean = s.total() / double(m);
      Lanes q;
      q.add(m, [&](int64_t p) {
        const double e = double(xs[p]) - mean;
        return e * e;
      });
      const double invstd = 1 / std::sqrt(q.total() / double(m) + d.epsilon);
      if (saved_mean) saved_mean[set] = T(mean);
      if (saved_invstd) saved_invstd[set] = T(invstd);
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t c = c0 + k;
        const double a = (scale ? double(scale[c]) : 1.0) * invstd, b = bias ? double(bias[c]) : 0.0;
        const T* xr = xs + k * S;
        T* yr = y + (n * C + c) * S;
        for (int64_t p = 0; p < S; ++p) yr[p] = T((double(xr[p]) - mean) * a + b);
      }
    }
  });
}

// With x̂ = (x - mean) invstd and dx̂ = dy scale over a set of m values:
//   dx = invstd (dx̂ - Σdx̂ / m - x̂ Σ(dx̂ x̂) / m),
//   dscale[c] = Σ over s and n of dy x̂,  dbias[c] = Σ dy.
template <class T>
void backward(const flx_groupnorm_desc& d) {
  const int64_t S = d.spatial, C = d.channels, G = d.groups, N = d.batch, cpg = C / G, m = S * cpg;
  const T *x = ptr_or_null<const T>(d.x), *dy = ptr_or_null<const T>(d.dy), *scale = ptr_or_null<const T>(d.scale);
  const T *saved_mean = ptr_or_null<const T>(d.saved_mean), *saved_invstd = ptr_or_null<const T>(d.saved_invstd);
  T *dx = ptr_or_null<T>(d.dx), *dscale = ptr_or_null<T>(d.dscale), *dbias = ptr_or_null<T>(d.dbias);
  // Σ dy and Σ dy x̂ of each (channel, sample), channel fastest
  std::vector<double> sum_dy(size_t(C * N)), sum_dy_xhat(size_t(C * N));
  parallel_for(G * N, grain_of(m), [&](int64_t lo, int64_t hi) {
    for (int64_t set = lo; set < hi; ++set) {
      const int64_t g = set % G, n = set / G, c0 = g * cpg;
      const double mean = double(saved_mean[set]), invstd = double(saved_invstd[set]);
      double total = 0, total_xhat = 0;  // Σdx̂ and Σ dx̂ x̂ over the set
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t c = c0 + k, row = (n * C + c) * S;
        Lanes s, sx;
        s.add(S, [&](int64_t p) { return double(dy[row + p]); });
        sx.add(S, [&](int64_t p) { return double(dy[row + p]) * (double(x[row + p]) - mean); });
        const double a = s.total(), b = sx.total() * invstd, w = scale ? double(scale[c]) : 1.0;
        sum_dy[size_t(n * C + c)] = a;
        sum_dy_xhat[size_t(n * C + c)] = b;
        total += w * a;
        total_xhat += w * b;
      }
      const double shift = total / double(m), k_xhat = total_xhat / double(m);
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t c = c0 + k, row = (n * C + c) * S;
        const double w = scale ? double(scale[c]) : 1.0;
        for (int64_t p = 0; p < S; ++p) {
          const double xhat = (double(x[row + p]) - mean) * invstd;
          dx[row + p] = T(invstd * (w * double(dy[row + p]) - shift - xhat * k_xhat));
        }
      }
    }
  });
  if (dscale || dbias)
    parallel_for(C, grain_of(N), [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double a = 0, b = 0;
        for (int64_t n = 0; n < N; ++n) {
          a += sum_dy[size_t(n * C + c)];
          b += sum_dy_xhat[size_t(n * C + c)];
        }
        if (dbias) dbias[c] = T(a);
        if (dscale) dscale[c] = T(b);
      }
    });
}

}  // namespace

int groupnorm_forward(void*, int, const flx_groupnorm_desc* d, flx_stream) {
  const char* call = "groupnorm_forward";
  if (int st = check(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  return guarded(call, [&] {
    d->dtype == FLX_F32 ? forward<float>(*d) : forward<double>(*d);
    return FLX_OK;
  });
}

int groupnorm_backward(void*, int, const flx_groupnorm_desc* d, flx_stream) {
  const char* call = "groupnorm_backward";
  if (int st = check(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x},
                         {"dy", d->dy},
                         {"dx", d->dx},
                         {"saved_mean", d->saved_mean},
                         {"saved_invstd", d->saved_invstd}})
    if (int st = need_buffer(call, what, m)) return st;
  return guarded(call, [&] {
    d->dtype == FLX_F32 ? backward<float>(*d) : backward<double>(*d);
    return FLX_OK;
  });
}

}  // namespace flx::cpu_backend

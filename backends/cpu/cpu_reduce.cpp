// CPU reductions over any set of dims, plus argmax/argmin along one dim.
// Dims are merged into runs of kept and reduced dims so the usual cases
// (everything, the first dim, the last dim) are straight loops.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {
namespace {

template <class T>
using acc_t = std::conditional_t<is_float_v<T>, double, std::conditional_t<std::is_same_v<T, bool>, int64_t, compute_t<T>>>;

struct Group {
  int64_t extent;
  int64_t stride;
  bool reduced;
};

template <class T, class A, class Combine>
void reduce_impl(const flx_reduce_desc& d, A init, Combine combine, bool is_sum) {
  std::vector<Group> g;
  int64_t stride = 1;
  for (int k = 0; k < d.ndim; ++k) {
    bool red = (d.mask >> k) & 1u;
    int64_t e = d.shape[k];
    if (e != 1) {
      if (!g.empty() && g.back().reduced == red && g.back().stride * g.back().extent == stride)
        g.back().extent *= e;
      else
        g.push_back({e, stride, red});
    }
    stride *= e;
  }
  const T* in = reinterpret_cast<const T*>(addr(d.in));
  using O = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
  T* out = reinterpret_cast<T*>(addr(d.out));
  const A scale = is_sum ? A(d.scale) : A(1);
  auto finish = [&](A acc) { return store<T>(compute_t<T>(is_sum ? acc * scale : acc)); };
  (void)sizeof(O);
  int64_t total = stride;

  if (g.empty()) {  // one element
    out[0] = finish(combine(init, A(load(in[0]))));
    return;
  }
  int64_t nkept = 1, nred = 1;
  for (auto& x : g) (x.reduced ? nred : nkept) *= x.extent;
  if (total == 0) {
    for (int64_t i = 0; i < nkept; ++i) out[i] = finish(init);
    return;
  }
  if (g.size() == 1 && g[0].reduced) {  // everything
    A acc = init;
    for (int64_t i = 0; i < total; ++i) acc = combine(acc, A(load(in[i])));
    out[0] = finish(acc);
    return;
  }
  if (g.size() == 2 && g[0].reduced) {  // first dims reduced: contiguous per output
    int64_t R = g[0].extent, K = g[1].extent;
    parallel_for(K, grain_of(R), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        A acc = init;
        const T* p = in + o * R;
        for (int64_t r = 0; r < R; ++r) acc = combine(acc, A(load(p[r])));
        out[o] = finish(acc);
      }
    });
    return;
  }
  if (g.size() == 2 && !g[0].reduced) {  // last dims reduced: accumulate rows
    int64_t K = g[0].extent, R = g[1].extent;
    std::vector<A> acc(size_t(K), init);
    for (int64_t r = 0; r < R; ++r) {
      const T* p = in + r * K;
      for (int64_t o = 0; o < K; ++o) acc[o] = combine(acc[o], A(load(p[o])));
    }
    for (int64_t o = 0; o < K; ++o) out[o] = finish(acc[o]);
    return;
  }
  // General case: walk kept and reduced multi-indices.
  std::vector<Group> kept, red;
  for (auto& x : g) (x.reduced ? red : kept).push_back(x);
  parallel_for(nkept, grain_of(nred), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      int64_t base = 0, rem = o;
      for (auto& k : kept) {
        base += (rem % k.extent) * k.stride;
        rem /= k.extent;
      }
      A acc = init;
      for (int64_t r = 0; r < nred; ++r) {
        int64_t off = base, rr = r;
        for (auto& k : red) {
          off += (rr % k.extent) * k.stride;
          rr /= k.extent;
        }
        acc = combine(acc, A(load(in[off])));
      }
      out[o] = finish(acc);
    }
  });
}

template <class T>
int arg_reduce(const flx_reduce_desc& d, bool is_max) {
  int axis = -1;
  for (int k = 0; k < d.ndim; ++k)
    if ((d.mask >> k) & 1u) {
      if (axis >= 0) return fail(FLX_ERR_INVALID_ARGUMENT, "argmax/argmin reduce exactly one dim");
      axis = k;
    }
  if (axis < 0) return fail(FLX_ERR_INVALID_ARGUMENT, "argmax/argmin reduce exactly one dim");
  int64_t inner = 1, outer = 1, len = d.shape[axis];
  for (int k = 0; k < axis; ++k) inner *= d.shape[k];
  for (int k = axis + 1; k < d.ndim; ++k) outer *= d.shape[k];
  const T* in = reinterpret_cast<const T*>(addr(d.in));
  int64_t* out = reinterpret_cast<int64_t*>(addr(d.out));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* p = in + o * inner * len + i;
      // The first NaN wins, as in Julia's findmax/findmin and torch.argmax.
      int64_t best = 0;
      auto bv = load(p[0]);
      for (int64_t j = 1; j < len && bv == bv; ++j) {
        auto v = load(p[j * inner]);
        if (is_max ? v > bv || v != v : v < bv || v != v) {
          bv = v;
          best = j;
        }
      }
      out[o * inner + i] = best;
    }
  return FLX_OK;
}

}  // namespace

int reduce(void*, int, const flx_reduce_desc* d, flx_stream) {
  int status = FLX_OK;
  bool known = dispatch_dtype(d->dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    switch (d->op) {
      case FLX_REDUCE_SUM:
        if constexpr (std::is_same_v<T, bool>) status = fail(FLX_ERR_UNSUPPORTED, "sum of Bool: convert first");
        else reduce_impl<T>(*d, A(0), [](A a, A b) { return a + b; }, true);
        break;
      case FLX_REDUCE_MAX:
        reduce_impl<T>(*d, std::numeric_limits<A>::lowest(), [](A a, A b) { return b > a || b != b ? b : a; }, false);
        break;
      case FLX_REDUCE_MIN:
        reduce_impl<T>(*d, std::numeric_limits<A>::max(), [](A a, A b) { return b < a || b != b ? b : a; }, false);
        break;
      case FLX_REDUCE_ARGMAX:
        status = arg_reduce<T>(*d, true);
        break;
      case FLX_REDUCE_ARGMIN:
        status = arg_reduce<T>(*d, false);
        break;
      default:
        status = fail(FLX_ERR_UNSUPPORTED, "reduce: unknown op " + std::to_string(d->op));
    }
  });
  return known ? status : fail(FLX_ERR_INVALID_ARGUMENT, "reduce: unknown dtype");
}

}  // namespace flx::cpu_backend

// CPU reductions over any set of dims, plus argmax/argmin along one dim.
// The descriptor's runs (computed by libflx) make the usual cases
// (everything, the first dims, the last dims) straight loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {
namespace {

template <class T>
using acc_t = std::conditional_t<is_float_v<T>, double, std::conditional_t<std::is_same_v<T, bool>, int64_t, compute_t<T>>>;

// Where max (is_max) and min start: -Inf/Inf for floating accumulators, so
// that a slice of all -Inf gives -Inf in every dtype (lowest() would leave
// Float64 at -1.8e308); the type's extremes otherwise.
template <class A>
A extremum_start(bool is_max) {
  if constexpr (std::is_floating_point_v<A>)
    return is_max ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
  else return is_max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
}

// A whole-tensor reduction of at least two of these is cut into chunks of
// this many elements (fixed, so that the result does not depend on the
// threads): big enough that a chunk pays for a thread's wake-up.
constexpr int64_t kWholeChunk = 1 << 16;
// The general case keeps the offsets of up to this many reduced values per
// output in a table.
constexpr int64_t kOffsetTable = 4096;

// The sum of n contiguous floats in double, in 16 interleaved partial sums
// (lanes of four vectors) added in a fixed order at the end, then the tail
// in order. One chain of dependent adds ran at the adder's latency: a
// 6.4-million-element sum took 2.8 ms on 2 cores, a fifth of what memory
// allows. AVX2 where the CPU has it; every add rounds as written (no FMA),
// so both copies give the same bits.
using v4d = double __attribute__((vector_size(32)));
using v4f = float __attribute__((vector_size(16)));
__attribute__((target_clones("avx2", "default"))) double sum_f32_clones(const float* p, int64_t n) {
  v4d a[4] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) {
      v4f x;
      std::memcpy(&x, p + i + 4 * k, sizeof x);
      a[k] += __builtin_convertvector(x, v4d);
    }
  const v4d s = (a[0] + a[1]) + (a[2] + a[3]);
  double acc = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) acc += double(p[i]);
  return acc;
}

// Runs of the canonical descriptor, as the general case walks them.
struct Run {
  int64_t extent;
  int64_t stride;
};

template <class T, class A, class Combine>
void reduce_impl(const flx_reduce_desc& d, A init, Combine combine, bool is_sum) {
  const T* in = reinterpret_cast<const T*>(addr(d.in));
  T* out = reinterpret_cast<T*>(addr(d.out));
  const A scale = is_sum ? A(d.scale) : A(1);
  auto finish = [&](A acc) { return store<T>(compute_t<T>(is_sum ? acc * scale : acc)); };
  const int64_t nkept = d.nkept, nred = d.nred;
  if (nred == 0) {  // an empty input
    for (int64_t i = 0; i < nkept; ++i) out[i] = finish(init);
    return;
  }
  const int nk = d.nkept_runs, nr = d.nred_runs;
  if (nk == 0 && nr <= 1) {  // everything, contiguous
    auto run = [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>)
        if (is_sum) return sum_f32_clones(in + lo, hi - lo);
      A acc = init;
      for (int64_t i = lo; i < hi; ++i) acc = combine(acc, A(load(in[i])));
      return acc;
    };
    if (nred < 2 * kWholeChunk) {
      out[0] = finish(run(0, nred));
      return;
    }
    // Chunks of a fixed size, each combined in order, then the chunks'
    // results in order: the same bits on any number of threads.
    const int64_t chunks = (nred + kWholeChunk - 1) / kWholeChunk;
    std::vector<A> part(static_cast<size_t>(chunks));
    parallel_for(chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) part[size_t(c)] = run(c * kWholeChunk, std::min(nred, (c + 1) * kWholeChunk));
    });
    A acc = init;
    for (const A& p : part) acc = combine(acc, p);
    out[0] = finish(acc);
    return;
  }
  if (nk == 1 && nr == 1 && d.red_stride[0] == 1) {  // first dims reduced: contiguous per output
    const int64_t R = nred, ks = d.kept_stride[0];
    parallel_for(nkept, grain_of(R), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const T* p = in + o * ks;
        if (is_sum) {
          // four interleaved partial sums, added pairwise at the end: not
          // one long chain of dependent adds (a LayerNorm's 64 features per
          // column), in a fixed order
          A part[4] = {init, A(0), A(0), A(0)};
          int64_t r = 0;
          for (; r + 4 <= R; r += 4)
            for (int k = 0; k < 4; ++k) part[k] = combine(part[k], A(load(p[r + k])));
          for (; r < R; ++r) part[0] = combine(part[0], A(load(p[r])));
          out[o] = finish(combine(combine(part[0], part[1]), combine(part[2], part[3])));
        } else {
          A acc = init;
          for (int64_t r = 0; r < R; ++r) acc = combine(acc, A(load(p[r])));
          out[o] = finish(acc);
        }
      }
    });
    return;
  }
  if (nk == 1 && nr == 1 && d.kept_stride[0] == 1) {  // last dims reduced: accumulate rows
    // Blocks of outputs in parallel, each accumulating every row in order
    // (a bias's or a LayerNorm's gradient: a few hundred outputs, thousands
    // of rows).
    const int64_t K = nkept, rs = d.red_stride[0];
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (K + kBlock - 1) / kBlock;
    parallel_for(blocks, std::max<int64_t>(1, grain_of(kBlock * nred)), [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t o0 = b * kBlock, len = std::min(kBlock, K - o0);
        A acc[kBlock];
        std::fill(acc, acc + len, init);
        for (int64_t r = 0; r < nred; ++r) {
          const T* p = in + r * rs + o0;
          for (int64_t o = 0; o < len; ++o) acc[o] = combine(acc[o], A(load(p[o])));
        }
        for (int64_t o = 0; o < len; ++o) out[o0 + o] = finish(acc[o]);
      }
    });
    return;
  }
  // General case. Sums keep four interleaved partial sums by position, added
  // pairwise at the end: a fixed order, whatever the threads.
  auto kept_offset = [&](int64_t o) {
    int64_t base = 0;
    for (int k = 0; k < nk; ++k) {
      base += (o % d.kept_extent[k]) * d.kept_stride[k];
      o /= d.kept_extent[k];
    }
    return base;
  };
  auto reduced_offset = [&](int64_t r, int first) {
    int64_t off = 0;
    for (int k = first; k < nr; ++k) {
      off += (r % d.red_extent[k]) * d.red_stride[k];
      r /= d.red_extent[k];
    }
    return off;
  };
  auto combine4 = [&](const A* part) {
    return is_sum ? combine(combine(part[0], part[1]), combine(part[2], part[3])) : part[0];
  };
  const A start[4] = {init, is_sum ? A(0) : init, is_sum ? A(0) : init, is_sum ? A(0) : init};
  if (nred <= kOffsetTable) {
    // Few values per output (a nearest upsampling's gradient: 4 per output):
    // the reduced offsets once, in a table.
    std::vector<int64_t> roff(static_cast<size_t>(nred));
    for (int64_t r = 0; r < nred; ++r) roff[size_t(r)] = reduced_offset(r, 0);
    parallel_for(nkept, grain_of(nred), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const T* p = in + kept_offset(o);
        A part[4] = {start[0], start[1], start[2], start[3]};
        int64_t r = 0;
        if (is_sum)
          for (; r + 4 <= nred; r += 4)
            for (int k = 0; k < 4; ++k) part[k] = combine(part[k], A(load(p[roff[size_t(r + k)]])));
        for (; r < nred; ++r) part[0] = combine(part[0], A(load(p[roff[size_t(r)]])));
        out[o] = finish(combine4(part));
      }
    });
    return;
  }
  // Many values per output (a per-channel sum over (spatial, batch) of
  // (spatial, channels, batch): a conv's or GroupNorm's parameter gradient):
  // the first reduced run as a tight loop.
  const int64_t inner = d.red_extent[0], inner_stride = d.red_stride[0], outer = nred / inner;
  parallel_for(nkept, grain_of(nred), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      const int64_t base = kept_offset(o);
      A part[4] = {start[0], start[1], start[2], start[3]};
      for (int64_t r = 0; r < outer; ++r) {
        const T* p = in + base + reduced_offset(r, 1);
        int64_t i = 0;
        if (is_sum)
          for (; i + 4 <= inner; i += 4)
            for (int k = 0; k < 4; ++k) part[k] = combine(part[k], A(load(p[(i + k) * inner_stride])));
        for (; i < inner; ++i) part[0] = combine(part[0], A(load(p[i * inner_stride])));
      }
      out[o] = finish(combine4(part));
    }
  });
}

// argmax/argmin along the one reduced run: the first NaN wins, as in
// Julia's findmax/findmin and torch.argmax; else the first extremum.
template <class T>
int arg_reduce(const flx_reduce_desc& d, bool is_max) {
  if (d.nred_runs != 1) return fail(FLX_ERR_INVALID_ARGUMENT, "argmax/argmin reduce exactly one dim");
  const int64_t len = d.red_extent[0], rs = d.red_stride[0];
  const T* in = reinterpret_cast<const T*>(addr(d.in));
  int64_t* out = reinterpret_cast<int64_t*>(addr(d.out));
  for (int64_t o = 0; o < d.nkept; ++o) {
    int64_t base = 0, rem = o;
    for (int k = 0; k < d.nkept_runs; ++k) {
      base += (rem % d.kept_extent[k]) * d.kept_stride[k];
      rem /= d.kept_extent[k];
    }
    const T* p = in + base;
    int64_t best = 0;
    auto bv = load(p[0]);
    for (int64_t j = 1; j < len && bv == bv; ++j) {
      auto v = load(p[j * rs]);
      if (is_max ? v > bv || v != v : v < bv || v != v) {
        bv = v;
        best = j;
      }
    }
    out[o] = best;
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
        reduce_impl<T>(*d, extremum_start<A>(true), [](A a, A b) { return b > a || b != b ? b : a; }, false);
        break;
      case FLX_REDUCE_MIN:
        reduce_impl<T>(*d, extremum_start<A>(false), [](A a, A b) { return b < a || b != b ? b : a; }, false);
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

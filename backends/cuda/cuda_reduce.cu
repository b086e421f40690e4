// Reductions (sum/max/min over the descriptor's canonical runs) and
// argmax/argmin along one run, with CUB's block and warp reductions
// (cub::BlockReduce, cub::WarpReduce) combining the threads' partials.
// Long reductions run one block per output element, its threads striding
// over the reduced elements; many outputs of few elements each run one
// thread per output; long reductions into few outputs split over many
// blocks, through the workspace (reduce_workspace), and a warp per output
// combines the partials. Floating sums (Float16 and BFloat16 included)
// accumulate in double, integers in Int64 (wrapped to the dtype at the
// end), as on the CPU. argmax/argmin take the first NaN, else the first
// extremum, as the CPU: one thread per output for short runs, a block per
// output for long ones.
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <limits>
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

template <class T>
using acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;

struct Runs {
  int32_t nk, nr;
  int64_t kext[FLX_MAX_DIMS], kstr[FLX_MAX_DIMS], rext[FLX_MAX_DIMS], rstr[FLX_MAX_DIMS];
  int64_t nkept, nred;
};

__device__ __forceinline__ int64_t kept_offset(const Runs& r, int64_t o) {
  int64_t base = 0;
  for (int k = 0; k < r.nk; ++k) {
    base += (o % r.kext[k]) * r.kstr[k];
    o /= r.kext[k];
  }
  return base;
}
__device__ __forceinline__ int64_t red_offset(const Runs& r, int64_t j) {
  if (r.nr == 1) return j * r.rstr[0];
  int64_t off = 0;
  for (int k = 0; k < r.nr; ++k) {
    off += (j % r.rext[k]) * r.rstr[k];
    j /= r.rext[k];
  }
  return off;
}

// Sums, and extrema (max or min, a flag at run time rather than a template
// argument: half as many kernels to compile, and a uniform branch costs
// nothing in these memory-bound loops). NaN wins an extremum, in any order.
enum Kind { kSum, kExtremum };

template <int KIND>
struct Combine {
  bool is_max = false;  // kExtremum: max, else min
  template <class A>
  __device__ __forceinline__ A operator()(const A& a, const A& b) const {
    if constexpr (KIND == kSum) return a + b;
    else return (is_max ? b > a : b < a) || b != b ? b : a;
  }
};

constexpr int kThreads = 256;

// The block's combined value, valid in thread 0. Every thread passes its
// partial (init when it had no element), so no count of valid ones is
// needed. The caller syncs before using tmp again.
template <class A>
using BlockReduceOf = cub::BlockReduce<A, kThreads>;

template <class T, int KIND>
__global__ void __launch_bounds__(kThreads) reduce_kernel(Runs r, const T* in, T* out, acc_t<T> init, double scale,
                                                          Combine<KIND> op) {
  using A = acc_t<T>;
  __shared__ typename BlockReduceOf<A>::TempStorage tmp;
  for (int64_t o = blockIdx.x; o < r.nkept; o += gridDim.x) {
    const T* p = in + kept_offset(r, o);
    A acc = init;
    for (int64_t j = threadIdx.x; j < r.nred; j += kThreads) acc = op(acc, A(load(p[red_offset(r, j)])));
    A v = BlockReduceOf<A>(tmp).Reduce(acc, op);
    if (threadIdx.x == 0) {
      if constexpr (KIND == kSum) {
        v = v * A(scale);  // integers: an integer scale, as on the CPU
      }
      out[o] = store<T>(v);
    }
    __syncthreads();  // tmp is reused for the next output
  }
}

// One thread per output, walking its inputs in order: for many outputs of
// few inputs each (a block per output would leave most threads idle).
template <class T, int KIND>
__global__ void reduce_per_thread_kernel(Runs r, const T* in, T* out, acc_t<T> init, double scale,
                                         Combine<KIND> op) {
  using A = acc_t<T>;
  for (int64_t o = global_index(); o < r.nkept; o += global_stride()) {
    const T* p = in + kept_offset(r, o);
    A acc = init;
    for (int64_t j = 0; j < r.nred; ++j) acc = op(acc, A(load(p[red_offset(r, j)])));
    if constexpr (KIND == kSum) acc = acc * A(scale);
    out[o] = store<T>(acc);
  }
}

// Long reductions into few outputs run in two passes through the
// workspace: pass 1 has `parts` blocks per output, each writing a partial
// (in the accumulator type) to ws[o * parts + b]; pass 2 combines them, a
// warp per output. Up to 1024 parts of 256 threads per output: about one
// full wave of an A100 or H100 (108 or 132 multiprocessors holding 8 such
// blocks each) for a single output; the workspace stays under 512 KiB.
constexpr int64_t kSplitMinRed = 1 << 16, kSplitMaxKept = 64, kSplitMaxParts = 1024;

// The number of partials per output, or 0 when one pass is better.
int64_t split_parts(const flx_reduce_desc& d) {
  if (d.op < FLX_REDUCE_SUM || d.op > FLX_REDUCE_MIN || d.nred < kSplitMinRed || d.nkept > kSplitMaxKept) return 0;
  const int64_t parts = d.nred / (16 * kThreads);
  return parts < kSplitMaxParts ? parts : kSplitMaxParts;
}

template <class T, int KIND>
__global__ void __launch_bounds__(kThreads) reduce_split_kernel(Runs r, const T* in, acc_t<T>* ws, acc_t<T> init,
                                                                int64_t parts, Combine<KIND> op) {
  using A = acc_t<T>;
  __shared__ typename BlockReduceOf<A>::TempStorage tmp;
  const int64_t o = blockIdx.y, b = blockIdx.x;
  const T* p = in + kept_offset(r, o);
  A acc = init;
  for (int64_t j = b * kThreads + threadIdx.x; j < r.nred; j += parts * kThreads)
    acc = op(acc, A(load(p[red_offset(r, j)])));
  const A v = BlockReduceOf<A>(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) ws[o * parts + b] = v;
}

// One warp (block of 32 threads) per output.
template <class T, int KIND>
__global__ void __launch_bounds__(32) reduce_finish_kernel(const acc_t<T>* ws, T* out, int64_t parts, acc_t<T> init,
                                                           double scale, Combine<KIND> op) {
  using A = acc_t<T>;
  using WarpReduce = cub::WarpReduce<A>;
  __shared__ typename WarpReduce::TempStorage tmp;
  const int64_t o = blockIdx.x;
  A acc = init;
  for (int64_t b = threadIdx.x; b < parts; b += 32) acc = op(acc, ws[o * parts + b]);
  A v = WarpReduce(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) {
    if constexpr (KIND == kSum) v = v * A(scale);
    out[o] = store<T>(v);
  }
}

// argmax/argmin candidates: a value (in the compute type) and its index
// along the run. better() picks the first NaN, else the first extremum:
// a NaN beats a number, between NaNs or equal numbers the lower index
// wins. That is a total order on distinct indices, so combining in any
// order gives what the CPU's left-to-right scan gives.
template <class C>
struct ArgPair {
  C v;
  int64_t i;
};
template <class C>
struct ArgBetter {
  bool is_max;
  __device__ __forceinline__ ArgPair<C> operator()(const ArgPair<C>& a, const ArgPair<C>& b) const {
    const bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (is_max ? b.v > a.v : b.v < a.v) ? b : a;
  }
};

// One thread per output, scanning its run: for many short runs.
template <class T>
__global__ void arg_kernel(Runs r, const T* in, int64_t* out, bool is_max) {
  for (int64_t o = global_index(); o < r.nkept; o += global_stride()) {
    const T* p = in + kept_offset(r, o);
    const int64_t len = r.rext[0], rs = r.rstr[0];
    int64_t best = 0;
    compute_t<T> bv = load(p[0]);
    for (int64_t j = 1; j < len && bv == bv; ++j) {
      const compute_t<T> v = load(p[j * rs]);
      if (is_max ? (v > bv || v != v) : (v < bv || v != v)) {
        bv = v;
        best = j;
      }
    }
    out[o] = best;
  }
}

// One block per output: each thread the best of its strided share, then
// CUB's block reduction with better(). Threads past the run's end (len <
// kThreads) hold nothing and are left out (num_valid).
template <class T>
__global__ void __launch_bounds__(kThreads) arg_block_kernel(Runs r, const T* in, int64_t* out, bool is_max) {
  using C = compute_t<T>;
  using BlockReduce = cub::BlockReduce<ArgPair<C>, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const ArgBetter<C> better{is_max};
  const int64_t len = r.rext[0], rs = r.rstr[0];
  const int valid = len < kThreads ? int(len) : kThreads;
  for (int64_t o = blockIdx.x; o < r.nkept; o += gridDim.x) {
    const T* p = in + kept_offset(r, o);
    ArgPair<C> acc{C(), -1};
    if (int64_t(threadIdx.x) < len) {
      acc = ArgPair<C>{load(p[int64_t(threadIdx.x) * rs]), int64_t(threadIdx.x)};
      for (int64_t j = threadIdx.x + kThreads; j < len; j += kThreads) acc = better(acc, ArgPair<C>{load(p[j * rs]), j});
    }
    const ArgPair<C> v = BlockReduce(tmp).Reduce(acc, better, valid);
    if (threadIdx.x == 0) out[o] = v.i;
    __syncthreads();  // tmp is reused for the next output
  }
}

// Which argmax/argmin kernel: as launch() chooses for the other reductions.
bool arg_per_thread(int64_t nkept, int64_t len) { return len <= 32 || (nkept >= 8192 && len <= 4096); }

// Where a reduction starts, as on the CPU: -Inf/Inf for floating dtypes (a
// slice of all -Inf gives -Inf; lowest() would leave Float64 at -1.8e308),
// the accumulator's extremes for Bool (an empty one gives true), the dtype's
// for integers.
template <class T>
acc_t<T> initial(int op) {
  using A = acc_t<T>;
  const bool is_max = op == FLX_REDUCE_MAX;
  if (op == FLX_REDUCE_SUM) return A(0);
  if constexpr (is_float_v<T>)
    return is_max ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
  else if constexpr (std::is_same_v<T, bool>)  // the CPU accumulates Bool in Int64 too
    return is_max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  else return is_max ? A(std::numeric_limits<T>::lowest()) : A(std::numeric_limits<T>::max());
}

// KIND kSum for SUM, kExtremum for MAX and MIN.
template <class T, int KIND>
void launch(const Runs& r, const flx_reduce_desc& d, cudaStream_t st) {
  const Combine<KIND> op{d.op == FLX_REDUCE_MAX};
  const acc_t<T> init = initial<T>(d.op);
  const T* in = reinterpret_cast<const T*>(addr(d.in));
  T* out = reinterpret_cast<T*>(addr(d.out));
  const int64_t parts = split_parts(d);
  if (parts > 1 && d.workspace.buf && d.workspace_bytes >= uint64_t(d.nkept * parts) * sizeof(acc_t<T>)) {
    auto* ws = reinterpret_cast<acc_t<T>*>(addr(d.workspace));
    reduce_split_kernel<T, KIND><<<dim3(unsigned(parts), unsigned(d.nkept)), kThreads, 0, st>>>(r, in, ws, init,
                                                                                                parts, op);
    reduce_finish_kernel<T, KIND><<<unsigned(d.nkept), 32, 0, st>>>(ws, out, parts, init, d.scale, op);
    return;
  }
  if (r.nred <= 32 || (r.nkept >= 8192 && r.nred <= 4096)) {
    reduce_per_thread_kernel<T, KIND><<<blocks_for(r.nkept), 256, 0, st>>>(r, in, out, init, d.scale, op);
    return;
  }
  // a block per output, looping over outputs past 32 blocks per multiprocessor
  reduce_kernel<T, KIND><<<blocks_for(r.nkept, 1), kThreads, 0, st>>>(r, in, out, init, d.scale, op);
}

}  // namespace

int reduce_workspace(void*, int, const flx_reduce_desc* d, uint64_t* bytes) {
  const int64_t parts = split_parts(*d);
  static_assert(sizeof(acc_t<float>) == 8 && sizeof(acc_t<int32_t>) == 8, "the accumulators are 8 bytes");
  *bytes = parts > 1 ? uint64_t(d->nkept * parts) * 8u : 0u;
  return FLX_OK;
}

int reduce(void*, int dev, const flx_reduce_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "reduce")) return e;
  if (d->nkept_runs < 0 || d->nkept_runs > FLX_MAX_DIMS || d->nred_runs < 0 || d->nred_runs > FLX_MAX_DIMS)
    return fail(FLX_ERR_INVALID_ARGUMENT, "reduce: run counts outside 0.." + std::to_string(FLX_MAX_DIMS));
  if (d->nkept == 0) return FLX_OK;
  Runs r{};
  r.nk = d->nkept_runs;
  r.nr = d->nred_runs;
  for (int k = 0; k < r.nk; ++k) r.kext[k] = d->kept_extent[k], r.kstr[k] = d->kept_stride[k];
  for (int k = 0; k < r.nr; ++k) r.rext[k] = d->red_extent[k], r.rstr[k] = d->red_stride[k];
  r.nkept = d->nkept;
  r.nred = d->nred;
  const bool arg = d->op == FLX_REDUCE_ARGMAX || d->op == FLX_REDUCE_ARGMIN;
  if (arg && (r.nr != 1 || r.rext[0] < 1))
    return fail(FLX_ERR_INVALID_ARGUMENT, "reduce: argmax/argmin take exactly one reduced run of extent >= 1, got " +
                                              std::to_string(r.nr) + " runs");
  int status = FLX_OK;
  auto body = [&](auto tag) {
        using T = decltype(tag);
        switch (d->op) {
          case FLX_REDUCE_SUM:
            if constexpr (std::is_same_v<T, bool>)
              status = fail(FLX_ERR_UNSUPPORTED, "reduce: sum of Bool; convert to an integer dtype first");
            else launch<T, kSum>(r, *d, st);
            break;
          case FLX_REDUCE_MAX:
          case FLX_REDUCE_MIN: launch<T, kExtremum>(r, *d, st); break;
          case FLX_REDUCE_ARGMAX:
          case FLX_REDUCE_ARGMIN:
            if (arg_per_thread(r.nkept, r.rext[0]))
              arg_kernel<T><<<blocks_for(r.nkept), 256, 0, st>>>(r, reinterpret_cast<const T*>(addr(d->in)),
                                                                 reinterpret_cast<int64_t*>(addr(d->out)),
                                                                 d->op == FLX_REDUCE_ARGMAX);
            else
              arg_block_kernel<T><<<blocks_for(r.nkept, 1), kThreads, 0, st>>>(
                  r, reinterpret_cast<const T*>(addr(d->in)), reinterpret_cast<int64_t*>(addr(d->out)),
                  d->op == FLX_REDUCE_ARGMAX);
            break;
          default:
            status = fail(FLX_ERR_UNSUPPORTED, "reduce: unknown op code " + std::to_string(d->op) +
                                                   " (expected SUM, MAX, MIN, ARGMAX or ARGMIN)");
        }
  };
  const bool ok = dispatch_dtype(d->dtype, body);
  if (!ok) return dtype_error("reduce", d->dtype);
  if (status) return status;
  return launched("reduce kernel");
}

}  // namespace flx_cuda

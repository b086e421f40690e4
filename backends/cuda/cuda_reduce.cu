// Reductions (sum/max/min over the descriptor's canonical runs) and
// argmax/argmin along one run. Long reductions run one block per output
// element, its threads striding over the reduced elements, then a tree in
// shared memory; many outputs of few elements each run one thread per
// output; long reductions into few outputs split over many blocks, through
// the workspace (reduce_workspace). Floating sums (Float16 and BFloat16 included) accumulate in
// double, integers in Int64 (wrapped to the dtype at the end), as on the CPU.
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

enum Kind { kSum, kMax, kMin };

template <int KIND, class A>
__device__ __forceinline__ A combine(A a, A b) {
  if constexpr (KIND == kSum) return a + b;
  else if constexpr (KIND == kMax) return b > a || b != b ? b : a;  // NaN wins
  else return b < a || b != b ? b : a;
}

constexpr int kThreads = 256;

template <class T, int KIND>
__global__ void reduce_kernel(Runs r, const T* in, T* out, acc_t<T> init, double scale) {
  using A = acc_t<T>;
  __shared__ A part[kThreads];
  for (int64_t o = blockIdx.x; o < r.nkept; o += gridDim.x) {
    const T* p = in + kept_offset(r, o);
    A acc = init;
    for (int64_t j = threadIdx.x; j < r.nred; j += blockDim.x) acc = combine<KIND>(acc, A(load(p[red_offset(r, j)])));
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (int(threadIdx.x) < w) part[threadIdx.x] = combine<KIND>(part[threadIdx.x], part[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      A v = part[0];
      if constexpr (KIND == kSum) {
        v = v * A(scale);  // integers: an integer scale, as on the CPU
      }
      out[o] = store<T>(v);
    }
    __syncthreads();
  }
}

// One thread per output, walking its inputs in order: for many outputs of
// few inputs each (a block per output would leave most threads idle).
template <class T, int KIND>
__global__ void reduce_per_thread_kernel(Runs r, const T* in, T* out, acc_t<T> init, double scale) {
  using A = acc_t<T>;
  for (int64_t o = global_index(); o < r.nkept; o += global_stride()) {
    const T* p = in + kept_offset(r, o);
    A acc = init;
    for (int64_t j = 0; j < r.nred; ++j) acc = combine<KIND>(acc, A(load(p[red_offset(r, j)])));
    if constexpr (KIND == kSum) acc = acc * A(scale);
    out[o] = store<T>(acc);
  }
}

// Long reductions into few outputs run in two passes through the
// workspace: pass 1 has `parts` blocks per output, each writing a partial
// (in the accumulator type) to ws[o * parts + b]; pass 2 combines them.
constexpr int64_t kSplitMinRed = 1 << 16, kSplitMaxKept = 64, kSplitMaxParts = 256;

// The number of partials per output, or 0 when one pass is better.
int64_t split_parts(const flx_reduce_desc& d) {
  if (d.op > FLX_REDUCE_MIN || d.nred < kSplitMinRed || d.nkept > kSplitMaxKept) return 0;
  const int64_t parts = d.nred / (16 * kThreads);
  return parts < kSplitMaxParts ? parts : kSplitMaxParts;
}

template <class T, int KIND>
__global__ void reduce_split_kernel(Runs r, const T* in, acc_t<T>* ws, acc_t<T> init, int64_t parts) {
  using A = acc_t<T>;
  __shared__ A part[kThreads];
  const int64_t o = blockIdx.y, b = blockIdx.x;
  const T* p = in + kept_offset(r, o);
  A acc = init;
  for (int64_t j = b * kThreads + threadIdx.x; j < r.nred; j += parts * kThreads)
    acc = combine<KIND>(acc, A(load(p[red_offset(r, j)])));
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) part[threadIdx.x] = combine<KIND>(part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) ws[o * parts + b] = part[0];
}

template <class T, int KIND>
__global__ void reduce_finish_kernel(const acc_t<T>* ws, T* out, int64_t nkept, int64_t parts, acc_t<T> init,
                                     double scale) {
  using A = acc_t<T>;
  for (int64_t o = global_index(); o < nkept; o += global_stride()) {
    A acc = init;
    for (int64_t b = 0; b < parts; ++b) acc = combine<KIND>(acc, ws[o * parts + b]);
    if constexpr (KIND == kSum) acc = acc * A(scale);
    out[o] = store<T>(acc);
  }
}

// One thread per output: the first NaN, else the first extremum.
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

// The value an empty reduction writes, as the CPU's: the accumulator type's
// extreme for floating dtypes (it becomes -Inf/Inf) and Bool (true), the
// dtype's for integers.
template <class T, int KIND>
acc_t<T> initial() {
  using A = acc_t<T>;
  if constexpr (KIND == kSum) return A(0);
  else if constexpr (is_float_v<T>) return KIND == kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  else if constexpr (std::is_same_v<T, bool>)  // the CPU accumulates Bool in Int64 too
    return KIND == kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  else return KIND == kMax ? A(std::numeric_limits<T>::lowest()) : A(std::numeric_limits<T>::max());
}

template <class T, int KIND>
void launch(const Runs& r, const flx_reduce_desc& d, cudaStream_t st) {
  const int64_t parts = split_parts(d);
  if (parts > 1 && d.workspace.buf && d.workspace_bytes >= uint64_t(d.nkept * parts) * sizeof(acc_t<T>)) {
    auto* ws = reinterpret_cast<acc_t<T>*>(addr(d.workspace));
    reduce_split_kernel<T, KIND><<<dim3(unsigned(parts), unsigned(d.nkept)), kThreads, 0, st>>>(
        r, reinterpret_cast<const T*>(addr(d.in)), ws, initial<T, KIND>(), parts);
    reduce_finish_kernel<T, KIND><<<1, 64, 0, st>>>(ws, reinterpret_cast<T*>(addr(d.out)), d.nkept, parts,
                                                    initial<T, KIND>(), d.scale);
    return;
  }
  if (r.nred <= 32 || (r.nkept >= 8192 && r.nred <= 4096)) {
    reduce_per_thread_kernel<T, KIND><<<blocks_for(r.nkept), 256, 0, st>>>(
        r, reinterpret_cast<const T*>(addr(d.in)), reinterpret_cast<T*>(addr(d.out)), initial<T, KIND>(), d.scale);
    return;
  }
  const unsigned grid = unsigned(r.nkept < 65535 * 4 ? r.nkept : 65535 * 4);
  reduce_kernel<T, KIND><<<grid, kThreads, 0, st>>>(r, reinterpret_cast<const T*>(addr(d.in)),
                                                     reinterpret_cast<T*>(addr(d.out)), initial<T, KIND>(), d.scale);
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
          case FLX_REDUCE_MAX: launch<T, kMax>(r, *d, st); break;
          case FLX_REDUCE_MIN: launch<T, kMin>(r, *d, st); break;
          case FLX_REDUCE_ARGMAX:
          case FLX_REDUCE_ARGMIN:
            arg_kernel<T><<<blocks_for(r.nkept), 256, 0, st>>>(r, reinterpret_cast<const T*>(addr(d->in)),
                                                               reinterpret_cast<int64_t*>(addr(d->out)),
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

// CPU elementwise map with broadcasting: one templated loop per (dtype, op).
// The op bodies come from the op list (include/flx/backend_ops.h) and the
// element functions from include/flx/backend_elem.h, the same code the
// OpenCL and CUDA kernels compile. Descriptors arrive canonical (dims
// coalesced), so the common cases (same shape, bias over columns, scalar
// operand) run as tight, vectorisable inner loops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend_common/map_op_info.hpp"
#include "cpu_common.hpp"
#include "cpu_vector_math.hpp"

namespace flx::cpu_backend {
namespace elem {
using std::cos;
using std::erf;
using std::log;
using std::log1p;
using std::pow;
using std::sin;
using std::sqrt;
// Float32 and the halves (computed in float): cpu_vector_math.hpp's, which
// the vectorised rows below compute with too; Float64: libm's.
inline float exp(float x) { return vmath::exp1(x); }
inline double exp(double x) { return std::exp(x); }
inline float tanh(float x) { return vmath::tanh1(x); }
inline double tanh(double x) { return std::tanh(x); }
#define FLX_ELEM_FN template <class CT> inline
#define FLX_MAP_FN_PREFIX
#include "backend_common/map_functors.inc"
#undef FLX_MAP_FN_PREFIX
#undef FLX_ELEM_FN
}  // namespace elem

namespace {

// The inner loop over one row (the first canonical dim).
template <class O, int N, class F, class T>
inline void row(O* __restrict o, int64_t n, const int64_t* s, const F& f, const T* __restrict a,
                const T* __restrict b) {
  using C = compute_t<T>;
  if constexpr (N == 1) {
    if (s[0] == 1)
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i]), C()));
    else
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i * s[0]]), C()));
  } else {
    if (s[0] == 1 && s[1] == 1)
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i]), load(b[i])));
    else if (s[0] == 1 && s[1] == 0) {
      const C bv = load(b[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i]), bv));
    } else if (s[0] == 0 && s[1] == 1) {
      const C av = load(a[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(av, load(b[i])));
    } else
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i * s[0]]), load(b[i * s[1]])));
  }
}

// Where row r (of the canonical dims after the first `first`) starts in
// each of the first `count` operands: off[i] += its offset.
inline void row_offsets(const flx_map_desc& d, int64_t r, int count, int64_t* off, int first = 1) {
  for (int k = first; k < d.ndim && r; ++k) {
    const int64_t ik = r % d.shape[k];
    r /= d.shape[k];
    for (int i = 0; i < count; ++i)
      if (!d.in[i].is_scalar) off[i] += ik * d.in[i].strides[k];
  }
}

// do_row(r, lo, len) over every row of n0 elements (d's first canonical dim,
// or its first two): rows in parallel when large, a few long rows split into
// pieces.
template <class F>
void for_each_row(const flx_map_desc& d, int64_t n0, const F& do_row) {
  const int64_t rows = d.numel / n0;
  if (d.numel < 2 * parallel_grain) {
    for (int64_t r = 0; r < rows; ++r) do_row(r, 0, n0);
  } else if (rows >= 8) {
    parallel_for(rows, grain_of(n0), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) do_row(r, 0, n0);
    });
  } else {
    constexpr int64_t piece = 8192;
    const int64_t pieces = (n0 + piece - 1) / piece;
    parallel_for(rows * pieces, grain_of(piece), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t r = t / pieces, c = t % pieces;
        do_row(r, c * piece, std::min(piece, n0 - c * piece));
      }
    });
  }
}

// Rows shorter than this are walked two canonical dims at a time.
constexpr int64_t kShortRow = 16;

// The ops with a vectorised Float32 row (cpu_vector_math.hpp): on
// contiguous rows they take it, with the same bits as the functor's.
template <class F>
constexpr bool has_vector_row =
    std::is_same_v<F, elem::Op_EXP> || std::is_same_v<F, elem::Op_TANH> || std::is_same_v<F, elem::Op_SIGMOID> ||
    std::is_same_v<F, elem::Op_GELU> || std::is_same_v<F, elem::Op_GELU_GRAD>;

template <class F>
void vector_row(float* o, int64_t n, const float* a, const float* b) {
  using vmath::Unary;
  if constexpr (std::is_same_v<F, elem::Op_GELU_GRAD>) vmath::row_gelu_grad(o, a, b, n);
  else
    vmath::row(std::is_same_v<F, elem::Op_EXP>      ? Unary::exp
               : std::is_same_v<F, elem::Op_TANH>   ? Unary::tanh
               : std::is_same_v<F, elem::Op_SIGMOID> ? Unary::sigmoid
                                                     : Unary::gelu,
               o, a, n);
}

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BHalf>;

// A row of Float16 or BFloat16 whose operands are contiguous or one value
// (stride 1 or 0) through Float32 rows, a block at a time: widened, the
// Float32 row (the vector row above where the op has one, else the
// functor's loop, which the compiler vectorises in float), rounded. The
// halves compute in float and round once, so these are the functor's bits
// too. The functor alone, element by element through the conversions, made
// GELU three quarters of a BFloat16 GPT's step (a lane of the vector code
// without its vector unit) and relu and its gradient a tenth of a BFloat16
// CNN's.
template <class F, int N, class T>
void half_block_row(T* o, int64_t n, const int64_t* s, const F& f, const T* a, const T* b) {
  constexpr int64_t kBlock = 256;
  float fa[kBlock], fb[kBlock], fo[kBlock];
  const int64_t unit[2] = {s[0] == 0 ? 0 : 1, N == 2 && s[1] == 0 ? 0 : 1};
  const float a0 = load(a[0]), b0 = N == 2 ? load(b[0]) : 0.f;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    if (unit[0]) {
      for (int64_t j = 0; j < m; ++j) fa[j] = load(a[i + j]);
    } else {
      fa[0] = a0;
    }
    if (N == 2 && unit[1]) {
      for (int64_t j = 0; j < m; ++j) fb[j] = load(b[i + j]);
    } else {
      fb[0] = b0;
    }
    if constexpr (has_vector_row<F>) vector_row<F>(fo, m, fa, fb);  // (unary, or both operands rows)
    else row<float, N>(fo, m, unit, f, fa, fb);
    for (int64_t j = 0; j < m; ++j) o[i + j] = store<T>(fo[j]);
  }
}

// Run a unary or binary op over the canonical descriptor; rows in parallel
// when large.
template <class T, class O, int N, class F>
void run(const flx_map_desc& d, const F& f) {
  T scalars[2];
  const T* base[2] = {nullptr, nullptr};
  for (int i = 0; i < N; ++i) {
    if (d.in[i].is_scalar) {
      scalars[i] = cast_element<T>(d.in[i].scalar);
      base[i] = &scalars[i];
    } else {
      base[i] = reinterpret_cast<const T*>(addr(d.in[i].mem));
    }
  }
  if (N == 1) base[1] = base[0];
  O* out = reinterpret_cast<O*>(addr(d.out));
  const int64_t n0 = d.shape[0];
  int64_t s[2];
  for (int i = 0; i < 2; ++i) s[i] = i < N && !d.in[i].is_scalar ? d.in[i].strides[0] : 0;
  if (n0 < kShortRow && d.ndim >= 2) {
    // Short rows (a nearest upsampling's repeat of 2, a broadcast over a
    // small first dim) go two canonical dims at a time: the row's index
    // arithmetic is paid once per shape[0]·shape[1] elements.
    const int64_t n1 = d.shape[1];
    int64_t s1[2];
    for (int i = 0; i < 2; ++i) s1[i] = i < N && !d.in[i].is_scalar ? d.in[i].strides[1] : 0;
    auto do_plane = [&](int64_t r, int64_t lo, int64_t len) {
      int64_t off[2] = {0, 0};
      row_offsets(d, r, N, off, 2);
      O* o = out + r * n0 * n1;
      int64_t j1 = lo / n0, j0 = lo % n0;
      for (int64_t e = lo, end = lo + len; e < end; ++j1, j0 = 0) {
        const int64_t seg = std::min(n0 - j0, end - e);
        const T* a = base[0] + off[0] + j1 * s1[0] + j0 * s[0];
        if (N == 1 && s[0] == 0) {  // each element repeated n0 times
          const O v = store<O>(f(load(*a), compute_t<T>()));
          for (int64_t k = 0; k < seg; ++k) o[e + k] = v;
        } else {
          row<O, N>(o + e, seg, s, f, a, base[1] + off[1] + j1 * s1[1] + j0 * s[1]);
        }
        e += seg;
      }
    };
    return for_each_row(d, n0 * n1, do_plane);
  }
  auto do_row = [&](int64_t r, int64_t lo, int64_t len) {
    int64_t off[2] = {0, 0};
    O* o = out + r * n0 + lo;  // the output is contiguous
    row_offsets(d, r, N, off);
    const T* a = base[0] + off[0] + lo * s[0];
    const T* b = base[1] + off[1] + lo * s[1];
    if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float> && has_vector_row<F>) {
      if (s[0] == 1 && (N == 1 || s[1] == 1)) return vector_row<F>(o, len, a, b);
    }
    if constexpr (is_half_v<T> && std::is_same_v<O, T>) {
      const bool rows = has_vector_row<F> ? s[0] == 1 && (N == 1 || s[1] == 1)
                                          : (s[0] == 1 || s[0] == 0) && (N == 1 || s[1] == 1 || s[1] == 0);
      if (rows) return half_block_row<F, N>(o, len, s, f, a, b);
    }
    row<O, N>(o, len, s, f, a, b);
  };
  for_each_row(d, n0, do_row);
}

// WHERE(cond, a, b): its own loop, since the condition is Bool storage.
// Rows of the first canonical dim, as run's: an attention's causal mask,
// (t, t) broadcast over heads and batch, is one contiguous row per matrix.
template <class T>
int run_where(const flx_map_desc& d) {
  const void* mem[3];
  T scalar[3];
  for (int i = 0; i < 3; ++i) {
    mem[i] = d.in[i].is_scalar ? nullptr : addr(d.in[i].mem);
    scalar[i] = cast_element<T>(d.in[i].scalar);
  }
  const bool sc = d.in[0].scalar != 0;
  T* out = reinterpret_cast<T*>(addr(d.out));
  const int64_t n0 = d.shape[0];
  int64_t s[3];
  for (int i = 0; i < 3; ++i) s[i] = d.in[i].is_scalar ? 0 : d.in[i].strides[0];
  // elements [lo, lo + len) of row r
  auto do_row = [&](int64_t r, int64_t lo, int64_t len) {
    int64_t off[3] = {0, 0, 0};
    T* o = out + r * n0 + lo;
    row_offsets(d, r, 3, off);
    const bool* c = mem[0] ? static_cast<const bool*>(mem[0]) + off[0] + lo * s[0] : &sc;
    const T* a = mem[1] ? static_cast<const T*>(mem[1]) + off[1] + lo * s[1] : &scalar[1];
    const T* b = mem[2] ? static_cast<const T*>(mem[2]) + off[2] + lo * s[2] : &scalar[2];
    if (s[0] == 1 && s[1] == 1 && s[2] == 0) {  // a masked fill: where(mask, x, -inf)
      const T bv = *b;
      for (int64_t j = 0; j < len; ++j) o[j] = c[j] ? a[j] : bv;
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {  // its gradient, where(mask, 0, dy), and kin
      const T av = *a;
      for (int64_t j = 0; j < len; ++j) o[j] = c[j] ? av : b[j];
    } else {
      for (int64_t j = 0; j < len; ++j) o[j] = c[j * s[0]] ? a[j * s[1]] : b[j * s[2]];
    }
  };
  for_each_row(d, n0, do_row);
  return FLX_OK;
}

template <class T, class Op>
int run_op(const flx_map_desc& d, int code) {
  using map_ops::OpClass;
  constexpr bool takes =
      Op::cls == OpClass::All || Op::cls == OpClass::Cmp || Op::cls == OpClass::Select ||
      (Op::cls == OpClass::Num && !std::is_same_v<T, bool>) || (Op::cls == OpClass::Float && is_float_v<T>);
  if constexpr (!takes) {
    return fail(FLX_ERR_UNSUPPORTED, std::string("map: ") + map_ops::info(code).name + " does not take " +
                                         std::string(dtype_name(DType(d.in_dtype))) +
                                         (Op::cls == OpClass::Float ? " (it needs a floating dtype)" : ""));
  } else if constexpr (Op::cls == OpClass::Select) {
    return run_where<T>(d);
  } else {
    Op op;
    op.alpha = d.alpha;
    op.beta = d.beta;
    using O = std::conditional_t<Op::cls == OpClass::Cmp, bool, T>;
    run<T, O, Op::arity == 1 ? 1 : 2>(d, op);
    return FLX_OK;
  }
}

template <class T>
int dispatch_op(const flx_map_desc& d) {
  switch (d.op) {
#define FLX_CPU_CASE_(NAME, CODE, ARITY, CLASS, GRAD, BODY) \
  case CODE:                                                \
    return run_op<T, elem::Op_##NAME>(d, CODE);
    FLX_MAP_OPS(FLX_CPU_CASE_)
#undef FLX_CPU_CASE_
  }
  return fail(FLX_ERR_UNSUPPORTED, "map: unknown op code " + std::to_string(d.op));
}

}  // namespace

int map(void*, int, const flx_map_desc* d, flx_stream) {
  if (d->ndim < 1 || d->ndim > FLX_MAX_DIMS) return fail(FLX_ERR_INVALID_ARGUMENT, "map: bad ndim");
  int status = FLX_OK;
  if (!dispatch_dtype(d->in_dtype, [&](auto tag) { status = dispatch_op<decltype(tag)>(*d); }))
    return fail(FLX_ERR_INVALID_ARGUMENT, "map: unknown dtype " + std::to_string(d->in_dtype));
  return status;
}

}  // namespace flx::cpu_backend

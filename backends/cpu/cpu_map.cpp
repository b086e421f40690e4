// CPU elementwise map with broadcasting: one templated loop per (dtype, op),
// dims coalesced first so the common cases (same shape, bias over columns,
// scalar operand) run as tight, vectorisable inner loops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>

#include "cpu_common.hpp"

namespace flx::cpu_backend {
namespace {

template <class C>
inline C sigm(C x) {
  if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

// Each op: `static constexpr bool ints` says whether it accepts integer and
// Bool storage; `cmp` ops write Bool.
struct OpBase {
  double alpha = 0, beta = 0;
  static constexpr bool ints = false;
  static constexpr bool cmp = false;
};
#define FLX_UNARY(NAME, INTS, EXPR)                  \
  struct NAME : OpBase {                             \
    static constexpr bool ints = INTS;               \
    template <class C>                               \
    C operator()(C x) const {                        \
      [[maybe_unused]] const C a = C(alpha), b = C(beta); \
      return EXPR;                                   \
    }                                                \
  };
#define FLX_BINARY(NAME, INTS, EXPR)                 \
  struct NAME : OpBase {                             \
    static constexpr bool ints = INTS;               \
    template <class C>                               \
    C operator()(C x, C y) const {                   \
      [[maybe_unused]] const C a = C(alpha), b = C(beta); \
      return EXPR;                                   \
    }                                                \
  };
#define FLX_COMPARE(NAME, EXPR)                      \
  struct NAME : OpBase {                             \
    static constexpr bool ints = true;               \
    static constexpr bool cmp = true;                \
    template <class C>                               \
    bool operator()(C x, C y) const {                \
      return EXPR;                                   \
    }                                                \
  };

constexpr double kGelu = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kSqrtHalf = 0.7071067811865476;   // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

template <class C>
C abs_of(C x) {
  if constexpr (std::is_unsigned_v<C>) return x;
  else return x < C(0) ? C(-x) : x;
}
template <class C>
C sign_of(C x) {
  return C((C(0) < x) - (x < C(0)));
}
template <class C>
C gelu_grad(C x) {
  C u = C(kGelu) * (x + C(0.044715) * x * x * x);
  C t = std::tanh(u);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * C(kGelu) * (C(1) + C(3 * 0.044715) * x * x);
}

FLX_UNARY(Copy, true, x)
FLX_UNARY(Neg, true, C(-x))
FLX_UNARY(Abs, true, abs_of(x))
FLX_UNARY(Sign, true, sign_of(x))
FLX_UNARY(Square, true, C(x * x))
FLX_UNARY(Sqrt, false, std::sqrt(x))
FLX_UNARY(Exp, false, std::exp(x))
FLX_UNARY(Log, false, std::log(x))
FLX_UNARY(Sigmoid, false, sigm(x))
FLX_UNARY(Tanh, false, std::tanh(x))
// NaN propagates through relu, max and min, as in Julia and PyTorch
// (x != x is false for integers).
FLX_UNARY(Relu, true, x > C(0) || x != x ? x : C(0))
FLX_UNARY(Gelu, false, C(0.5) * x * (C(1) + std::tanh(C(kGelu) * (x + C(0.044715) * x * x * x))))
FLX_UNARY(LeakyRelu, false, x > C(0) ? x : a * x)
FLX_UNARY(Elu, false, x >= C(0) ? x : a * (std::exp(x) - C(1)))
FLX_UNARY(Swish, false, x * sigm(x))
FLX_UNARY(Softplus, false, std::log1p(std::exp(-abs_of(x))) + std::max(x, C(0)))
FLX_UNARY(Not, true, C(!x))
FLX_UNARY(Clamp, true, std::min(std::max(x, a), b))
FLX_UNARY(Recip, false, C(1) / x)
FLX_UNARY(GeluErf, false, C(0.5) * x * (C(1) + std::erf(x * C(kSqrtHalf))))

FLX_BINARY(Add, true, C(x + y))
FLX_BINARY(Sub, true, C(x - y))
FLX_BINARY(Mul, true, C(x * y))
FLX_BINARY(Div, false, x / y)
FLX_BINARY(Pow, false, std::pow(x, y))
FLX_BINARY(Max, true, y > x || y != y ? y : x)
FLX_BINARY(Min, true, y < x || y != y ? y : x)
FLX_BINARY(Xlogy, false, x == C(0) ? C(0) : C(x * std::log(y)))
FLX_COMPARE(Eq, x == y)
FLX_COMPARE(Ne, x != y)
FLX_COMPARE(Lt, x < y)
FLX_COMPARE(Le, x <= y)
FLX_COMPARE(Gt, x > y)
FLX_COMPARE(Ge, x >= y)

FLX_BINARY(ReluGrad, false, x > C(0) ? y : C(0))
FLX_BINARY(GeluGrad, false, y * gelu_grad(x))
FLX_BINARY(LeakyReluGrad, false, x > C(0) ? y : a * y)
FLX_BINARY(EluGrad, false, x >= C(0) ? y : y * a * std::exp(x))
FLX_BINARY(SwishGrad, false, y * (sigm(x) + x * sigm(x) * (C(1) - sigm(x))))
FLX_BINARY(SoftplusGrad, false, y * sigm(x))
FLX_BINARY(SigmoidGrad, false, y * x * (C(1) - x))
FLX_BINARY(TanhGrad, false, y * (C(1) - x * x))
FLX_BINARY(AbsGrad, false, y * sign_of(x))
FLX_BINARY(ClampGrad, false, (x >= a && x <= b) ? y : C(0))
FLX_BINARY(GeluErfGrad, false,
           y * (C(0.5) * (C(1) + std::erf(x * C(kSqrtHalf))) + x * C(kInvSqrt2Pi) * std::exp(C(-0.5) * x * x)))

// A plan: coalesced dims and per-operand element strides (last = output).
template <int N>
struct Plan {
  int nd = 0;
  int64_t shape[FLX_MAX_DIMS];
  int64_t st[N + 1][FLX_MAX_DIMS];
};

template <int N>
Plan<N> make_plan(const flx_map_desc& d) {
  Plan<N> p;
  int64_t out_stride = 1;
  for (int k = 0; k < d.ndim; ++k) {
    if (d.shape[k] == 1) continue;  // size-1 dims contribute nothing
    p.shape[p.nd] = d.shape[k];
    for (int i = 0; i < N; ++i) p.st[i][p.nd] = d.in[i].is_scalar ? 0 : d.in[i].strides[k];
    p.st[N][p.nd] = out_stride;
    out_stride *= d.shape[k];
    ++p.nd;
  }
  // Merge dim j into j-1 when every operand continues contiguously.
  int w = 0;
  for (int j = 1; j < p.nd; ++j) {
    bool merge = true;
    for (int i = 0; i <= N; ++i) merge &= p.st[i][j] == p.st[i][w] * p.shape[w];
    if (merge) {
      p.shape[w] *= p.shape[j];
    } else {
      ++w;
      p.shape[w] = p.shape[j];
      for (int i = 0; i <= N; ++i) p.st[i][w] = p.st[i][j];
    }
  }
  if (p.nd > 0) p.nd = w + 1;
  if (p.nd == 0) {  // a single element
    p.nd = 1;
    p.shape[0] = 1;
    for (int i = 0; i <= N; ++i) p.st[i][0] = 0;
  }
  return p;
}

// The inner loop over one row of the plan's first dim.
template <class O, int N, class F, class... T>
inline void row(O* __restrict o, int64_t n, const int64_t* s, F& f, const T* __restrict... p) {
  if constexpr (N == 1) {
    const auto* a = std::get<0>(std::tuple<const T*...>(p...));
    if (s[0] == 1)
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i])));
    else
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i * s[0]])));
  } else {
    auto run = [&](auto* a, auto* b) {
      if (s[0] == 1 && s[1] == 1)
        for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i]), load(b[i])));
      else if (s[0] == 1 && s[1] == 0) {
        auto bv = load(b[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i]), bv));
      } else if (s[0] == 0 && s[1] == 1) {
        auto av = load(a[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(av, load(b[i])));
      } else
        for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(a[i * s[0]]), load(b[i * s[1]])));
    };
    run(p...);
  }
}

// Run a unary or binary op over the plan; rows in parallel when large.
template <class T, class O, int N, class F>
void run(const flx_map_desc& d, F f) {
  Plan<N> p = make_plan<N>(d);
  T scalars[N];
  const T* base[N];
  for (int i = 0; i < N; ++i) {
    if (d.in[i].is_scalar) {
      scalars[i] = store<T>(static_cast<compute_t<T>>(d.in[i].scalar));
      base[i] = &scalars[i];
    } else {
      base[i] = reinterpret_cast<const T*>(addr(d.in[i].mem));
    }
  }
  O* out = reinterpret_cast<O*>(addr(d.out));
  int64_t total = 1;
  for (int k = 0; k < p.nd; ++k) total *= p.shape[k];
  int64_t n0 = p.shape[0];
  int64_t rows = total / n0;
  auto do_row = [&](int64_t r, int64_t lo, int64_t len) {
    int64_t off[N + 1] = {};
    for (int k = 1; k < p.nd && r; ++k) {
      int64_t ik = r % p.shape[k];
      r /= p.shape[k];
      for (int i = 0; i <= N; ++i) off[i] += ik * p.st[i][k];
    }
    int64_t s[N];
    for (int i = 0; i < N; ++i) s[i] = p.st[i][0];
    O* o = out + off[N] + lo;
    if constexpr (N == 1)
      row<O, 1>(o, len, s, f, base[0] + off[0] + lo * s[0]);
    else
      row<O, 2>(o, len, s, f, base[0] + off[0] + lo * s[0], base[1] + off[1] + lo * s[1]);
  };
  if (total < 2 * parallel_grain) {
    for (int64_t r = 0; r < rows; ++r) do_row(r, 0, n0);
  } else if (rows >= 8) {
    parallel_for(rows, grain_of(n0), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) do_row(r, 0, n0);
    });
  } else {  // few long rows: split them
    constexpr int64_t piece = 8192;
    int64_t pieces = (n0 + piece - 1) / piece;
    parallel_for(rows * pieces, grain_of(piece), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        int64_t r = t / pieces, c = t % pieces;
        do_row(r, c * piece, std::min(piece, n0 - c * piece));
      }
    });
  }
}

template <class T, class Op>
int run_op(const flx_map_desc& d, int arity) {
  if constexpr (!Op::ints && !is_float_v<T>) {
    return fail(FLX_ERR_UNSUPPORTED, "map: op " + std::to_string(d.op) + " needs a floating dtype");
  } else if constexpr (std::is_same_v<T, bool> && !Op::cmp) {
    if (d.op != FLX_OP_COPY && d.op != FLX_OP_NOT && d.op != FLX_OP_MAX && d.op != FLX_OP_MIN)
      return fail(FLX_ERR_UNSUPPORTED, "map: op " + std::to_string(d.op) + " on Bool");
  }
  if constexpr (is_float_v<T> || Op::ints) {
    Op op;
    op.alpha = d.alpha;
    op.beta = d.beta;
    using O = std::conditional_t<Op::cmp, bool, T>;
    if (arity == 1) {
      if constexpr (requires(compute_t<T> x) { op(x); }) run<T, O, 1>(d, op);
    } else {
      if constexpr (requires(compute_t<T> x) { op(x, x); }) run<T, O, 2>(d, op);
    }
  }
  return FLX_OK;
}

// WHERE(cond, a, b): its own loop, since the condition is Bool storage.
template <class T>
int run_where(const flx_map_desc& d) {
  int64_t total = 1;
  for (int k = 0; k < d.ndim; ++k) total *= d.shape[k];
  const T* pa = reinterpret_cast<const T*>(addr(d.in[1].mem));
  const T* pb = reinterpret_cast<const T*>(addr(d.in[2].mem));
  const bool* pc = reinterpret_cast<const bool*>(addr(d.in[0].mem));
  T sa = store<T>(static_cast<compute_t<T>>(d.in[1].scalar)), sb = store<T>(static_cast<compute_t<T>>(d.in[2].scalar));
  bool sc = d.in[0].scalar != 0;
  T* out = reinterpret_cast<T*>(addr(d.out));
  parallel_for(total, parallel_grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t r = i, oc = 0, oa = 0, ob = 0;
      for (int k = 0; k < d.ndim; ++k) {
        int64_t ik = r % d.shape[k];
        r /= d.shape[k];
        oc += ik * d.in[0].strides[k];
        oa += ik * d.in[1].strides[k];
        ob += ik * d.in[2].strides[k];
      }
      bool c = d.in[0].is_scalar ? sc : pc[oc];
      out[i] = c ? (d.in[1].is_scalar ? sa : pa[oa]) : (d.in[2].is_scalar ? sb : pb[ob]);
    }
  });
  return FLX_OK;
}

template <class T>
int dispatch_op(const flx_map_desc& d) {
  switch (d.op) {
#define FLX_CASE(CODE, OP, AR) \
  case CODE:                   \
    return run_op<T, OP>(d, AR);
    FLX_CASE(FLX_OP_COPY, Copy, 1)
    FLX_CASE(FLX_OP_NEG, Neg, 1)
    FLX_CASE(FLX_OP_ABS, Abs, 1)
    FLX_CASE(FLX_OP_SIGN, Sign, 1)
    FLX_CASE(FLX_OP_SQUARE, Square, 1)
    FLX_CASE(FLX_OP_SQRT, Sqrt, 1)
    FLX_CASE(FLX_OP_EXP, Exp, 1)
    FLX_CASE(FLX_OP_LOG, Log, 1)
    FLX_CASE(FLX_OP_SIGMOID, Sigmoid, 1)
    FLX_CASE(FLX_OP_TANH, Tanh, 1)
    FLX_CASE(FLX_OP_RELU, Relu, 1)
    FLX_CASE(FLX_OP_GELU, Gelu, 1)
    FLX_CASE(FLX_OP_LEAKYRELU, LeakyRelu, 1)
    FLX_CASE(FLX_OP_ELU, Elu, 1)
    FLX_CASE(FLX_OP_SWISH, Swish, 1)
    FLX_CASE(FLX_OP_SOFTPLUS, Softplus, 1)
    FLX_CASE(FLX_OP_NOT, Not, 1)
    FLX_CASE(FLX_OP_CLAMP, Clamp, 1)
    FLX_CASE(FLX_OP_RECIP, Recip, 1)
    FLX_CASE(FLX_OP_GELU_ERF, GeluErf, 1)
    FLX_CASE(FLX_OP_ADD, Add, 2)
    FLX_CASE(FLX_OP_SUB, Sub, 2)
    FLX_CASE(FLX_OP_MUL, Mul, 2)
    FLX_CASE(FLX_OP_DIV, Div, 2)
    FLX_CASE(FLX_OP_POW, Pow, 2)
    FLX_CASE(FLX_OP_MAX, Max, 2)
    FLX_CASE(FLX_OP_MIN, Min, 2)
    FLX_CASE(FLX_OP_XLOGY, Xlogy, 2)
    FLX_CASE(FLX_OP_EQ, Eq, 2)
    FLX_CASE(FLX_OP_NE, Ne, 2)
    FLX_CASE(FLX_OP_LT, Lt, 2)
    FLX_CASE(FLX_OP_LE, Le, 2)
    FLX_CASE(FLX_OP_GT, Gt, 2)
    FLX_CASE(FLX_OP_GE, Ge, 2)
    FLX_CASE(FLX_OP_RELU_GRAD, ReluGrad, 2)
    FLX_CASE(FLX_OP_GELU_GRAD, GeluGrad, 2)
    FLX_CASE(FLX_OP_LEAKYRELU_GRAD, LeakyReluGrad, 2)
    FLX_CASE(FLX_OP_ELU_GRAD, EluGrad, 2)
    FLX_CASE(FLX_OP_SWISH_GRAD, SwishGrad, 2)
    FLX_CASE(FLX_OP_SOFTPLUS_GRAD, SoftplusGrad, 2)
    FLX_CASE(FLX_OP_SIGMOID_GRAD, SigmoidGrad, 2)
    FLX_CASE(FLX_OP_TANH_GRAD, TanhGrad, 2)
    FLX_CASE(FLX_OP_ABS_GRAD, AbsGrad, 2)
    FLX_CASE(FLX_OP_CLAMP_GRAD, ClampGrad, 2)
    FLX_CASE(FLX_OP_GELU_ERF_GRAD, GeluErfGrad, 2)
#undef FLX_CASE
    case FLX_OP_WHERE:
      return run_where<T>(d);
  }
  return fail(FLX_ERR_UNSUPPORTED, "map: unknown op code " + std::to_string(d.op));
}

}  // namespace

int map(void*, int, const flx_map_desc* d, flx_stream) {
  if (d->ndim < 0 || d->ndim > FLX_MAX_DIMS) return fail(FLX_ERR_INVALID_ARGUMENT, "map: bad ndim");
  int status = FLX_OK;
  if (!dispatch_dtype(d->in_dtype, [&](auto tag) { status = dispatch_op<decltype(tag)>(*d); }))
    return fail(FLX_ERR_INVALID_ARGUMENT, "map: unknown dtype " + std::to_string(d->in_dtype));
  return status;
}

}  // namespace flx::cpu_backend

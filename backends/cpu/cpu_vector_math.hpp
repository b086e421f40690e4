// Float32 exp, tanh, the logistic function and the tanh form of gelu in 8
// lanes (GCC's vector extensions), for the CPU's elementwise maps and the
// GEMM's gelu epilogue. glibc's expf/tanhf are scalar calls (tanhf through
// expm1f): a transformer's gelu spent a third of its CPU training step
// there.
//
// Every Float32 (and half, computed in float) exp and tanh of the CPU
// backend goes through these: the scalar forms are lane 0 of the vector
// forms on a splat, so an element gets the same bits whether a loop takes
// it in a vector of 8 or alone (a row's tail, a strided operand), at any
// thread count and on any x86 (no FMA: each step rounds as written).
//
// exp: Cephes' expf (range reduction by ln 2 in two parts, a degree-6
// polynomial), within 1 ulp of the exact value (measured over every 97th
// float: 0.98); results below FLT_MIN flush to 0. tanh: Cephes' tanhf, an
// odd polynomial below 0.625 and 1 - 2/(e^2|x| + 1) above, within 1.4 ulps
// (glibc's tanhf: 2.2). NaN, ±inf and -0 come out as libm's.
#ifndef FLX_CPU_VECTOR_MATH_HPP
#define FLX_CPU_VECTOR_MATH_HPP

#include <cstdint>

namespace flx::cpu_backend::vmath {

using v8f = float __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));

// Every lane x (v8f{} + x would turn -0 into +0: tanh1(-0) was +0).
[[gnu::always_inline]] inline v8f splat(float x) { return v8f{x, x, x, x, x, x, x, x}; }

[[gnu::always_inline]] inline v8f exp(v8f x) {
  const float hi = 88.72283935546875f, lo = -87.3365478515625f;  // e^hi overflows; e^lo = FLT_MIN
  const v8i nan = x != x;
  v8f xc = x > hi ? splat(hi) : x;
  xc = xc < lo ? splat(lo) : xc;
  xc = nan ? v8f{} : xc;
  // n = floor(x / ln 2 + 1/2), without SSE4.1's round: truncate, then step
  // down where that rounded up
  const v8f t = 1.44269504088896341f * xc + 0.5f;
  v8i n = __builtin_convertvector(t, v8i);
  n += __builtin_convertvector(n, v8f) > t;  // a true comparison is -1
  const v8f z = __builtin_convertvector(n, v8f);
  v8f r = xc - z * 0.693359375f;
  r = r - z * -2.12194440e-4f;
  const v8f r2 = r * r;
  v8f p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // times 2^n in two exact steps (n reaches 128 just below hi)
  const v8i n1 = n >> 1;
  v8f y = p * (v8f)((n1 + 127) << 23) * (v8f)((n - n1 + 127) << 23);
  y = x > hi ? splat(__builtin_inff()) : y;
  y = x < lo ? v8f{} : y;
  return nan ? x : y;
}

[[gnu::always_inline]] inline v8f tanh(v8f x) {
  const v8i sign = (v8i)x & int32_t(0x80000000u);
  const v8f ax = (v8f)((v8i)x & 0x7fffffff);
  const v8f z = x * x;
  v8f p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const v8f small = p * z * ax + ax;  // odd: on |x|, the sign below (so tanh(-0) is -0)
  // tanh(10) rounds to 1 in float: clamping keeps e^2|x| finite
  const v8f e = exp(2.0f * (ax < 10.0f ? ax : splat(10.0f)));
  const v8f big = 1.0f - 2.0f / (e + 1.0f);
  const v8f y = (v8f)((v8i)(ax < 0.625f ? small : big) | sign);
  return x != x ? x : y;
}

// As backend_elem.h's sigm: 1/(1 + e^-x) for x >= 0, e^x/(1 + e^x) below.
[[gnu::always_inline]] inline v8f sigm(v8f x) {
  const v8i pos = x >= 0.0f;
  const v8f e = exp(pos ? -x : x);
  return pos ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// The op list's GELU and GELU_GRAD bodies (include/flx/backend_ops.h,
// backend_elem.h's gelu_tanh_grad) in Float32, operation for operation.
constexpr float kGeluK = float(0.7978845608028654), kGeluC = float(0.044715), kGeluC3 = float(3 * 0.044715);
[[gnu::always_inline]] inline v8f gelu(v8f x) { return 0.5f * x * (1.0f + tanh(kGeluK * (x + kGeluC * x * x * x))); }
[[gnu::always_inline]] inline v8f gelu_grad(v8f x) {
  const v8f t = tanh(kGeluK * (x + kGeluC * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + kGeluC3 * x * x);
}

inline float exp1(float x) { return exp(splat(x))[0]; }
inline float tanh1(float x) { return tanh(splat(x))[0]; }

// Contiguous Float32 rows (cpu_vector_math.cpp; AVX2 where the CPU has it,
// the same bits either way): o = f(a), and o = y * gelu'(x).
enum class Unary { exp, tanh, sigmoid, gelu };
void row(Unary f, float* o, const float* a, int64_t n);
void row_gelu_grad(float* o, const float* x, const float* y, int64_t n);

}  // namespace flx::cpu_backend::vmath

#endif  // FLX_CPU_VECTOR_MATH_HPP

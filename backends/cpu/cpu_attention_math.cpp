// The attention kernel's column operations (cpu_attention_math.hpp), in
// GCC's vector extensions: 16 lanes with AVX-512, two vectors of 8 with
// AVX2 or the baseline, each lane computing the same operations, so the
// three give the same bits (the file is built without contraction into
// FMAs). Picked once from the CPU's features.
#include "cpu_attention_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace flx::cpu_backend::attention_math {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
template <int N>
struct Vec;
template <>
struct Vec<8> {
  using f = v8f;
  using i = v8i;
};
template <>
struct Vec<16> {
  using f = v16f;
  using i = v16i;
};

// e^x for x <= 0 (scores less their row's maximum): Cephes' expf as
// cpu_vector_math.hpp's (range reduction by ln 2 in two parts, the same
// degree-6 polynomial), without the steps only x > 0 needs: n = round(x
// log2 e) by adding and subtracting 1.5·2^23, 2^n in one step (n >= -126
// once x is clamped at ln FLT_MIN). Below ln FLT_MIN (-Inf included) 0;
// NaN stays NaN. Small positive x (a recomputed score a rounding above its
// row's log-sum-exp) are fine.
template <class F, class I>
[[gnu::always_inline]] inline F exp_nonpositive(F x) {
  const float lo = -87.3365478515625f, magic = 12582912.0f;  // e^lo = FLT_MIN; 1.5·2^23
  const F xc = x < lo ? F{} + lo : x;                         // NaN compares false: stays
  const F r = xc * 1.44269504088896341f + magic;              // n in the low bits
  const F n = r - magic;
  F f = xc - n * 0.693359375f;
  f = f - n * -2.12194440e-4f;
  const F f2 = f * f;
  F p = F{} + 1.9875691500e-4f;
  p = p * f + 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f2 + f + 1.0f;
  const I e = (((I)r - (I)(F{} + magic)) + 127) << 23;
  const F y = p * (F)e;
  return x < lo ? F{} : (x != x ? x : y);
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 16 elements at a time in W-lane vectors (W = 16: one, W = 8: two); a
// tail padded with -Inf (whose exponentials are 0).
template <int W>
[[gnu::always_inline]] inline float exp_shifted_impl(float* x, int64_t n, float shift) {
  using F = typename Vec<W>::f;
  using I = typename Vec<W>::i;
  constexpr int kParts = 16 / W;
  F sum[kParts] = {};
  auto block = [&](const float* in, float* out) {
    for (int k = 0; k < kParts; ++k) {
      F v;
      std::memcpy(&v, in + k * W, sizeof v);
      v = exp_nonpositive<F, I>(v - shift);
      std::memcpy(out + k * W, &v, sizeof v);
      sum[k] += v;
    }
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) block(x + j, x + j);
  if (j < n) {
    float pad[16];
    std::fill(pad, pad + 16, kNegInf);
    std::memcpy(pad, x + j, size_t(n - j) * sizeof(float));
    block(pad, pad);
    std::memcpy(x + j, pad, size_t(n - j) * sizeof(float));
  }
  float s = 0;
  for (int k = 0; k < kParts; ++k)
    for (int l = 0; l < W; ++l) s += sum[k][l];
  return s;
}

__attribute__((target("avx512f"))) float exp_shifted_avx512(float* x, int64_t n, float shift) {
  return exp_shifted_impl<16>(x, n, shift);
}
__attribute__((target("avx2"))) float exp_shifted_avx2(float* x, int64_t n, float shift) {
  return exp_shifted_impl<8>(x, n, shift);
}
float exp_shifted_baseline(float* x, int64_t n, float shift) { return exp_shifted_impl<8>(x, n, shift); }

using ExpFn = float (*)(float*, int64_t, float);
ExpFn pick_exp() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return exp_shifted_avx512;
  if (__builtin_cpu_supports("avx2")) return exp_shifted_avx2;
  return exp_shifted_baseline;
}
const ExpFn g_exp = pick_exp();

}  // namespace

float exp_shifted(float* x, int64_t n, float shift) { return g_exp(x, n, shift); }

float exp_shifted_on(int isa, float* x, int64_t n, float shift) {
  return isa == 2 ? exp_shifted_avx512(x, n, shift) : isa == 1 ? exp_shifted_avx2(x, n, shift)
                                                              : exp_shifted_baseline(x, n, shift);
}
int exp_isas() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? 3 : __builtin_cpu_supports("avx2") ? 2 : 1;
}

double exp_shifted(double* x, int64_t n, double shift) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += (x[j] = std::exp(x[j] - shift));
  return s;
}

namespace {
// In this file only: GCC gives the dispatcher (an ifunc) of an external
// target_clones function default visibility whatever -fvisibility says, so
// libflx would export it; column_max(const float*) below calls this.
__attribute__((target_clones("avx2", "default"))) float column_max_clones(const float* x, int64_t n) {
  using F = Vec<8>::f;
  F m = F{} + kNegInf;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    F v;
    std::memcpy(&v, x + j, sizeof v);
    m = v > m ? v : m;
  }
  float r = m[0];
  for (int l = 1; l < 8; ++l) r = std::max(r, m[l]);
  for (; j < n; ++j) r = std::max(r, x[j]);
  return r;
}
}  // namespace

float column_max(const float* x, int64_t n) { return column_max_clones(x, n); }

double column_max(const double* x, int64_t n) {
  double r = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) r = std::max(r, x[j]);
  return r;
}

}  // namespace flx::cpu_backend::attention_math

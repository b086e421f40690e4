// Contiguous Float32 rows of cpu_vector_math.hpp's functions: 8 lanes at a
// time, the tail in a zero-padded vector (so it rounds as the lanes do).
// target_clones builds an AVX2 copy picked at run time; AVX2 has no FMA, so
// both copies compute the same bits.
#include "cpu_vector_math.hpp"

#include <cstring>

namespace flx::cpu_backend::vmath {
namespace {

template <class F>
inline void each8(float* o, const float* a, const float* b, int64_t n, const F& f) {
  int64_t i = 0;
  v8f x, y{};
  for (; i + 8 <= n; i += 8) {
    std::memcpy(&x, a + i, sizeof x);
    if (b) std::memcpy(&y, b + i, sizeof y);
    const v8f r = f(x, y);
    std::memcpy(o + i, &r, sizeof r);
  }
  if (i < n) {
    const size_t rest = size_t(n - i) * sizeof(float);
    x = v8f{};
    std::memcpy(&x, a + i, rest);
    if (b) std::memcpy(&y, b + i, rest);
    const v8f r = f(x, y);
    std::memcpy(o + i, &r, rest);
  }
}

// The AVX2 and default copies, in this file only: GCC gives the dispatcher
// (an ifunc) of an external target_clones function default visibility
// whatever -fvisibility says, so libflx would export it; row and
// row_gelu_grad below call these.
__attribute__((target_clones("avx2", "default"))) void row_clones(Unary f, float* o, const float* a, int64_t n) {
  switch (f) {
    case Unary::exp: each8(o, a, nullptr, n, [](v8f x, v8f) { return exp(x); }); break;
    case Unary::tanh: each8(o, a, nullptr, n, [](v8f x, v8f) { return tanh(x); }); break;
    case Unary::sigmoid: each8(o, a, nullptr, n, [](v8f x, v8f) { return sigm(x); }); break;
    case Unary::gelu: each8(o, a, nullptr, n, [](v8f x, v8f) { return gelu(x); }); break;
  }
}

__attribute__((target_clones("avx2", "default"))) void row_gelu_grad_clones(float* o, const float* x, const float* y,
                                                                            int64_t n) {
  each8(o, x, y, n, [](v8f a, v8f b) { return b * gelu_grad(a); });
}

}  // namespace

void row(Unary f, float* o, const float* a, int64_t n) { row_clones(f, o, a, n); }
void row_gelu_grad(float* o, const float* x, const float* y, int64_t n) { row_gelu_grad_clones(o, x, y, n); }

}  // namespace flx::cpu_backend::vmath

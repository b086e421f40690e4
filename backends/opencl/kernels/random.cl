// Uniform and normal numbers: Philox4x32-10, include/flx/backend_philox.h
// (the #include is replaced by the header's text at build time).
#if IS_FLOAT
// The rounds and the fp64 mappings, as the other backends compute them.
#define FLX_PHILOX_FN inline
// FLX_U32 and FLX_U64 are the prelude's, uint and ulong
#define FLX_PHILOX_DOUBLE HAS_FP64
#include "flx/backend_philox.h"
#if HAS_FP64
#define uniform01 philox_uniform01
#define normal01 philox_normal01
#else  // no fp64: 24-bit float arithmetic (documented: not identical to the CPU)
inline RT uniform01(philox_u4 r) { return (float)(r.x[0] >> 8) * 0x1.0p-24f; }
inline RT normal01(philox_u4 r) {
  float u1 = ((float)(r.x[2] >> 8) + 1.0f) * 0x1.0p-24f;
  float u2 = (float)(r.x[3] >> 8) * 0x1.0p-24f;
  return sqrt(-2.0f * log(u1)) * cos(6.2831855f * u2);
}
#endif

// top: the largest value of the dtype below b (backends/backend_common/uniform_bound.hpp).
kernel void random_k(int dist, global uchar* ob, long oo, long n, ulong seed, ulong offset, RT a, RT b, RT top) {
  global ST* out = PTR(ST, ob, oo);
  for (long t = GID; t < n; t += GSIZE) {
    philox_u4 r = philox_bits(seed, offset, (ulong)t);
    if (dist == 0) {
      st(out, t, (CT)(a + (b - a) * uniform01(r)));
      // rounding to a narrow type may reach b: keep the interval half-open
      if ((RT)ld(out, t) >= b) st(out, t, (CT)top);
    } else {
      st(out, t, (CT)(a + b * normal01(r)));
    }
  }
}
#endif

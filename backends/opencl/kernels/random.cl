// Uniform and normal numbers: Philox4x32-10, as src/common/philox.hpp.
#if IS_FLOAT
inline uint4 philox(uint c0, uint c1, uint c2, uint c3, uint k0, uint k1) {
  for (int r = 0; r < 10; ++r) {
    uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (uint4)(c0, c1, c2, c3);
}
#if HAS_FP64
inline RT uniform01(uint4 r) { return (double)(((((ulong)r.x) << 32) | r.y) >> 11) * 0x1.0p-53; }
inline RT normal01(uint4 r) {
  double u1 = ((double)r.z + 1.0) * 0x1.0p-32;
  double u2 = (double)r.w * 0x1.0p-32;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#else  // no fp64: 24-bit float arithmetic (documented: not identical to the CPU)
inline RT uniform01(uint4 r) { return (float)(r.x >> 8) * 0x1.0p-24f; }
inline RT normal01(uint4 r) {
  float u1 = ((float)(r.z >> 8) + 1.0f) * 0x1.0p-24f;
  float u2 = (float)(r.w >> 8) * 0x1.0p-24f;
  return sqrt(-2.0f * log(u1)) * cos(6.2831855f * u2);
}
#endif

// top: the largest value of the dtype below b (backends/common/uniform_bound.hpp).
kernel void random_k(int dist, global uchar* ob, long oo, long n, ulong seed, ulong offset, RT a, RT b, RT top) {
  global ST* out = PTR(ST, ob, oo);
  for (long t = GID; t < n; t += GSIZE) {
    ulong i = (ulong)t;
    uint4 r = philox((uint)i, (uint)(i >> 32), (uint)offset, (uint)(offset >> 32), (uint)seed, (uint)(seed >> 32));
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

/* flx backend ABI: Philox4x32-10 (Salmon et al., SC'11), the generator of
 * every backend's random fills, and its uniform and normal mappings.
 *
 * Written in the subset shared by C++, OpenCL C and CUDA C, so that libflx
 * and the CPU backend (through backends/backend_common/philox.hpp), the CUDA kernels
 * (the same header) and the OpenCL kernels (this file is embedded in their
 * source, in backends/opencl/kernels/random.cl) draw the same bits. The
 * including language defines, before including it:
 *
 *   FLX_PHILOX_FN     the function prefix: `inline` in C++ and OpenCL C,
 *                     `__host__ __device__ inline` in CUDA
 *   FLX_U32, FLX_U64  unsigned 32- and 64-bit integer types (uint32_t and
 *                     uint64_t; uint and ulong in OpenCL C)
 *   FLX_PHILOX_DOUBLE 1 when double is available: the uniform and normal
 *                     mappings compute in double (an OpenCL device without
 *                     fp64 maps the bits its own way, in float)
 *
 * and makes sqrt, log and cos of a double callable unqualified. C++ includes
 * it inside namespace flx::philox (it includes nothing itself).
 */
#ifndef FLX_BACKEND_PHILOX_H
#define FLX_BACKEND_PHILOX_H

/* The four 32-bit lanes of one draw. */
typedef struct philox_u4 {
  FLX_U32 x[4];
} philox_u4;

/* Ten rounds over the counter (c0..c3) with the key (k0, k1): each round
 * multiplies lanes 0 and 2 into 64 bits, mixes the high halves with the
 * other lanes and the key, and bumps the key by the Weyl constants. */
FLX_PHILOX_FN philox_u4 philox4x32_10(FLX_U32 c0, FLX_U32 c1, FLX_U32 c2, FLX_U32 c3, FLX_U32 k0, FLX_U32 k1) {
  for (int r = 0; r < 10; ++r) {
    FLX_U64 p0 = (FLX_U64)0xD2511F53u * c0, p1 = (FLX_U64)0xCD9E8D57u * c2;
    FLX_U32 n0 = (FLX_U32)(p1 >> 32) ^ c1 ^ k0, n2 = (FLX_U32)(p0 >> 32) ^ c3 ^ k1;
    c1 = (FLX_U32)p1;
    c3 = (FLX_U32)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  philox_u4 out;
  out.x[0] = c0;
  out.x[1] = c1;
  out.x[2] = c2;
  out.x[3] = c3;
  return out;
}

/* The random bits of element i of a fill made with (seed, offset): i is the
 * counter's low half, offset its high half, seed the key. */
FLX_PHILOX_FN philox_u4 philox_bits(FLX_U64 seed, FLX_U64 offset, FLX_U64 i) {
  return philox4x32_10((FLX_U32)i, (FLX_U32)(i >> 32), (FLX_U32)offset, (FLX_U32)(offset >> 32), (FLX_U32)seed,
                       (FLX_U32)(seed >> 32));
}

#if FLX_PHILOX_DOUBLE
/* Uniform in [0, 1) with 53 random bits: lanes 0 and 1. */
FLX_PHILOX_FN double philox_uniform01(philox_u4 r) {
  return (double)((((FLX_U64)r.x[0] << 32) | r.x[1]) >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller from lanes 2 and 3: u1 in (0, 1], u2 in [0, 1). */
FLX_PHILOX_FN double philox_normal01(philox_u4 r) {
  double u1 = ((double)r.x[2] + 1.0) * 0x1.0p-32;
  double u2 = (double)r.x[3] * 0x1.0p-32;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#endif

#endif /* FLX_BACKEND_PHILOX_H */

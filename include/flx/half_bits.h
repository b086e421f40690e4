/* flx: the bits of Float16 and BFloat16, converted from and to Float32.
 *
 * Written in the subset shared by C++, OpenCL C and CUDA C, so that the host
 * (include/flx/dtype.hpp: half_to_float, float_to_half, bf16_to_float,
 * float_to_bf16, which the CPU backend stores halves with), the OpenCL
 * kernels (this file is embedded in their source, in
 * backends/opencl/kernels/prelude.cl) and the CUDA kernels' NaN rules
 * (backends/cuda/cuda_nan_bits.hpp) round the same way. Pure integer maths
 * on IEEE bit patterns: no floating arithmetic, so no dependence on the
 * rounding mode or on a device flushing denormals. Not part of the backend
 * ABI (public headers may include it).
 *
 * The including language defines, before including it:
 *
 *   FLX_HALF_FN      the function prefix: `constexpr inline` in C++,
 *                    `__host__ __device__ constexpr inline` in CUDA,
 *                    `inline` in OpenCL C
 *   FLX_U16, FLX_U32, FLX_U64
 *                    unsigned 16-, 32- and 64-bit integer types (uint16_t,
 *                    uint32_t and uint64_t; ushort, uint and ulong in
 *                    OpenCL C)
 *
 * C++ includes it inside a namespace (it includes nothing itself).
 */
#ifndef FLX_HALF_BITS_H
#define FLX_HALF_BITS_H

/* Float32 bits of the half h: exact. A NaN keeps its sign and payload (a
 * signalling one stays signalling). */
FLX_HALF_FN FLX_U32 flx_half_to_f32_bits(FLX_U16 h) {
  FLX_U32 sign = (FLX_U32)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return sign;
    /* subnormal: renormalise */
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while (!(man & 0x400u));
    return sign | (FLX_U32)(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
  }
  if (exp == 31) return sign | 0x7f800000u | man << 13;
  return sign | (exp + 112) << 23 | man << 13;
}

/* The half nearest to the Float32 of bits u, ties to even; beyond the
 * largest half, Inf. A NaN becomes the quiet NaN with its sign and no
 * payload (sign | 0x7E00) on every backend: a GPU's float NaNs carry no
 * payload, so keeping one would make the bits depend on the device. */
FLX_HALF_FN FLX_U16 flx_f32_bits_to_half(FLX_U32 u) {
  FLX_U32 sign = (u >> 16) & 0x8000u;
  FLX_U32 a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (FLX_U16)(sign | 0x7e00u); /* NaN */
  if (a >= 0x477ff000u) return (FLX_U16)(sign | 0x7c00u); /* rounds past 65504: Inf */
  if (a < 0x38800000u) {
    /* a half subnormal or zero: |f| * 2^24 rounded to nearest even, in
     * integers. m: the significand with its hidden bit; |f| * 2^24 is
     * m * 2^-s. */
    FLX_U32 e = a >> 23;
    FLX_U32 m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
    FLX_U32 s = e ? 126u - e : 125u;
    if (s > 24u) return (FLX_U16)sign; /* below half the smallest subnormal */
    FLX_U32 q = m >> s, rem = m & ((1u << s) - 1u), half_ = 1u << (s - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u))) ++q;
    return (FLX_U16)(sign | q);
  }
  /* rebias the exponent and round the 13 dropped bits to nearest even (a
   * carry into the exponent is the right result) */
  FLX_U32 r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
  return (FLX_U16)(sign | (r >> 13));
}

/* Float32 bits of the bfloat16 h: exact, NaN included. */
FLX_HALF_FN FLX_U32 flx_bf16_to_f32_bits(FLX_U16 h) { return (FLX_U32)h << 16; }

/* The bfloat16 nearest to the Float32 of bits u, ties to even (a carry into
 * the exponent gives the right result, Inf included). A NaN becomes the
 * quiet NaN with its sign and no payload (sign | 0x7FC0). */
FLX_HALF_FN FLX_U16 flx_f32_bits_to_bf16(FLX_U32 u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (FLX_U16)(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (FLX_U16)(u >> 16);
}

/* ---- from Float64 and from integers: rounded once ----
 *
 * A Float64 (or an integer) rounded to Float32 and then to a half rounds
 * twice: 1 + 2^-11 + 2^-40 would become 1 + 2^-11 (a tie) and then 1,
 * where the value itself rounds to 1 + 2^-10. Rounded to odd instead
 * (truncated toward zero, the last bit set where that dropped anything),
 * the Float32 keeps 24 significant bits, at least two more than a half's
 * 11 or a bfloat16's 8, so rounding it once more to nearest even gives the
 * value rounded once (Boldo and Melquiond, "When double rounding is odd",
 * 2005). */

/* The Float32 bits of the Float64 of bits u, rounded to odd. Beyond
 * Float32's range: the largest finite Float32 (odd), which rounds to Inf as
 * a half and as a bfloat16, as the value does. Inf stays Inf, NaN NaN (a
 * half or bfloat16 made of it gets the quiet NaN with its sign). */
FLX_HALF_FN FLX_U32 flx_f64_bits_to_f32_odd(FLX_U64 u) {
  FLX_U32 sign = (FLX_U32)(u >> 32) & 0x80000000u;
  FLX_U32 e = (FLX_U32)(u >> 52) & 0x7ffu;
  FLX_U64 m = u & (((FLX_U64)1 << 52) - 1u);
  if (e == 0x7ffu) return sign | 0x7f800000u | (m ? 0x400000u : 0u);
  if (e >= 1023u + 128u) return sign | 0x7f7fffffu; /* 2^128 or more */
  if (e >= 1023u - 126u) {
    /* a normal Float32: the top 23 of the 52 fraction bits, then the rest's
     * sticky bit */
    return sign | (e - 1023u + 127u) << 23 | (FLX_U32)(m >> 29) |
           (FLX_U32)((m & (((FLX_U64)1 << 29) - 1u)) != 0u);
  }
  /* below 2^-126: a Float32 subnormal, in units of 2^-149. The value is
   * m · 2^(e - 1075) with the hidden bit (e' = 1 for a Float64 subnormal),
   * so the units are m >> (926 - e'), at least 30. */
  if (e) m |= (FLX_U64)1 << 52;
  FLX_U32 shift = 926u - (e ? e : 1u);
  if (shift >= 64u) return sign | (FLX_U32)(m != 0u);
  return sign | (FLX_U32)(m >> shift) | (FLX_U32)((m & (((FLX_U64)1 << shift) - 1u)) != 0u);
}

/* The Float32 bits of the integer (negative ? -1 : 1) · magnitude, rounded
 * to odd (magnitude: an integer's absolute value, as an unsigned 64-bit
 * number, so INT64_MIN's too). */
FLX_HALF_FN FLX_U32 flx_int_to_f32_odd(int negative, FLX_U64 magnitude) {
  if (magnitude == 0u) return 0u;
  FLX_U32 sign = negative ? 0x80000000u : 0u;
  FLX_U32 top = 63u; /* the leading bit's place */
  while (!((magnitude >> top) & 1u)) --top;
  FLX_U32 m, sticky = 0u;
  if (top <= 23u) {
    m = (FLX_U32)(magnitude << (23u - top));
  } else {
    m = (FLX_U32)(magnitude >> (top - 23u));
    sticky = (FLX_U32)((magnitude & (((FLX_U64)1 << (top - 23u)) - 1u)) != 0u);
  }
  return sign | (top + 127u) << 23 | (m & 0x7fffffu) | sticky;
}

/* The half and the bfloat16 nearest to a Float64 (bits u) or an integer,
 * ties to even: rounded once. */
FLX_HALF_FN FLX_U16 flx_f64_bits_to_half(FLX_U64 u) { return flx_f32_bits_to_half(flx_f64_bits_to_f32_odd(u)); }
FLX_HALF_FN FLX_U16 flx_f64_bits_to_bf16(FLX_U64 u) { return flx_f32_bits_to_bf16(flx_f64_bits_to_f32_odd(u)); }
FLX_HALF_FN FLX_U16 flx_int_to_half(int negative, FLX_U64 magnitude) {
  return flx_f32_bits_to_half(flx_int_to_f32_odd(negative, magnitude));
}
FLX_HALF_FN FLX_U16 flx_int_to_bf16(int negative, FLX_U64 magnitude) {
  return flx_f32_bits_to_bf16(flx_int_to_f32_odd(negative, magnitude));
}

#endif /* FLX_HALF_BITS_H */

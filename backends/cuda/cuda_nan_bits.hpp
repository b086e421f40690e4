// The bits of a NaN converted between floating dtypes, as the CPU backend
// stores them, for the CUDA kernels to use instead of the hardware's: the
// GPU's single-precision arithmetic and conversions (cvt, __float2half_rn,
// __float2bfloat16_rn, __half2float) return the canonical NaN 0x7FFFFFFF
// (or 0x7FFF) whatever the input, which drops the sign, while the CPU keeps
// it (include/flx/dtype.hpp, and x86's conversions between float and
// double). The rules, on the IEEE bit patterns:
//   into Float16:  sign | 0x7E00 (quiet, payload dropped)
//   into BFloat16: sign | 0x7FC0 (quiet, payload dropped)
//   Float16 into Float32: sign | exponent all ones | the 10-bit payload << 13
//     (a signalling NaN stays signalling, as flx::half_to_float leaves it)
//   Float32 into Float64: quiet, sign kept, payload << 29
//   Float64 into Float32: quiet, sign kept, the payload's top 22 bits
// BFloat16 into Float32 is the bits shifted up, exact for every value.
// The three half and bfloat16 rules are include/flx/half_bits.h's
// conversions (what flx/dtype.hpp rounds with), applied to a NaN: the
// kernels call these only for NaNs and leave other values to the hardware.
// No CUDA header: tests/cuda/test_cuda_nan_bits.cpp checks each rule on the
// host against the CPU's conversions for every NaN.
#pragma once

#include <cstdint>

#include "flx/dtype.hpp"  // flx::detail::half_bits, host and device under nvcc

#if defined(__CUDACC__)
#define FLX_NAN_HD __host__ __device__
#else
#define FLX_NAN_HD
#endif

namespace flx_cuda::nan_bits {

FLX_NAN_HD constexpr bool is_nan32(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }
FLX_NAN_HD constexpr bool is_nan64(uint64_t u) { return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
FLX_NAN_HD constexpr bool is_nan_half(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }

FLX_NAN_HD constexpr uint16_t half_from_f32(uint32_t u) { return flx::detail::half_bits::flx_f32_bits_to_half(u); }
FLX_NAN_HD constexpr uint16_t bf16_from_f32(uint32_t u) { return flx::detail::half_bits::flx_f32_bits_to_bf16(u); }
FLX_NAN_HD constexpr uint32_t f32_from_half(uint16_t h) { return flx::detail::half_bits::flx_half_to_f32_bits(h); }
FLX_NAN_HD constexpr uint64_t f64_from_f32(uint32_t u) {
  return (uint64_t(u & 0x80000000u) << 32) | 0x7ff8000000000000ull | (uint64_t(u & 0x7fffffu) << 29);
}
FLX_NAN_HD constexpr uint32_t f32_from_f64(uint64_t u) {
  return uint32_t((u >> 32) & 0x80000000u) | 0x7fc00000u | uint32_t((u >> 29) & 0x7fffffu);
}

}  // namespace flx_cuda::nan_bits

// The CUDA kernels' NaN conversions (backends/cuda/cuda_nan_bits.hpp), on
// the host: for every NaN, the bits the CPU backend gives (flx/dtype.hpp's
// half and bfloat16 conversions, and this CPU's float <-> double casts,
// which the CPU backend's cast uses).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>

#include "cuda/cuda_nan_bits.hpp"
#include "flx/dtype.hpp"

namespace nb = flx_cuda::nan_bits;

namespace {
template <class To, class From>
To same_bits(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
float f32(uint32_t u) { return same_bits<float>(u); }
double f64(uint64_t u) { return same_bits<double>(u); }
uint32_t bits(float f) { return same_bits<uint32_t>(f); }
uint64_t bits(double d) { return same_bits<uint64_t>(d); }
// Through a volatile, so the compiler converts at run time with this
// CPU's instruction, as the CPU backend's cast does.
double widen(float f) {
  volatile float v = f;
  return double(v);
}
float narrow(double d) {
  volatile double v = d;
  return float(v);
}
}  // namespace

// Every float NaN: 2^23 - 1 payloads (quiet and signalling) with each sign.
TEST(CudaNanBits, EveryFloatNanIntoHalfAndBFloat16AsTheCpu) {
  size_t checked = 0;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t m = 1; m <= 0x7fffffu; ++m) {
      const uint32_t u = sign | 0x7f800000u | m;
      ASSERT_TRUE(nb::is_nan32(u));
      const float f = f32(u);
      ASSERT_EQ(nb::half_from_f32(u), flx::float_to_half(f)) << std::hex << u;
      ASSERT_EQ(nb::bf16_from_f32(u), flx::float_to_bf16(f)) << std::hex << u;
      ++checked;
    }
  EXPECT_EQ(checked, 2u * 0x7fffffu);
  // The CPU's rule itself: quiet, the sign kept, no payload, whatever the
  // NaN (a GPU's canonical NaN 0x7FFFFFFF included).
  for (uint32_t u : {0x7fc00000u, 0x7fffffffu, 0x7f800001u, 0x7fa12345u}) {
    EXPECT_EQ(flx::float_to_half(f32(u)), 0x7e00u);
    EXPECT_EQ(flx::float_to_half(f32(u | 0x80000000u)), 0xfe00u);
    EXPECT_EQ(flx::float_to_bf16(f32(u)), 0x7fc0u);
    EXPECT_EQ(flx::float_to_bf16(f32(u | 0x80000000u)), 0xffc0u);
  }
}

TEST(CudaNanBits, NotNanIsLeftToTheHardware) {
  for (uint32_t u : {0x7f800000u, 0xff800000u, 0x7f7fffffu, 0u, 0x80000000u, 0x3f800000u})
    EXPECT_FALSE(nb::is_nan32(u)) << std::hex << u;
  for (uint16_t h : {uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7bff), uint16_t(0)})
    EXPECT_FALSE(nb::is_nan_half(h)) << std::hex << h;
  for (uint64_t u : {0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7fefffffffffffffull})
    EXPECT_FALSE(nb::is_nan64(u)) << std::hex << u;
}

// Every half NaN (1023 payloads, each sign) into float, as flx::half_to_float.
TEST(CudaNanBits, EveryHalfNanIntoFloatAsTheCpu) {
  for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)})
    for (uint16_t m = 1; m <= 0x3ff; ++m) {
      const uint16_t h = uint16_t(sign | 0x7c00u | m);
      ASSERT_TRUE(nb::is_nan_half(h));
      ASSERT_EQ(nb::f32_from_half(h), bits(flx::half_to_float(h))) << std::hex << h;
    }
}

// Every float NaN into double, as this CPU widens it (quiet, payload kept).
TEST(CudaNanBits, EveryFloatNanIntoDoubleAsTheCpu) {
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t m = 1; m <= 0x7fffffu; ++m) {
      const uint32_t u = sign | 0x7f800000u | m;
      ASSERT_EQ(nb::f64_from_f32(u), bits(widen(f32(u)))) << std::hex << u;
    }
}

// Double NaNs into float, as this CPU narrows them: every pattern of the
// payload's top 23 bits (what float keeps, the quiet bit among them), each
// with random low bits and with none, each sign.
TEST(CudaNanBits, DoubleNansIntoFloatAsTheCpu) {
  std::mt19937_64 rng(17);
  for (uint64_t sign : {0ull, 0x8000000000000000ull})
    for (uint64_t top = 0; top <= 0x7fffffull; ++top)
      for (uint64_t low : {0ull, rng() & ((1ull << 29) - 1)}) {
        const uint64_t u = sign | 0x7ff0000000000000ull | top << 29 | low;
        if (!nb::is_nan64(u)) continue;  // infinity
        ASSERT_EQ(nb::f32_from_f64(u), bits(narrow(f64(u)))) << std::hex << u;
      }
}

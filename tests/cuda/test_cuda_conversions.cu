// The CUDA kernels' loads and stores (backends/cuda/cuda_kernels.cuh:
// store, load, to_f32, to_f64), run on the host, where the same
// __host__ __device__ code compiles against the host versions of CUDA's
// half and bfloat16 intrinsics: every Float16 and BFloat16 value, every
// float NaN and a stride through the other floats, against the CPU
// backend's conversions (flx/dtype.hpp and this CPU's float <-> double).
// The device's own intrinsics differ from these only for NaN, which the
// kernels handle in software (cuda_nan_bits.hpp); that they agree for the
// other values is for a GPU run of the plugin suite to show.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cuda_kernels.cuh"
#include "flx/dtype.hpp"

using namespace flx_cuda;

namespace {
uint16_t bits(__half h) { return __half_as_ushort(h); }
uint16_t bits(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
}  // namespace

TEST(CudaConversions, StoresIntoHalvesAsTheCpu) {
  auto check = [](uint32_t u) {
    const float f = same_bits<float>(u);
    volatile float vf = f;  // widened at run time, by this CPU
    ASSERT_EQ(bits(store<__half>(f)), flx::float_to_half(f)) << std::hex << u;
    ASSERT_EQ(bits(store<__nv_bfloat16>(f)), flx::float_to_bf16(f)) << std::hex << u;
    // from double, as random and the reductions store: through float first
    ASSERT_EQ(bits(store<__half>(double(vf))), flx::float_to_half(f)) << std::hex << u;
    ASSERT_EQ(bits(store<__nv_bfloat16>(double(vf))), flx::float_to_bf16(f)) << std::hex << u;
  };
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t m = 1; m <= 0x7fffffu; ++m) check(sign | 0x7f800000u | m);  // every NaN
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) check(uint32_t(u));   // a stride through the rest
  for (uint32_t u : {0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fffffu, 0x33000000u, 0x7f7fffffu, 0x7f800000u})
    for (uint32_t sign : {0u, 0x80000000u}) check(sign | u);  // half's overflow and subnormal edges
}

TEST(CudaConversions, LoadsFromHalvesAsTheCpu) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    ASSERT_EQ(same_bits<uint32_t>(load(__ushort_as_half(uint16_t(h)))),
              same_bits<uint32_t>(flx::half_to_float(uint16_t(h))))
        << std::hex << h;
    ASSERT_EQ(same_bits<uint32_t>(load(__ushort_as_bfloat16(uint16_t(h)))),
              same_bits<uint32_t>(flx::bf16_to_float(uint16_t(h))))
        << std::hex << h;
  }
}

TEST(CudaConversions, FloatAndDoubleNansAsTheCpu) {
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t m = 1; m <= 0x7fffffu; m += 7) {
      const float f = same_bits<float>(sign | 0x7f800000u | m);
      volatile float vf = f;
      const double d = double(vf);  // this CPU's widening
      ASSERT_EQ(same_bits<uint64_t>(store<double>(f)), same_bits<uint64_t>(d)) << std::hex << m;
      ASSERT_EQ(same_bits<uint64_t>(to_f64(f)), same_bits<uint64_t>(d)) << std::hex << m;
      volatile double vd = same_bits<double>(same_bits<uint64_t>(d) | 0x12345ull);  // low bits float drops
      ASSERT_EQ(same_bits<uint32_t>(store<float>(double(vd))), same_bits<uint32_t>(float(vd))) << std::hex << m;
    }
  // Not NaN: plain conversions
  EXPECT_EQ(store<float>(0.1), 0.1f);
  EXPECT_EQ(store<double>(0.1f), double(0.1f));
  EXPECT_EQ(store<int32_t>(-7.9), -7);
  EXPECT_EQ(store<bool>(std::nan("")), true);
  EXPECT_EQ(store<bool>(0.0), false);
}

// cast's element rule (cast_element, as the CPU's in cpu_common.hpp): a
// Float64 or an integer into a half rounds once (flx/half_bits.h, the
// functions flx/dtype.hpp wraps), an integer target saturates with NaN 0
// (saturating_convert), on the host as the kernels run it.
TEST(CudaConversions, CastsAsTheCpu) {
  using flx::backend_common::saturating_convert;
  auto doubles = [](uint64_t u) {
    const double d = same_bits<double>(u);
    ASSERT_EQ(bits(cast_element<__half>(d)), flx::double_to_half(d)) << std::hex << u;
    ASSERT_EQ(bits(cast_element<__nv_bfloat16>(d)), flx::double_to_bf16(d)) << std::hex << u;
    ASSERT_EQ(cast_element<uint8_t>(d), saturating_convert<uint8_t>(d)) << std::hex << u;
    ASSERT_EQ(cast_element<int32_t>(d), saturating_convert<int32_t>(d)) << std::hex << u;
    ASSERT_EQ(cast_element<int64_t>(d), saturating_convert<int64_t>(d)) << std::hex << u;
  };
  for (uint64_t u = 0; u < (uint64_t(1) << 63); u += 0x0000123456789abdull) {
    doubles(u);
    doubles(u | 0x8000000000000000ull);
  }
  // 1 + 2^-11 + 2^-40: a tie through Float32, above it in Float64.
  EXPECT_EQ(bits(cast_element<__half>(1 + 0x1p-11 + 0x1p-40)), 0x3c01);
  for (int64_t v : {int64_t(0), int64_t(-1), int64_t(2049), int64_t(65519), int64_t(65520), int64_t((1 << 24) + (1 << 16) + 1),
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(bits(cast_element<__half>(v)), flx::int64_to_half(v)) << v;
    EXPECT_EQ(bits(cast_element<__nv_bfloat16>(v)), flx::int64_to_bf16(v)) << v;
    EXPECT_EQ(cast_element<uint8_t>(v), saturating_convert<uint8_t>(v)) << v;
    EXPECT_EQ(cast_element<int32_t>(v), saturating_convert<int32_t>(v)) << v;
  }
  EXPECT_EQ(cast_element<uint8_t>(-1.0f), 0);
  EXPECT_EQ(cast_element<uint8_t>(300.0f), 255);
  EXPECT_EQ(cast_element<int32_t>(std::nanf("")), 0);
  EXPECT_EQ(cast_element<uint8_t>(__float2half(-3.0f)), 0);
}

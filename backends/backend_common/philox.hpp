// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so element
// i of a random fill depends only on (seed, call offset, i). Every backend
// implements the same mapping, which makes rand() reproducible by seed and
// identical across devices.
#pragma once

#include <cmath>
#include <cstdint>

// Host and device: the CUDA backend compiles these same functions for its
// kernels, so the numbers match the CPU's.
#ifdef __CUDACC__
#define FLX_PHILOX_FN __host__ __device__ inline
#else
#define FLX_PHILOX_FN inline
#endif

namespace flx::philox {

struct U4 {
  uint32_t x[4];
};

FLX_PHILOX_FN U4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(M0) * c0, p1 = uint64_t(M1) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += W0;
    k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// The random bits of element i of a fill made with (seed, offset).
FLX_PHILOX_FN U4 bits(uint64_t seed, uint64_t offset, uint64_t i) {
  return philox4x32_10(uint32_t(i), uint32_t(i >> 32), uint32_t(offset), uint32_t(offset >> 32), uint32_t(seed),
                       uint32_t(seed >> 32));
}

// Uniform in [0, 1) with 53 random bits.
FLX_PHILOX_FN double uniform01(const U4& r) {
  uint64_t v = (uint64_t(r.x[0]) << 32 | r.x[1]) >> 11;
  return double(v) * 0x1.0p-53;
}

// Standard normal by Box–Muller from lanes 2 and 3.
FLX_PHILOX_FN double normal01(const U4& r) {
  double u1 = (double(r.x[2]) + 1.0) * 0x1.0p-32;  // (0, 1]
  double u2 = double(r.x[3]) * 0x1.0p-32;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace flx::philox

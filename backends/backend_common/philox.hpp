// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so element
// i of a random fill depends only on (seed, call offset, i). Every backend
// implements the same mapping, which makes rand() reproducible by seed and
// identical across devices: the rounds and the uniform and normal mappings
// are written once, in include/flx/backend_philox.h, which C++ and CUDA
// include here and the OpenCL kernels embed.
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

// The header includes nothing, so it can be opened in the namespace: its
// names become flx::philox::philox_u4, philox_bits, ... The using-declarations
// make its unqualified sqrt, log and cos <cmath>'s, whatever an enclosing
// namespace (flx's tensor ops) declares under those names.
using std::cos;
using std::log;
using std::sqrt;
#define FLX_U32 uint32_t
#define FLX_U64 uint64_t
#define FLX_PHILOX_DOUBLE 1
#include "flx/backend_philox.h"
#undef FLX_U32
#undef FLX_U64
#undef FLX_PHILOX_DOUBLE

using U4 = philox_u4;

// The random bits of element i of a fill made with (seed, offset).
FLX_PHILOX_FN U4 bits(uint64_t seed, uint64_t offset, uint64_t i) { return philox_bits(seed, offset, i); }
// Uniform in [0, 1) with 53 random bits.
FLX_PHILOX_FN double uniform01(const U4& r) { return philox_uniform01(r); }
// Standard normal by Box–Muller from lanes 2 and 3.
FLX_PHILOX_FN double normal01(const U4& r) { return philox_normal01(r); }

}  // namespace flx::philox

// Float32 GEMMs in oneDNN's matmul on the CPU's fixed tiles
// (cpu_gemm_onednn.cpp), as the BFloat16 ones run (cpu_native_halves.hpp's
// gemm_half_native): each tile one single-threaded matmul over the whole
// inner dimension, so the same bits at any thread count.
//
// Why: on the AMD EPYC (Zen 4) this project measured, oneDNN 2.6's Float32
// matmul kernels took about 0.8 of the time of OpenBLAS 0.3.21's (its
// Cooper Lake kernels) for an MLP's products on the same tiles
// (bench/bench_gemm_drivers.cpp; bench/README.md, "Float32 GEMM drivers").
// FLX_CPU_F32_GEMM=openblas keeps every Float32 product on OpenBLAS.
#pragma once

#include <cstdint>
#include <functional>

#include "flx/backend.h"

namespace flx::cpu_backend {

// Products below this many flops stay on OpenBLAS (its small-matrix
// kernels start faster than a oneDNN primitive's call).
inline constexpr double kOnednnF32Flops = 1e6;

// A fused epilogue's steps on each tile of C (cpu_gemm.cpp): before fills
// the tile, which the product then adds onto with the desc's beta; after
// finishes it, while it is in cache. Arguments: the tile, C's leading
// dimension, the tile's rows m0:m1 and its column count.
struct GemmTileHooks {
  std::function<void(float*, int64_t, int64_t, int64_t, int64_t)> before, after;
};

// Whether d (Float32) goes to oneDNN: big enough, and not FLX_CPU_F32_GEMM=openblas.
bool f32_gemm_on_onednn(const flx_gemm_desc& d);
// d on oneDNN's tiles: true when it ran; false, with nothing written, when
// oneDNN has only a reference kernel for a tile. May throw dnnl::error.
bool gemm_f32_onednn(const flx_gemm_desc& d, const GemmTileHooks* hooks = nullptr);

}  // namespace flx::cpu_backend

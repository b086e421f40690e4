// Float16 and BFloat16 in oneDNN's own kernels: which half work the CPU
// backend hands to oneDNN in the half type itself (products accumulated in
// Float32, each output rounded once, as the Float32 path on widened copies
// gives too), and which it keeps on that Float32 path.
//
// The choice follows what oneDNN reports, never the CPU's name: a half
// primitive runs natively when oneDNN made it with one of its optimised
// implementations (not its reference code) and oneDNN's effective ISA has
// instructions for the type (BFloat16: avx512_core_bf16, which the AMX ISA
// includes; Float16: none in oneDNN 2.6, whose CPU kernels have no f16).
// Elsewhere oneDNN would either refuse the type (AVX2: no bf16 kernel at
// all) or emulate it with integer shifts (avx512_core without BF16: a bf16
// convolution three times slower than Float32), and the Float32 path on
// widened copies is the faster of what is left. ONEDNN_MAX_CPU_ISA (or
// DNNL_MAX_CPU_ISA) lowers the effective ISA, so it also shows what an
// older CPU gets. FLX_CPU_NATIVE_HALVES=0 keeps every half op on the
// Float32 path (to compare, or to rule the native kernels out). Not
// installed.
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "flx/backend.h"

namespace flx::cpu_backend {

// How the CPU runs a family of half ops: natively (fast) in oneDNN's
// kernel `how` names, or on the Float32 path (`how`: why not).
struct HalfPath {
  bool fast;
  std::string how;
};

// A half GEMM (every tile) in oneDNN's matmul: true when it ran; false
// when oneDNN would not run one of its tiles natively (nothing was
// written: the caller takes the Float32 path). May throw dnnl::error.
bool gemm_half_native(const flx_gemm_desc& d);
// What a half GEMM of dtype runs on, from the plan of a typical tile
// (cpu_gemm_onednn.cpp).
HalfPath gemm_half_path(int32_t dtype);
// What half convolutions run on, forward and backward, from the plans of a
// typical layer (cpu_dnn_conv.cpp).
HalfPath conv_half_path(int32_t dtype);

// The core table's precision_path (minor 9): the CPU's answer for each
// family of half ops, GEMM and convolution from the plans above.
int precision_path(void* ctx, int dev, flx_precision_path* p);

}  // namespace flx::cpu_backend

namespace flx::cpu_backend::onednn {

// oneDNN's data type of a floating flx dtype (FLX_F32, FLX_BF16, FLX_F16).
dnnl::memory::data_type data_type(int32_t dtype);

// False when FLX_CPU_NATIVE_HALVES is "0" (read once).
bool native_halves_enabled();

// oneDNN's effective ISA as its name ("avx512_core_bf16", "avx2", ...).
std::string isa_name();

// "" when pd (a primitive made for half dtype) runs the type natively
// (above); else why not, naming oneDNN's implementation and ISA.
std::string emulation_reason(const dnnl::primitive_desc_base& pd, int32_t dtype);

// Why oneDNN made no `primitive` for half dtype: e, from making it.
std::string no_kernel(const char* primitive, int32_t dtype, const dnnl::error& e);

// What pd runs on, for listings: "brg:avx512_core_bf16", or for an
// implementation whose name holds no ISA "gemm:jit on avx512_core_bf16".
std::string describe(const dnnl::primitive_desc_base& pd);

}  // namespace flx::cpu_backend::onednn

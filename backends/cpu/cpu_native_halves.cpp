// Which half primitives run natively (cpu_native_halves.hpp).
#include "cpu_native_halves.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu_common.hpp"
#include "cpu_dnn_engine.hpp"
#include "flx/backend.h"
#include "backend_common/env_switch.hpp"

namespace flx::cpu_backend::onednn {
namespace {

// oneDNN's ISAs are bit sets, each holding the ones below it
// (dnnl_types.h): avx512_core_amx holds avx512_core_bf16, which holds
// avx512_core_vnni, ...
bool isa_has(dnnl::cpu_isa isa, dnnl::cpu_isa part) {
  return (unsigned(isa) & unsigned(part)) == unsigned(part);
}

// Whether oneDNN's effective ISA has instructions for dtype's arithmetic.
bool isa_computes(int32_t dtype) {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (dtype == FLX_BF16) return isa_has(isa, dnnl::cpu_isa::avx512_core_bf16);
  // oneDNN 2.6 knows no ISA with Float16 arithmetic (AVX512-FP16 came as
  // avx512_core_fp16 in 2.7): its CPU primitives refuse f16 anyway.
  return false;
}

}  // namespace

dnnl::memory::data_type data_type(int32_t dtype) {
  switch (dtype) {
    case FLX_BF16:
      return dnnl::memory::data_type::bf16;
    case FLX_F16:
      return dnnl::memory::data_type::f16;
    default:
      return dnnl::memory::data_type::f32;
  }
}

bool native_halves_enabled() {
  static const bool on = backend_common::env_switch("FLX_CPU_NATIVE_HALVES", true);
  return on;
}

std::string isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "no vector ISA";
  }
}

std::string describe(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  // Names such as "brg:avx512_core_bf16" and "jit_bf16:avx512_core_amx_bf16"
  // end in the ISA; "gemm:jit" (oneDNN's GEMM driver) does not.
  if (impl.find("avx") != std::string::npos || impl.find("sse") != std::string::npos) return impl;
  return impl + " on " + isa_name();
}

std::string no_kernel(const char* primitive, int32_t dtype, const dnnl::error& e) {
  const dnnl_version_t* v = dnnl_version();
  std::string why = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch) + " has no " + (dtype == FLX_BF16 ? "BFloat16 " : "Float16 ") +
                    primitive + " on this CPU's ISA, " + isa_name();
  if (e.status != dnnl_unimplemented) why += std::string(" (") + e.what() + ")";
  return why;
}

std::string emulation_reason(const dnnl::primitive_desc_base& pd, int32_t dtype) {
  const char* type = dtype == FLX_BF16 ? "BFloat16" : "Float16";
  const std::string impl = pd.impl_info_str();
  if (impl.rfind("ref", 0) == 0) return "oneDNN has only its reference implementation (" + impl + ") for " + type;
  if (!isa_computes(dtype))
    return "oneDNN's " + describe(pd) + " emulates " + type + " (its ISA, " + isa_name() + ", has no " + type +
           " arithmetic)";
  return "";
}

}  // namespace flx::cpu_backend::onednn

namespace flx::cpu_backend {

int precision_path(void*, int dev, flx_precision_path* p) {
  if (dev != 0) return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: the CPU backend has one device, 0");
  if (!p || p->struct_size < sizeof *p)
    return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: a null or short flx_precision_path");
  if (p->dtype != FLX_BF16 && p->dtype != FLX_F16)
    return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: dtype " + std::to_string(p->dtype) +
                                              " is not a half type (FLX_F16 or FLX_BF16)");
  auto answer = [&](int32_t speed, const std::string& how) {
    p->speed = speed;
    std::snprintf(p->how, sizeof p->how, "%s", how.c_str());
    return int(FLX_OK);
  };
  // GEMM and convolution: the plans the calls would use (a typical case).
  auto from = [&](const HalfPath& path, const char* widened) {
    return path.fast ? answer(FLX_PRECISION_FAST, "oneDNN " + path.how)
                     : answer(FLX_PRECISION_EMULATED, std::string(widened) + ": " + path.how);
  };
  return onednn::guarded("precision_path", [&] {
    switch (p->op) {
      case FLX_PRECISION_GEMM:
        return from(gemm_half_path(p->dtype), "Float32 copies on OpenBLAS");
      case FLX_PRECISION_CONV:
        return from(conv_half_path(p->dtype), "Float32 copies through oneDNN's Float32 convolution");
      case FLX_PRECISION_BATCHNORM:
        return answer(FLX_PRECISION_EMULATED, "direct loops widening each value as read; Float32 statistics");
      case FLX_PRECISION_ATTENTION:
        return answer(FLX_PRECISION_EMULATED, "Float32 copies of each head, on OpenBLAS");
      case FLX_PRECISION_RNN:
        return answer(FLX_PRECISION_EMULATED,
                      "cell by cell: the GEMMs above and Float32 maps; oneDNN's fused LSTM runs Float32 only");
    }
    return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: op " + std::to_string(p->op) + " is not one this "
                                          "backend knows (FLX_PRECISION_GEMM to FLX_PRECISION_RNN)");
  });
}

}  // namespace flx::cpu_backend

// How the CUDA backend runs Float16 and BFloat16 work (the core table's
// precision_path, ABI minor 9, optional), for flx-info: from the device's
// compute capability and what this plugin was built with, as its calls
// dispatch. GEMMs (cuda_gemm.cpp) compute in Float32 (CUBLAS_COMPUTE_32F)
// on the tensor cores from sm_80 on; convolution and batch norm run on cuDNN
// (the dnn table, when the build found cudnn.h); attention on flx's WMMA
// kernels for head sizes 16, 32, 64 and 128 (cuda_attention_wmma.cu, built
// for sm_80 and later), Float32 arithmetic for others; recurrent layers run
// cuDNN's RNN in Float32 and Float64 only, so half ones are the layer's
// GEMMs and maps, step by step (src/ops/recurrent_scan.cpp).
#include <cstdio>
#include <string>

#include "cuda_common.hpp"
#include "cuda_device.hpp"

#if FLX_BACKEND_TARGET_MINOR >= 9
namespace flx_cuda {

int precision_path(void*, int dev, flx_precision_path* p) {
  if (!p || p->struct_size < sizeof *p)
    return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: a null or short flx_precision_path");
  if (p->dtype != FLX_BF16 && p->dtype != FLX_F16)
    return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: dtype " + std::to_string(p->dtype) +
                                              " is not a half type (FLX_F16 or FLX_BF16)");
  DeviceState* st = nullptr;
  if (int e = device_state(dev, "precision_path", &st)) return e;
  int major = 0, minor = 0;
  if (int e = check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute"))
    return e;
  if (int e = check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute"))
    return e;
  const std::string sm = "sm_" + std::to_string(major) + std::to_string(minor);
  const bool tensor_cores = major >= 8;
#if FLX_CUDA_HAVE_CUDNN
  const bool cudnn = true;
#else
  const bool cudnn = false;
#endif
  auto answer = [&](int32_t speed, const std::string& how) {
    p->speed = speed;
    std::snprintf(p->how, sizeof p->how, "%s", how.c_str());
    return int(FLX_OK);
  };
  const char* no_cudnn = "this plugin was built without cuDNN (cudnn.h not found)";
  switch (p->op) {
    case FLX_PRECISION_GEMM:
      return tensor_cores ? answer(FLX_PRECISION_FAST, "cuBLAS on the tensor cores, Float32 accumulation")
                          : answer(FLX_PRECISION_EMULATED, "cuBLAS, Float32 compute; " + sm +
                                                               " is below sm_80, where flx uses the tensor cores");
    case FLX_PRECISION_CONV:
      return cudnn ? answer(FLX_PRECISION_FAST, "cuDNN, Float32 accumulation") : answer(FLX_PRECISION_MISSING, no_cudnn);
    case FLX_PRECISION_BATCHNORM:
      return cudnn ? answer(FLX_PRECISION_FAST, "cuDNN, Float32 statistics") : answer(FLX_PRECISION_MISSING, no_cudnn);
    case FLX_PRECISION_ATTENTION:
      if (!cudnn) return answer(FLX_PRECISION_EMULATED, std::string("tiles through the GEMMs: ") + no_cudnn);
      return tensor_cores ? answer(FLX_PRECISION_FAST,
                                   "flx's WMMA kernels on the tensor cores for head sizes 16, 32, 64 and 128 "
                                   "(other sizes: Float32 arithmetic)")
                          : answer(FLX_PRECISION_EMULATED, "Float32 arithmetic (the WMMA kernels need sm_80, this "
                                                           "device is " + sm + ")");
    case FLX_PRECISION_RNN:
      return answer(FLX_PRECISION_EMULATED,
                    "the layer's GEMMs and maps, step by step (cuDNN's RNN runs Float32 and Float64 here)");
  }
  return fail(FLX_ERR_INVALID_ARGUMENT, "precision_path: op " + std::to_string(p->op) +
                                            " is not one this backend knows (FLX_PRECISION_GEMM to FLX_PRECISION_RNN)");
}

}  // namespace flx_cuda
#endif

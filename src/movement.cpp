// gpu / cu targets. Only the CPU backend is built into libflx; GPU backends
// are plugins, so until one is loaded gpu() stays on the CPU (with one
// warning) and cu() fails with the reason.
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "flx/movement.hpp"
#include "tensor_impl.hpp"

namespace flx::detail {

static const char* no_gpu_reason() {
  return "no GPU backend plugin is available (only the CPU backend is built into this installation)";
}

Device gpu_target() {
  static std::once_flag warned;
  std::call_once(warned, [] {
    const char* silence = std::getenv("FLX_SILENCE_WARN_NO_GPU");
    if (silence && std::string(silence) == "1") return;
    std::fprintf(stderr,
                 "┌ Warning: flx: gpu() found no functional GPU: %s.\n"
                 "│ Data stays on the CPU. Set FLX_SILENCE_WARN_NO_GPU=1 to silence this warning.\n"
                 "└ @ flx\n",
                 no_gpu_reason());
  });
  return Device::cpu();
}

Device cuda_target() {
  FLX_THROW(BackendUnavailable, "cu: the CUDA backend is not available: ", no_gpu_reason(),
            ". Use gpu() to fall back to the CPU, or install flx with its CUDA plugin on a machine with an NVIDIA GPU");
}

Tensor to_gpu_eltype(const Tensor& t, Device d) {
  if (d.is_cpu()) return t.to(d);  // no GPU: gpu() leaves data as it is
  Tensor r = t.dtype() == DType::Float64 ? t.to(DType::Float32) : t;
  return r.to(d);
}

}  // namespace flx::detail

#include "flx/movement.hpp"

namespace flx::detail {

Tensor to_gpu_eltype(const Tensor& t, Device d) {
  if (d.is_cpu()) return t.to(d);  // no GPU: gpu() leaves data as it is
  Tensor r = t.dtype() == DType::Float64 ? t.to(DType::Float32) : t;
  return r.to(d);
}

}  // namespace flx::detail

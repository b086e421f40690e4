// Fused optimiser steps: Adam, one thread per element, the same arithmetic
// as the CPU (backends/cpu/cpu_optim.cpp), denormal flush included.
#include <cfloat>
#include <string>

#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace {

struct AdamArgs {
  double eta, beta1, beta2, eps, c1, c2;
};

template <class T>
__global__ void adam_kernel(AdamArgs p, const T* g, T* m, T* v, T* out, int64_t n, bool in_place) {
  const T b1 = T(p.beta1), b2 = T(p.beta2), eps = T(p.eps), eta = T(p.eta), c1 = T(p.c1), c2 = T(p.c2);
  const T tiny = sizeof(T) == 4 ? T(FLT_MIN) : T(DBL_MIN);
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const T gi = g[i];
    T mi = b1 * m[i] + (T(1) - b1) * gi;
    T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
    // As on the CPU: moments of dead units flush to zero instead of decaying
    // through denormals, so both backends keep the same state.
    mi = (mi < tiny && mi > -tiny) ? T(0) : mi;
    vi = vi < tiny ? T(0) : vi;
    m[i] = mi;
    v[i] = vi;
    const T step = eta * (mi * c1) / (sqrt(vi * c2) + eps);
    out[i] = in_place ? T(out[i] - step) : step;
  }
}

}  // namespace

int optim_step(void*, int dev, const flx_optim_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "optim_step")) return e;
  if (d->kind != FLX_OPTIM_ADAM)
    return fail(FLX_ERR_UNSUPPORTED, "optim_step: unknown optimiser kind " + std::to_string(d->kind) +
                                         " (the CUDA backend implements ADAM)");
  if (d->n == 0) return FLX_OK;
  AdamArgs p{d->eta, d->beta1, d->beta2, d->eps, 0, 0};
  const bool in_place = d->dx.buf == nullptr;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    // 1/(1-beta^t) computed as the CPU does: in T
    p.c1 = double(T(1) / T(1 - d->beta1_pow));
    p.c2 = double(T(1) / T(1 - d->beta2_pow));
    adam_kernel<T><<<blocks_for(d->n), 256, 0, st>>>(
        p, reinterpret_cast<const T*>(addr(d->grad)), reinterpret_cast<T*>(addr(d->m)),
        reinterpret_cast<T*>(addr(d->v)), reinterpret_cast<T*>(addr(in_place ? d->x : d->dx)), d->n, in_place);
  };
  switch (d->dtype) {
    case FLX_F32: run(float{}); break;
    case FLX_F64: run(double{}); break;
    case FLX_F16:
    case FLX_BF16: return dtype_error("optim_step", d->dtype, true);
    default:
      return fail(FLX_ERR_UNSUPPORTED, std::string("optim_step needs a floating dtype, got ") + dtype_name(d->dtype));
  }
  return launched("optim_step kernel (Adam)");
}

}  // namespace flx_cuda

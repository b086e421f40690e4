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

// T is the storage type; the arithmetic runs in C = compute_t<T>.
template <class T>
__global__ void adam_kernel(AdamArgs p, const T* g, T* m, T* v, T* out, int64_t n, bool in_place) {
  using C = compute_t<T>;
  const C b1 = C(p.beta1), b2 = C(p.beta2), eps = C(p.eps), eta = C(p.eta), c1 = C(p.c1), c2 = C(p.c2);
  const C tiny = sizeof(C) == 4 ? C(FLT_MIN) : C(DBL_MIN);
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const C gi = load(g[i]);
    C mi = b1 * load(m[i]) + (C(1) - b1) * gi;
    C vi = b2 * load(v[i]) + (C(1) - b2) * gi * gi;
    // As on the CPU: moments of dead units flush to zero instead of decaying
    // through denormals, so both backends keep the same state.
    mi = (mi < tiny && mi > -tiny) ? C(0) : mi;
    vi = vi < tiny ? C(0) : vi;
    m[i] = store<T>(mi);
    v[i] = store<T>(vi);
    const C step = eta * (mi * c1) / (sqrt(vi * c2) + eps);
    out[i] = store<T>(in_place ? C(load(out[i]) - step) : step);
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
    using C = compute_t<T>;
    p.c1 = double(C(1) / C(1 - d->beta1_pow));
    p.c2 = double(C(1) / C(1 - d->beta2_pow));
    adam_kernel<T><<<blocks_for(d->n), 256, 0, st>>>(
        p, reinterpret_cast<const T*>(addr(d->grad)), reinterpret_cast<T*>(addr(d->m)),
        reinterpret_cast<T*>(addr(d->v)), reinterpret_cast<T*>(addr(in_place ? d->x : d->dx)), d->n, in_place);
  };
  if (!dispatch_float_dtype(d->dtype, run))
    return fail(FLX_ERR_UNSUPPORTED, std::string("optim_step needs a floating dtype, got ") + dtype_name(d->dtype));
  return launched("optim_step kernel (Adam)");
}

}  // namespace flx_cuda

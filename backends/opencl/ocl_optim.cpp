// Fused optimiser steps: Adam updates m and v in place and writes the step
// to dx, or subtracts it from the parameter x when dx is NULL.
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

int optim_step(void*, int dev, const flx_optim_desc* dp, flx_stream s) {
  return guard("optim_step", [&] {
    const flx_optim_desc& d = *dp;
    if (d.kind != FLX_OPTIM_ADAM) raise(FLX_ERR_UNSUPPORTED, "unknown optimiser kind " + std::to_string(d.kind));
    require_float(d.dtype, "optim_step");
    size_t es = dtype_size(d.dtype);
    const bool has_dx = d.dx.buf != nullptr;
    elem_offset(d.grad, es, "optim_step");
    elem_offset(d.m, es, "optim_step");
    elem_offset(d.v, es, "optim_step");
    if (has_dx) elem_offset(d.dx, es, "optim_step");
    else elem_offset(d.x, es, "optim_step");
    Device& dv = device(dev);
    // The bias corrections C(1) / C(1 - beta^t), in the compute type as on the CPU.
    Scalar c1, c2;
    if (d.dtype == FLX_F64) {
      c1 = Scalar::of(1.0 / (1 - d.beta1_pow));
      c2 = Scalar::of(1.0 / (1 - d.beta2_pow));
    } else {
      c1 = Scalar::of(1.0f / float(1 - d.beta1_pow));
      c2 = Scalar::of(1.0f / float(1 - d.beta2_pow));
    }
    const int32_t t = d.dtype;
    launch(dv, queue_of(dv, s), kComputeKernels, t, "adam_k", size_t(d.n), as_mem(d.grad), cl_long(d.grad.offset),
           as_mem(d.m), cl_long(d.m.offset), as_mem(d.v), cl_long(d.v.offset), has_dx ? as_mem(d.dx) : cl_mem(nullptr),
           cl_long(d.dx.offset), cl_int(has_dx), has_dx ? cl_mem(nullptr) : as_mem(d.x), cl_long(d.x.offset),
           cl_long(d.n), compute_scalar(t, d.beta1), compute_scalar(t, d.beta2), compute_scalar(t, d.eps),
           compute_scalar(t, d.eta), c1, c2);
  });
}

}  // namespace flx_ocl

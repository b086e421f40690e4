// Optimiser steps: every rule of include/flx/backend_rules.h (rule_step,
// minor 12) through one kernel (kernels/optimiser.cl), and minor 0's
// optim_step as the same Adam.
#include <string>

#include "backend_common/adam_as_rule.hpp"
#include "backend_common/rule_info.hpp"
#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

int rule_step(void*, int dev, const flx_rule_desc* dp, flx_stream s) {
  return guard("rule_step", [&] {
    const flx_rule_desc& d = *dp;
    const int nstates = flx::rules::states(d.rule);
    if (nstates < 0)
      raise(FLX_ERR_UNSUPPORTED, "rule_step: unknown rule code " + std::to_string(d.rule) +
                                     " (backend_rules.h lists the rules this backend knows)");
    require_float(d.dtype, "rule_step");
    if (d.n == 0) return;
    const size_t es = dtype_size(d.dtype);
    const bool in_place = d.dx.buf == nullptr, read_x = d.x.buf != nullptr;
    elem_offset(d.grad, es, "rule_step");
    if (read_x) elem_offset(d.x, es, "rule_step");
    if (!in_place) elem_offset(d.dx, es, "rule_step");
    for (int k = 0; k < nstates; ++k) elem_offset(d.state[k], es, "rule_step");
    auto buf = [](flx_mem m) { return m.buf ? as_mem(m) : cl_mem(nullptr); };
    Device& dv = device(dev);
    const int32_t t = d.dtype;
    const double* p = d.param;
    launch(dv, queue_of(dv, s), kComputeKernels, t, "rule_k", size_t(d.n), cl_int(d.rule), cl_long(d.n), as_mem(d.grad),
           cl_long(d.grad.offset), buf(d.x), cl_long(d.x.offset), cl_int(read_x), buf(d.dx), cl_long(d.dx.offset),
           cl_int(in_place), cl_int(nstates), buf(d.state[0]), cl_long(d.state[0].offset), buf(d.state[1]),
           cl_long(d.state[1].offset), buf(d.state[2]), cl_long(d.state[2].offset), compute_scalar(t, p[0]),
           compute_scalar(t, p[1]), compute_scalar(t, p[2]), compute_scalar(t, p[3]), compute_scalar(t, p[4]),
           compute_scalar(t, p[5]), compute_scalar(t, p[6]), compute_scalar(t, p[7]));
  });
}

// Minor 0's fused Adam: the same rule.
int optim_step(void* ctx, int dev, const flx_optim_desc* d, flx_stream s) {
  if (d->kind != FLX_OPTIM_ADAM)
    return guard("optim_step",
                 [&] { raise(FLX_ERR_UNSUPPORTED, "unknown optimiser kind " + std::to_string(d->kind)); });
  const flx_rule_desc r = flx::backend_common::adam_as_rule(*d);
  return rule_step(ctx, dev, &r, s);
}

}  // namespace flx_ocl

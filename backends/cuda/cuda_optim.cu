// Optimiser steps: every rule of include/flx/backend_rules.h (rule_step,
// minor 12), one thread per element, the element updates compiled from that
// header as the CPU compiles them (backends/cpu/cpu_optim.cpp); and minor
// 0's optim_step as the same Adam.
#include <cfloat>
#include <string>

#include "backend_common/adam_as_rule.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace rules {
// sqrt resolves to CUDA's global device overloads (float and double).
#define FLX_ELEM_FN template <class CT> __device__ inline
#define FLX_ELEM_IS_FLOAT 1
#define FLX_CT_MIN (sizeof(CT) == 4 ? CT(FLT_MIN) : CT(DBL_MIN))
#include "flx/backend_elem.h"
#include "flx/backend_rules.h"
#define FLX_RULE_FN_PREFIX __device__
#include "backend_common/rule_functors.inc"
#undef FLX_RULE_FN_PREFIX
#undef FLX_CT_MIN
#undef FLX_ELEM_IS_FLOAT
#undef FLX_ELEM_FN
#undef K
}  // namespace rules

namespace {

// The descriptor as the kernel reads it, by value.
template <class C>
struct RuleArgs {
  C param[FLX_RULE_MAX_PARAMS];
  int64_t n;
  bool in_place;
};

// T is the storage type; the arithmetic runs in C = compute_t<T>. Rule is a
// function object calling the rule's body.
template <class T, class Rule>
__global__ void rule_kernel(RuleArgs<compute_t<T>> a, const T* g, T* x, T* dx, T* s0, T* s1, T* s2) {
  using C = compute_t<T>;
  constexpr int States = Rule::states;
  for (int64_t i = global_index(); i < a.n; i += global_stride()) {
    C s[States];
    if constexpr (States > 0) s[0] = load(s0[i]);
    if constexpr (States > 1) s[1] = load(s1[i]);
    if constexpr (States > 2) s[2] = load(s2[i]);
    const C xi = x ? C(load(x[i])) : C(0);
    const C step = Rule{}(a.param, C(load(g[i])), xi, s);
    if constexpr (States > 0) s0[i] = store<T>(s[0]);
    if constexpr (States > 1) s1[i] = store<T>(s[1]);
    if constexpr (States > 2) s2[i] = store<T>(s[2]);
    if (a.in_place) x[i] = store<T>(C(xi - step));
    else dx[i] = store<T>(step);
  }
}

template <class T>
T* typed(flx_mem m) {
  return m.buf ? reinterpret_cast<T*>(addr(m)) : nullptr;
}

}  // namespace

int rule_step(void*, int dev, const flx_rule_desc* d, flx_stream s) {
  cudaStream_t st;
  if (int e = enter(dev, s, &st, "rule_step")) return e;
  if (d->n == 0) return FLX_OK;
  bool known = true;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    RuleArgs<C> a{};
    for (int k = 0; k < FLX_RULE_MAX_PARAMS; ++k) a.param[k] = C(d->param[k]);
    a.n = d->n;
    a.in_place = d->dx.buf == nullptr;
    const T* g = typed<const T>(d->grad);
    T *x = typed<T>(d->x), *dx = typed<T>(d->dx);
    T *s0 = typed<T>(d->state[0]), *s1 = typed<T>(d->state[1]), *s2 = typed<T>(d->state[2]);
    switch (d->rule) {
#define FLX_RULE_CASE_(NAME, CODE, STATES, BODY)                                                     \
  case CODE:                                                                                        \
    rule_kernel<T, rules::Rule_##NAME><<<blocks_for(d->n), 256, 0, st>>>(a, g, x, dx, s0, s1, s2); \
    break;
      FLX_RULES(FLX_RULE_CASE_)
#undef FLX_RULE_CASE_
      default:
        known = false;
    }
  };
  if (!dispatch_float_dtype(d->dtype, run))
    return fail(FLX_ERR_UNSUPPORTED, std::string("rule_step needs a floating dtype, got ") + dtype_name(d->dtype));
  if (!known)
    return fail(FLX_ERR_UNSUPPORTED, "rule_step: unknown rule code " + std::to_string(d->rule) +
                                         " (backend_rules.h lists the rules this backend knows)");
  return launched("rule_step kernel");
}

// Minor 0's fused Adam: the same rule.
int optim_step(void* ctx, int dev, const flx_optim_desc* d, flx_stream s) {
  if (d->kind != FLX_OPTIM_ADAM)
    return fail(FLX_ERR_UNSUPPORTED, "optim_step: unknown optimiser kind " + std::to_string(d->kind) +
                                         " (the CUDA backend implements ADAM)");
  const flx_rule_desc r = flx::backend_common::adam_as_rule(*d);
  return rule_step(ctx, dev, &r, s);
}

}  // namespace flx_cuda

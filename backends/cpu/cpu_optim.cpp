// CPU optimiser steps: every rule of include/flx/backend_rules.h (the
// compute table's rule_step), with the element updates compiled from that
// header, and Adam's optim_step of minor 0 as the same Adam.
#include <cmath>
#include <limits>
#include <string>

#include "backend_common/adam_as_rule.hpp"
#include "cpu_common.hpp"

namespace flx::cpu_backend {

namespace rules {
using std::sqrt;
#define FLX_ELEM_FN template <class CT> inline __attribute__((always_inline))
#define FLX_ELEM_IS_FLOAT 1
#define FLX_CT_MIN std::numeric_limits<CT>::min()
#include "flx/backend_elem.h"
#include "flx/backend_rules.h"
#define FLX_RULE_FN_PREFIX inline __attribute__((always_inline))
#include "backend_common/rule_functors.inc"
#undef FLX_RULE_FN_PREFIX
#undef FLX_CT_MIN
#undef FLX_ELEM_IS_FLOAT
#undef FLX_ELEM_FN
#undef K
}  // namespace rules

namespace {

// One rule's steps over elements [lo, hi): states loaded into registers,
// the body, states stored. In_place subtracts the step from x, else writes
// it to dx; Read_x loads x (in place, or for the rules that read it). Body
// is a function object over the compute type. Every choice is a template
// argument, so the loop has no branch and vectorises.
template <class T, int States, bool In_place, bool Read_x, class Body>
inline __attribute__((always_inline)) void rule_chunk(const flx_rule_desc& d, Body body, int64_t lo, int64_t hi) {
  using C = compute_t<T>;
  C p[FLX_RULE_MAX_PARAMS];
  for (int k = 0; k < FLX_RULE_MAX_PARAMS; ++k) p[k] = C(d.param[k]);
  // x is read (by the rules that use it, and in place) and written (in
  // place) through one pointer: restrict allows no second one to it.
  const T* __restrict g = ptr_or_null<const T>(d.grad);
  T* __restrict xp = ptr_or_null<T>(d.x);
  T* __restrict dx = ptr_or_null<T>(d.dx);
  T* __restrict s0 = ptr_or_null<T>(d.state[0]);
  T* __restrict s1 = ptr_or_null<T>(d.state[1]);
  T* __restrict s2 = ptr_or_null<T>(d.state[2]);
  // No `omp simd` here: it gives each lane its own copy of the arrays whose
  // address the body takes (p, s) and reads them as gathers; the restrict
  // pointers are enough for GCC to vectorise the loop.
  for (int64_t i = lo; i < hi; ++i) {
    C s[States > 0 ? States : 1];
    if constexpr (States > 0) s[0] = load(s0[i]);
    if constexpr (States > 1) s[1] = load(s1[i]);
    if constexpr (States > 2) s[2] = load(s2[i]);
    const C x = Read_x ? C(load(xp[i])) : C(0);
    const C step = body(p, C(load(g[i])), x, s);
    if constexpr (States > 0) s0[i] = store<T>(s[0]);
    if constexpr (States > 1) s1[i] = store<T>(s[1]);
    if constexpr (States > 2) s2[i] = store<T>(s[2]);
    if constexpr (In_place) xp[i] = store<T>(x - step);
    else dx[i] = store<T>(step);
  }
}

template <class T, class Body>
inline __attribute__((always_inline)) void rule_range(const flx_rule_desc& d, Body body, int64_t lo, int64_t hi) {
  constexpr int States = Body::states;
  if (d.dx.buf == nullptr) rule_chunk<T, States, true, true>(d, body, lo, hi);
  else if (d.x.buf != nullptr) rule_chunk<T, States, false, true>(d, body, lo, hi);
  else rule_chunk<T, States, false, false>(d, body, lo, hi);
}

// Float32, the common case, also gets an AVX2 build picked at run time
// (sqrt and division dominate the Adam-like rules; 8 lanes instead of 4).
#define FLX_RULE_F32_(NAME, CODE, STATES, BODY)                                                         \
  __attribute__((target_clones("avx2", "default"))) void NAME##_f32(const flx_rule_desc& d, int64_t lo, \
                                                                    int64_t hi) {                       \
    rule_range<float>(d, rules::Rule_##NAME{}, lo, hi);                                                 \
  }
FLX_RULES(FLX_RULE_F32_)
#undef FLX_RULE_F32_

template <class T>
int run_rule(const flx_rule_desc& d) {
  switch (d.rule) {
#define FLX_RULE_CASE_(NAME, CODE, STATES, BODY)                                   \
  case CODE:                                                                       \
    parallel_for(d.n, parallel_grain, [&](int64_t lo, int64_t hi) {                \
      if constexpr (std::is_same_v<T, float>) NAME##_f32(d, lo, hi);               \
      else rule_range<T>(d, rules::Rule_##NAME{}, lo, hi);                         \
    });                                                                            \
    return FLX_OK;
    FLX_RULES(FLX_RULE_CASE_)
#undef FLX_RULE_CASE_
  }
  return fail(FLX_ERR_UNSUPPORTED, "rule_step: unknown rule code " + std::to_string(d.rule) +
                                       " (backend_rules.h lists the rules this backend knows)");
}

}  // namespace

int rule_step(void*, int, const flx_rule_desc* dp, flx_stream) {
  const flx_rule_desc& d = *dp;
  if (d.n == 0) return FLX_OK;
  int status = FLX_OK;
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) status = run_rule<T>(d);
    else status = fail(FLX_ERR_UNSUPPORTED, "rule_step needs a floating dtype");
  });
  return status;
}

// Minor 0's fused Adam: the same rule.
int optim_step(void* ctx, int dev, const flx_optim_desc* d, flx_stream s) {
  if (d->kind != FLX_OPTIM_ADAM) return fail(FLX_ERR_UNSUPPORTED, "optim_step: unknown kind");
  const flx_rule_desc r = backend_common::adam_as_rule(*d);
  return rule_step(ctx, dev, &r, s);
}

}  // namespace flx::cpu_backend

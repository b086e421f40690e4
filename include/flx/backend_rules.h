/* flx backend ABI: the one list of optimiser rules' element updates.
 *
 * Every rule with per-element state (Optimisers.jl's Momentum, Adam, NAdam,
 * ...) has its element update written here once, as a function in the
 * subset shared by C++, CUDA C and OpenCL C (as backend_elem.h's are): the
 * CPU backend, the CUDA kernels and the OpenCL kernels (this file is
 * embedded in their source) all step with this code, so a rule is the same
 * arithmetic on every device. The compute table's rule_step (minor 12)
 * runs them; libflx computes the host scalars (βᵗ, bias corrections) and
 * passes them as the parameters p (src/optimisers/).
 *
 *   X(NAME, CODE, STATES, BODY)
 *
 * NAME    FLX_RULE_<NAME> in enum flx_rule (backend.h).
 * CODE    part of the ABI: never renumber, never reuse.
 * STATES  how many state tensors the rule keeps per parameter (at most
 *         FLX_RULE_MAX_STATES); libflx passes them in this order.
 * BODY    the element function, called as BODY(p, g, x, s): p the rule's
 *         parameters (FLX_RULE_MAX_PARAMS, in the compute type CT; the
 *         comment above each body says what each is), g the gradient, x the
 *         parameter (for the rules that read it), s the states, read and
 *         written. It returns the step, which the backend subtracts from x
 *         or writes out.
 *
 * Stateless rules (Descent, WeightDecay, ClipGrad, SignDecay) are one map op
 * each and stay compositions of backend_ops.h's ops.
 *
 * Adding a rule: a line in FLX_RULES with a new code and a body below; a
 * line in FLX_RULES_ADDED with the ABI minor version that brings it (raise
 * FLX_BACKEND_ABI_MINOR in backend_types.h if no change on main has yet); the rule
 * in include/flx/optimiser_rules.hpp and its host scalars in
 * src/optimisers/; a case in the conformance suite and a closed form. See
 * docs/optimisers.md.
 */
#ifndef FLX_BACKEND_RULES_H
#define FLX_BACKEND_RULES_H

#define FLX_RULE_MAX_STATES 3
#define FLX_RULE_MAX_PARAMS 8

/* clang-format off */
#define FLX_RULES(X) \
  X(ADAM,       0, 2, rule_adam) \
  X(ADAMW,      1, 2, rule_adamw) \
  X(MOMENTUM,   2, 1, rule_momentum) \
  X(NESTEROV,   3, 1, rule_nesterov) \
  X(RMSPROP,    4, 2, rule_rmsprop) \
  X(NADAM,      5, 2, rule_nadam) \
  X(RADAM,      6, 2, rule_radam) \
  X(ADAMAX,     7, 2, rule_adamax) \
  X(OADAM,      8, 3, rule_oadam) \
  X(ADAGRAD,    9, 1, rule_adagrad) \
  X(ADADELTA,  10, 2, rule_adadelta) \
  X(AMSGRAD,   11, 3, rule_amsgrad) \
  X(ADABELIEF, 12, 2, rule_adabelief) \
  X(LION,      13, 1, rule_lion) \
  X(RPROP,     14, 2, rule_rprop) \
  X(ACCUMGRAD, 15, 1, rule_accumgrad)

/* The ABI minor version that brought each rule. */
#define FLX_RULES_ADDED(X) \
  X(ADAM, 12) X(ADAMW, 12) X(MOMENTUM, 12) X(NESTEROV, 12) X(RMSPROP, 12) X(NADAM, 12) X(RADAM, 12) \
  X(ADAMAX, 12) X(OADAM, 12) X(ADAGRAD, 12) X(ADADELTA, 12) X(AMSGRAD, 12) X(ADABELIEF, 12) X(LION, 12) \
  X(RPROP, 12) X(ACCUMGRAD, 12)
/* clang-format on */

#endif /* FLX_BACKEND_RULES_H */

/* ---- the bodies ------------------------------------------------------------
 * Compiled where the includer has included backend_elem.h (with FLX_ELEM_FN,
 * and FLX_ELEM_IS_FLOAT true: the rules take floating types only) and
 * defined FLX_CT_MIN, the smallest normal number of CT. */
#if defined(FLX_BACKEND_ELEM_H) && FLX_ELEM_IS_FLOAT && !defined(FLX_BACKEND_RULE_BODIES)
#define FLX_BACKEND_RULE_BODIES

/* Moments below the smallest normal number flush to zero: a dead unit's
 * moments would otherwise decay through the denormals, where x86
 * arithmetic is ~100x slower, and a device that flushes them in hardware
 * would keep another state than the CPU. */
FLX_ELEM_FN CT flush_denormal(CT v) { return abs_of(v) < FLX_CT_MIN ? K(0) : v; }

/* Adam's moments, for every rule that keeps them: m = β₁m + (1-β₁)g,
 * v = β₂v + (1-β₂)g², flushed. */
FLX_ELEM_FN void adam_moments(CT b1, CT b2, CT g, CT* m, CT* v) {
  *m = flush_denormal(b1 * *m + (K(1) - b1) * g);
  *v = flush_denormal(b2 * *v + (K(1) - b2) * g * g);
}

/* p = {η, β₁, β₂, ϵ, 1/(1-β₁ᵗ), 1/(1-β₂ᵗ)}; s = {m, v}. */
FLX_ELEM_FN CT rule_adam(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  return p[0] * (s[0] * p[4]) / (sqrt(s[1] * p[5]) + p[3]);
}

/* Adam's unit step u plus decoupled decay: η(u + λx) when coupled, else
 * ηu + λx. p = {η, β₁, β₂, ϵ, 1/(1-β₁ᵗ), 1/(1-β₂ᵗ), λ, coupled}. */
FLX_ELEM_FN CT rule_adamw(const CT* p, CT g, CT x, CT* s) {
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  CT u = (s[0] * p[4]) / (sqrt(s[1] * p[5]) + p[3]);
  if (p[6] == K(0)) return u * p[0];
  return p[7] != K(0) ? (u + x * p[6]) * p[0] : u * p[0] + x * p[6];
}

/* v = ρv + ηg; the step is v. p = {η, ρ}. */
FLX_ELEM_FN CT rule_momentum(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] * p[1] + g * p[0];
  return s[0];
}

/* -ρ²v + (1+ρ)ηg, then v = ρv - ηg. p = {η, ρ, -ρ², (1+ρ)η}. */
FLX_ELEM_FN CT rule_nesterov(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  CT step = s[0] * p[2] + g * p[3];
  s[0] = s[0] * p[1] - g * p[0];
  return step;
}

/* quad = ρ quad + (1-ρ)g² (and lin = ρ lin + (1-ρ)g when centred);
 * ηg/(√(quad - lin²) + ϵ). p = {η, ρ, ϵ, 1-ρ, centred}; s = {quad, lin}. */
FLX_ELEM_FN CT rule_rmsprop(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] * p[1] + g * g * p[3];
  CT denom;
  if (p[4] != K(0)) {
    s[1] = s[1] * p[1] + g * p[3];
    denom = sqrt(s[0] - s[1] * s[1]);
  } else {
    denom = sqrt(s[0]);
  }
  return g * p[0] / (denom + p[2]);
}

/* (β₁m/(1-β₁β₁ᵗ) + (1-β₁)g/(1-β₁ᵗ)) / (√(β₂v/(1-β₂ᵗ)) + ϵ) η.
 * p = {η, β₁, β₂, ϵ, β₁/(1-β₁β₁ᵗ), (1-β₁)/(1-β₁ᵗ), β₂/(1-β₂ᵗ)}. */
FLX_ELEM_FN CT rule_nadam(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  return (s[0] * p[4] + g * p[5]) / (sqrt(s[1] * p[6]) + p[3]) * p[0];
}

/* Rectified: m/(1-β₁ᵗ)/(√(v/(1-β₂ᵗ)) + ϵ) ηr; else m η/(1-β₁ᵗ).
 * p = {ηr, or η/(1-β₁ᵗ) when not rectified, β₁, β₂, ϵ, 1-β₁ᵗ, 1-β₂ᵗ, rectified}. */
FLX_ELEM_FN CT rule_radam(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  if (p[6] != K(0)) return s[0] / p[4] / (sqrt(s[1] / p[5]) + p[3]) * p[0];
  return s[0] * p[0];
}

/* m = β₁m + (1-β₁)g, u = max(β₂u, |g|); m/(u + ϵ) η/(1-β₁ᵗ).
 * p = {η/(1-β₁ᵗ), β₁, β₂, ϵ}; s = {m, u}. */
FLX_ELEM_FN CT rule_adamax(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] * p[1] + g * (K(1) - p[1]);
  s[1] = max_nan(s[1] * p[2], abs_of(g));
  return s[0] / (s[1] + p[3]) * p[0];
}

/* 2·term - the last term, term being Adam's step m/(1-β₁ᵗ)/(√(v/(1-β₂ᵗ)) + ϵ) η.
 * p = {η, β₁, β₂, ϵ, 1-β₁ᵗ, 1-β₂ᵗ}; s = {m, v, term}. */
FLX_ELEM_FN CT rule_oadam(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  CT now = s[0] / p[4] / (sqrt(s[1] / p[5]) + p[3]) * p[0];
  CT step = now * K(2) - s[2];
  s[2] = now;
  return step;
}

/* acc += g²; ηg/(√acc + ϵ). p = {η, ϵ}. */
FLX_ELEM_FN CT rule_adagrad(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] + g * g;
  return g * p[0] / (sqrt(s[0]) + p[1]);
}

/* acc = ρacc + (1-ρ)g²; step = g√(Δacc + ϵ)/√(acc + ϵ) with the old Δacc;
 * Δacc = ρΔacc + (1-ρ)step². p = {ρ, ϵ, 1-ρ}; s = {acc, Δacc}. */
FLX_ELEM_FN CT rule_adadelta(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] * p[0] + g * g * p[2];
  CT step = g * sqrt(s[1] + p[1]) / sqrt(s[0] + p[1]);
  s[1] = s[1] * p[0] + step * step * p[2];
  return step;
}

/* v̂ = max(v̂, v); ηm/(√v̂ + ϵ). p = {η, β₁, β₂, ϵ}; s = {m, v, v̂}. */
FLX_ELEM_FN CT rule_amsgrad(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  adam_moments(p[1], p[2], g, &s[0], &s[1]);
  s[2] = max_nan(s[2], s[1]);
  return s[0] * p[0] / (sqrt(s[2]) + p[3]);
}

/* m = β₁m + (1-β₁)g, s = β₂s + (1-β₂)(g-m)² + ϵ; mη/(1-β₁ᵗ)/(√(s/(1-β₂ᵗ)) + ϵ).
 * p = {η, β₁, β₂, ϵ, 1-β₁ᵗ, 1-β₂ᵗ}. */
FLX_ELEM_FN CT rule_adabelief(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = s[0] * p[1] + g * (K(1) - p[1]);
  CT d = g - s[0];
  s[1] = s[1] * p[2] + d * d * (K(1) - p[2]) + p[3];
  return s[0] * p[0] / p[4] / (sqrt(s[1] / p[5]) + p[3]);
}

/* As Optimisers.jl 0.4 writes it: m = β₂g + (1-β₂)m, then
 * η sign((β₂-β₁)g + β₁m) with the new m. p = {η, β₁, β₂}. */
FLX_ELEM_FN CT rule_lion(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = g * p[2] + s[0] * (K(1) - p[2]);
  return sign_of(g * (p[2] - p[1]) + s[0] * p[1]) * p[0];
}

/* The step size grows by ℓ₊ (at most Γ₊) while g keeps the last kept
 * gradient's sign, shrinks by ℓ₋ (at least Γ₋) when it flips; the kept
 * gradient is 0 after a flip, else g; the step is size·sign(kept).
 * p = {ℓ₋, ℓ₊, Γ₋, Γ₊}; s = {kept gradient, size}. */
FLX_ELEM_FN CT rule_rprop(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  CT prod = s[0] * g;
  CT up = min_nan(s[1] * p[1], p[3]), down = max_nan(s[1] * p[0], p[2]);
  s[1] = prod > K(0) ? up : (prod < K(0) ? down : s[1]);
  s[0] = prod < K(0) ? K(0) : g;
  return s[1] * sign_of(s[0]);
}

/* The running mean of n gradients, restarted on the first of each n.
 * p = {n, first}; s = {mean}. */
FLX_ELEM_FN CT rule_accumgrad(const CT* p, CT g, CT x, CT* s) {
  (void)x;
  s[0] = p[1] != K(0) ? g / p[0] : s[0] + g / p[0];
  return s[0];
}

#endif /* FLX_BACKEND_RULE_BODIES */

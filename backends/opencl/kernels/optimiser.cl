// Optimiser rules (rule_step): each element's step from the rule's body in
// include/flx/backend_rules.h (its text replaces the #include at build
// time), the states updated in place; the step goes to dx or is subtracted
// from x.
#if IS_FLOAT
// The bodies flush moments below the smallest normal number of CT.
#if DT == D_F64
#define FLX_CT_MIN DBL_MIN
#else
#define FLX_CT_MIN FLT_MIN
#endif
#include "flx/backend_rules.h"

CT rule_body(int rule, const CT* p, CT g, CT x, CT* s) {
  switch (rule) {
#define FLX_RULE_CASE_(NAME, CODE, STATES, BODY) \
  case CODE:                                     \
    return BODY(p, g, x, s);
    FLX_RULES(FLX_RULE_CASE_)
#undef FLX_RULE_CASE_
  }
  return K(0);
}

kernel void rule_k(int rule, long n, global const uchar* gb, long go, global uchar* xb, long xo, int read_x,
                   global uchar* db, long doff, int in_place, int nstates, global uchar* s0b, long s0o,
                   global uchar* s1b, long s1o, global uchar* s2b, long s2o, CT p0, CT p1, CT p2, CT p3, CT p4,
                   CT p5, CT p6, CT p7) {
  const CT p[FLX_RULE_MAX_PARAMS] = {p0, p1, p2, p3, p4, p5, p6, p7};
  global const ST* g = CPTR(ST, gb, go);
  for (long i = GID; i < n; i += GSIZE) {
    CT s[FLX_RULE_MAX_STATES];
    if (nstates > 0) s[0] = ld(PTR(ST, s0b, s0o), i);
    if (nstates > 1) s[1] = ld(PTR(ST, s1b, s1o), i);
    if (nstates > 2) s[2] = ld(PTR(ST, s2b, s2o), i);
    CT x = read_x ? ld(PTR(ST, xb, xo), i) : K(0);
    CT step = rule_body(rule, p, ld(g, i), x, s);
    if (nstates > 0) st(PTR(ST, s0b, s0o), i, s[0]);
    if (nstates > 1) st(PTR(ST, s1b, s1o), i, s[1]);
    if (nstates > 2) st(PTR(ST, s2b, s2o), i, s[2]);
    if (in_place) st(PTR(ST, xb, xo), i, x - step);
    else st(PTR(ST, db, doff), i, step);
  }
}
#endif

// Softmax and logsoftmax over the middle axis of (inner, len, outer), forward
// and backward. The row maximum steps by include/flx/backend_window.h's
// softmax_max (a NaN never wins, as on the CPU: the row still comes out NaN
// through its sum), whose text replaces the #include at build time.
#if IS_FLOAT
#include "flx/backend_window.h"
kernel void softmax_k(int lg, global const uchar* xb, long xo, global uchar* yb, long yo, long inner, long len,
                      long outer) {
  global const ST* x = CPTR(ST, xb, xo);
  global ST* y = PTR(ST, yb, yo);
  for (long t = GID; t < inner * outer; t += GSIZE) {
    long i = t % inner, o = t / inner, base = o * inner * len + i;
    CT m = -INFINITY;
    for (long j = 0; j < len; ++j) m = softmax_max(m, ld(x, base + j * inner));
    AT s = 0;
    for (long j = 0; j < len; ++j) s += exp((AT)(ld(x, base + j * inner) - m));
    if (lg) {
      CT ls = (CT)log(s);
      for (long j = 0; j < len; ++j) st(y, base + j * inner, ld(x, base + j * inner) - m - ls);
    } else {
      CT inv = (CT)((AT)1 / s);
      for (long j = 0; j < len; ++j) st(y, base + j * inner, exp(ld(x, base + j * inner) - m) * inv);
    }
  }
}

// softmax: dx = y .* (dy - sum(dy .* y)); logsoftmax: dx = dy - exp(y) .* sum(dy)
kernel void softmax_bwd_k(int lg, global const uchar* yb, long yo, global const uchar* gb, long go, global uchar* db,
                          long doff, long inner, long len, long outer) {
  global const ST* y = CPTR(ST, yb, yo);
  global const ST* dy = CPTR(ST, gb, go);
  global ST* dx = PTR(ST, db, doff);
  for (long t = GID; t < inner * outer; t += GSIZE) {
    long i = t % inner, o = t / inner, base = o * inner * len + i;
    AT s = 0;
    for (long j = 0; j < len; ++j) {
      long k = base + j * inner;
      s += lg ? (AT)ld(dy, k) : (AT)ld(dy, k) * (AT)ld(y, k);
    }
    for (long j = 0; j < len; ++j) {
      long k = base + j * inner;
      CT yv = ld(y, k), g = ld(dy, k);
      st(dx, k, lg ? (CT)(g - exp(yv) * (CT)s) : (CT)(yv * (g - (CT)s)));
    }
  }
}
#endif

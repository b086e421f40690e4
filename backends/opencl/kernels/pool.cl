// Pooling: one work-item per output (forward) or per input element
// (backward, gathering over the windows that hold it). Windows are walked in
// the libraries' order, dim 0 fastest, so "first" means the same as in
// cuDNN and oneDNN. Which element is a window's maximum is
// include/flx/backend_window.h's rule (its text replaces the #include at
// build time), the body the CPU and CUDA compile too.
#if IS_FLOAT
#ifndef FLX_ELEM_FN
#define FLX_ELEM_FN inline  // as backend_elem.h is compiled, which the dnn family does not include
#endif
#include "flx/backend_window.h"

// The maximum of the window whose first element (padding included) is at
// `start` in the plane at x + plane: the offset in the plane of the element
// that takes its gradient, or -1 when none does (a window of padding only,
// whose maximum is -Inf, or a NaN maximum).
long window_argmax(global const ST* x, long plane, long4 start, long4 in, long4 win, CT* best_out) {
  CT best = -INFINITY;
  long at = -1;
  for (long k2 = 0; k2 < win.z; ++k2)
    for (long k1 = 0; k1 < win.y; ++k1)
      for (long k0 = 0; k0 < win.x; ++k0) {
        const long4 e = start + (long4)(k0, k1, k2, 0);
        if (e.x < 0 || e.x >= in.x || e.y < 0 || e.y >= in.y || e.z < 0 || e.z >= in.z) continue;
        const CT v = ld(x, plane + flat(e, in));
        if (pool_max_takes(v, best, at < 0)) {
          best = v;
          at = flat(e, in);
        }
      }
  *best_out = best;
  return pool_max_sends(best) ? at : -1;
}

kernel void pool_fwd_k(global const uchar* xb, long xo, global uchar* yb, long yo, int is_max, long CN, long4 in,
                       long4 out, long4 win, long4 str, long4 pad) {
  global const ST* x = CPTR(ST, xb, xo);
  global ST* y = PTR(ST, yb, yo);
  const long P = vol(out), ivol = vol(in);
  for (long t = GID; t < CN * P; t += GSIZE) {
    const long cn = t / P;
    const long4 o = coords(t % P, out) * str - pad;
    if (is_max) {
      CT best;
      (void)window_argmax(x, cn * ivol, o, in, win, &best);
      st(y, t, best);
      continue;
    }
    AT sum = 0;
    for (long k2 = 0; k2 < win.z; ++k2)
      for (long k1 = 0; k1 < win.y; ++k1)
        for (long k0 = 0; k0 < win.x; ++k0) {
          const long4 i = o + (long4)(k0, k1, k2, 0);
          if (i.x < 0 || i.x >= in.x || i.y < 0 || i.y >= in.y || i.z < 0 || i.z >= in.z) continue;
          sum += (AT)ld(x, cn * ivol + flat(i, in));
        }
    st(y, t, (CT)(sum / (AT)vol(win)));  // mean: the full window, padding included
  }
}

// dx[i] sums, over the windows o holding i, dy[o] / window size (mean) or
// dy[o] when i is the element that window_argmax says takes o's gradient
// (max; none for a NaN maximum, as in the reference).
kernel void pool_bwd_k(global const uchar* xb, long xo, global const uchar* yb, long yo, global const uchar* gb,
                       long go, global uchar* db, long doff, int is_max, long CN, long4 in, long4 out, long4 win,
                       long4 str, long4 pad) {
  global const ST* x = CPTR(ST, xb, xo);
  global const ST* y = CPTR(ST, yb, yo);
  global const ST* dy = CPTR(ST, gb, go);
  global ST* dx = PTR(ST, db, doff);
  const long P = vol(out), ivol = vol(in);
  for (long t = GID; t < CN * ivol; t += GSIZE) {
    const long cn = t / ivol, me = t % ivol;
    const long4 i = coords(me, in);
    const CT xv = ld(x, t);
    AT s = 0;
    for (long k2 = 0; k2 < win.z; ++k2) {
      const long q2 = i.z + pad.z - k2;
      if (q2 < 0) break;
      if (q2 % str.z || q2 / str.z >= out.z) continue;
      for (long k1 = 0; k1 < win.y; ++k1) {
        const long q1 = i.y + pad.y - k1;
        if (q1 < 0) break;
        if (q1 % str.y || q1 / str.y >= out.y) continue;
        for (long k0 = 0; k0 < win.x; ++k0) {
          const long q0 = i.x + pad.x - k0;
          if (q0 < 0) break;
          if (q0 % str.x || q0 / str.x >= out.x) continue;
          const long4 o = (long4)(q0 / str.x, q1 / str.y, q2 / str.z, 0);
          const long yi = cn * P + flat(o, out);
          if (!is_max) {
            s += (AT)ld(dy, yi);
            continue;
          }
          // The window's maximum is y[o]: an element of another value does
          // not hold it (nor does any when it is NaN), and is spared the scan.
          if (xv != ld(y, yi)) continue;
          CT best;
          if (window_argmax(x, cn * ivol, o * str - pad, in, win, &best) == me) s += (AT)ld(dy, yi);
        }
      }
    }
    st(dx, t, is_max ? (CT)s : (CT)(s / (AT)vol(win)));
  }
}
#endif

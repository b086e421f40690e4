// Pooling: one work-item per output (forward) or per input element
// (backward, gathering over the windows that hold it). Windows are walked in
// the libraries' order, dim 0 fastest, so "first" means the same as in
// cuDNN and oneDNN.
#if IS_FLOAT
kernel void pool_fwd_k(global const uchar* xb, long xo, global uchar* yb, long yo, int is_max, long CN, long4 in,
                       long4 out, long4 win, long4 str, long4 pad) {
  global const ST* x = CPTR(ST, xb, xo);
  global ST* y = PTR(ST, yb, yo);
  const long P = vol(out), ivol = vol(in);
  for (long t = GID; t < CN * P; t += GSIZE) {
    const long cn = t / P;
    const long4 o = coords(t % P, out) * str - pad;
    CT best = -INFINITY;  // padding never wins: a window of padding only gives -Inf
    AT sum = 0;
    for (long k2 = 0; k2 < win.z; ++k2)
      for (long k1 = 0; k1 < win.y; ++k1)
        for (long k0 = 0; k0 < win.x; ++k0) {
          const long4 i = o + (long4)(k0, k1, k2, 0);
          if (i.x < 0 || i.x >= in.x || i.y < 0 || i.y >= in.y || i.z < 0 || i.z >= in.z) continue;
          const CT v = ld(x, cn * ivol + flat(i, in));
          if (is_max) {
            if (!isnan(best) && (v > best || isnan(v))) best = v;  // a NaN sticks
          } else {
            sum += (AT)v;
          }
        }
    st(y, t, is_max ? best : (CT)(sum / (AT)vol(win)));  // mean: the full window, padding included
  }
}

// dx[i] sums, over the windows o holding i, dy[o] / window size (mean) or
// dy[o] when i is the first element of o equal to y[o] (max; a NaN maximum
// equals nothing, so its dy goes nowhere, as in the reference).
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
          const CT yv = ld(y, yi);
          if (xv != yv) continue;
          // Is i the window's first element equal to its maximum?
          const long4 start = o * str - pad;
          long first = -1;
          for (long j2 = 0; j2 < win.z && first < 0; ++j2)
            for (long j1 = 0; j1 < win.y && first < 0; ++j1)
              for (long j0 = 0; j0 < win.x && first < 0; ++j0) {
                const long4 e = start + (long4)(j0, j1, j2, 0);
                if (e.x < 0 || e.x >= in.x || e.y < 0 || e.y >= in.y || e.z < 0 || e.z >= in.z) continue;
                if (ld(x, cn * ivol + flat(e, in)) == yv) first = flat(e, in);
              }
          if (first == me) s += (AT)ld(dy, yi);
        }
      }
    }
    st(dx, t, is_max ? (CT)s : (CT)(s / (AT)vol(win)));
  }
}
#endif

// Sum, mean, max, min (with a workspace for long runs), argmax and argmin.
#if IS_FLOAT
#define IS_NAN(v) ((v) != (v))
#else
#define IS_NAN(v) 0
#endif
inline AT red_init(int op) { return op == 0 ? (AT)0 : op == 1 ? (AT)(AT_LOW) : (AT)(AT_HIGH); }
inline AT red_comb(int op, AT a, AT b) {
  if (op == 0) return (AT)(a + b);
  if (op == 1) return (b > a || IS_NAN(b)) ? b : a;
  return (b < a || IS_NAN(b)) ? b : a;
}
inline CT red_fin(int op, AT acc, AT scale) {
#if DT == D_BOOL
  return acc != 0;
#else
  return op == 0 ? (CT)(acc * scale) : (CT)acc;
#endif
}

// Output o starts at the offset of o in the kept runs; its inputs follow
// the reduced runs. Item g reduces chunk g / nkept of output g % nkept; with
// one chunk it writes the result, else a partial into the workspace (pb at
// byte offset po) that reduce_finish_k combines.
kernel void reduce_k(int op, global const uchar* ib, long io, global uchar* ob, long oo, global uchar* pb, long po,
                     int nk, long8 kext_v, long8 kstr_v, int nr, long8 rext_v, long8 rstr_v,
                     long nkept, long nred, long chunk, int nchunks, AT scale) {
  long kext[8], kstr[8], rext[8], rstr[8];
  vstore8(kext_v, 0, kext);
  vstore8(kstr_v, 0, kstr);
  vstore8(rext_v, 0, rext);
  vstore8(rstr_v, 0, rstr);
  global const ST* in = CPTR(ST, ib, io);
  long items = nkept * nchunks;
  for (long g = GID; g < items; g += GSIZE) {
    long o = g % nkept, c = g / nkept;
    long base = view_off(o, nk, kext, kstr);
    long r0 = c * chunk, r1 = min(nred, r0 + chunk);
    AT acc = red_init(op);
    if (nr <= 1) {
      long s = rstr[0];
      for (long r = r0; r < r1; ++r) acc = red_comb(op, acc, (AT)ld(in, base + r * s));
    } else {
      for (long r = r0; r < r1; ++r) acc = red_comb(op, acc, (AT)ld(in, base + view_off(r, nr, rext, rstr)));
    }
    if (nchunks == 1) st(PTR(ST, ob, oo), o, red_fin(op, acc, scale));
    else PTR(AT, pb, po)[g] = acc;
  }
}

kernel void reduce_finish_k(int op, global const uchar* pb, long po, global uchar* ob, long oo, long nkept,
                            int nchunks, AT scale) {
  global const AT* part = CPTR(AT, pb, po);
  for (long o = GID; o < nkept; o += GSIZE) {
    AT acc = red_init(op);
    for (int c = 0; c < nchunks; ++c) acc = red_comb(op, acc, part[c * nkept + o]);
    st(PTR(ST, ob, oo), o, red_fin(op, acc, scale));
  }
}

// argmax/argmin over the one reduced run (len, rstride): output t starts at
// the offset of t in the kept runs. The first NaN wins, else the first
// extremum.
kernel void argred_k(int is_max, global const uchar* ib, long io, global uchar* ob, long oo, int nk, long8 kext_v,
                     long8 kstr_v, long len, long rstride, long nkept) {
  long kext[8], kstr[8];
  vstore8(kext_v, 0, kext);
  vstore8(kstr_v, 0, kstr);
  global const ST* in = CPTR(ST, ib, io);
  global long* out = PTR(long, ob, oo);
  for (long t = GID; t < nkept; t += GSIZE) {
    long base = view_off(t, nk, kext, kstr), best = 0;
    if (len > 0) {
      CT bv = ld(in, base);
      for (long j = 1; j < len && bv == bv; ++j) {
        CT v = ld(in, base + j * rstride);
        if (is_max ? v > bv || v != v : v < bv || v != v) {
          bv = v;
          best = j;
        }
      }
    }
    out[t] = best;
  }
}

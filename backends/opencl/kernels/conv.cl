// Convolution around CLBlast's GEMM. The col matrix of one sample is
// (P x cin*kvol) column-major: col[(c * kvol + k) * P + p] is the input
// that window tap k of output point p reads in channel c (0 in padding), so
// group g's columns are the contiguous block c in [g*cin_g, (g+1)*cin_g).
// A chunk of nb samples is nb such matrices one after another. Its elements
// are CT: the dtype, float for the halves.
#if IS_FLOAT
kernel void im2col_k(global const uchar* xb, long xo, global uchar* cb, long co, long n0, long nb, long cin,
                     long4 in, long4 out, long4 ker, long4 str, long4 dil, long4 pad) {
  global const ST* x = CPTR(ST, xb, xo);
  global CT* col = PTR(CT, cb, co);  // CT: float for the halves, whose products run in float
  const long P = vol(out), kvol = vol(ker), ivol = vol(in);
  for (long t = GID; t < nb * cin * kvol * P; t += GSIZE) {
    const long p = t % P, r = t / P, k = r % kvol, c = r / kvol;  // c: slot * cin + channel
    const long4 i = coords(p, out) * str - pad + coords(k, ker) * dil;
    const bool inside = i.x >= 0 && i.x < in.x && i.y >= 0 && i.y < in.y && i.z >= 0 && i.z < in.z;
    col[t] = inside ? ld(x, (n0 * cin + c) * ivol + flat(i, in)) : K(0);
  }
}

// dx of a chunk from its dcol (the same layout as col): each input element
// sums the taps that read it, o = (i + pad - k * dil) / stride where that
// divides exactly and lies in the output.
kernel void col2im_k(global const uchar* cb, long co, global uchar* xb, long xo, long n0, long nb, long cin,
                     long4 in, long4 out, long4 ker, long4 str, long4 dil, long4 pad) {
  global const CT* dcol = CPTR(CT, cb, co);
  global ST* dx = PTR(ST, xb, xo);
  const long P = vol(out), kvol = vol(ker), ivol = vol(in);
  for (long t = GID; t < nb * cin * ivol; t += GSIZE) {
    const long c = t / ivol;  // slot * cin + channel
    const long4 i = coords(t % ivol, in);
    AT s = 0;
    for (long k2 = 0; k2 < ker.z; ++k2) {
      const long q2 = i.z + pad.z - k2 * dil.z;
      if (q2 < 0) break;  // q falls as k grows
      if (q2 % str.z || q2 / str.z >= out.z) continue;
      for (long k1 = 0; k1 < ker.y; ++k1) {
        const long q1 = i.y + pad.y - k1 * dil.y;
        if (q1 < 0) break;
        if (q1 % str.y || q1 / str.y >= out.y) continue;
        for (long k0 = 0; k0 < ker.x; ++k0) {
          const long q0 = i.x + pad.x - k0 * dil.x;
          if (q0 < 0) break;
          if (q0 % str.x || q0 / str.x >= out.x) continue;
          const long k = (k2 * ker.y + k1) * ker.x + k0;
          const long p = ((q2 / str.z) * out.y + q1 / str.y) * out.x + q0 / str.x;
          s += (AT)dcol[(c * kvol + k) * P + p];
        }
      }
    }
    st(dx, n0 * cin * ivol + t, (CT)s);
  }
}

// y[p, c, n] += b[c] over n * C * P elements.
kernel void bias_add_k(global uchar* yb, long yo, global const uchar* bb, long bo, long P, long C, long n) {
  global ST* y = PTR(ST, yb, yo);
  global const ST* b = CPTR(ST, bb, bo);
  for (long t = GID; t < n; t += GSIZE) st(y, t, ld(y, t) + ld(b, (t / P) % C));
}

// The halves' operands of the float products, and their results rounded
// back once (with the bias added first, when b is set).
#if DT == D_F16 || DT == D_BF16
kernel void to_float_k(global const uchar* sb, long so, global uchar* db, long doff, long n) {
  global const ST* s = CPTR(ST, sb, so);
  global float* d = PTR(float, db, doff);
  for (long t = GID; t < n; t += GSIZE) d[t] = ld(s, t);
}
kernel void from_float_k(global const uchar* sb, long so, global uchar* db, long doff, long n, global const uchar* bb,
                         long bo, int has_bias, long P, long C) {
  global const float* s = CPTR(float, sb, so);
  global ST* d = PTR(ST, db, doff);
  for (long t = GID; t < n; t += GSIZE) st(d, t, has_bias ? s[t] + ld(CPTR(ST, bb, bo), (t / P) % C) : s[t]);
}
#endif

// out[c] = sum of g[p, c, n] over p and n: one work-group per channel.
kernel void channel_sum_k(global const uchar* gb, long go, global uchar* ob, long oo, long P, long C, long N) {
  local AT part[MAX_LOCAL];
  global const ST* g = CPTR(ST, gb, go);
  global ST* out = PTR(ST, ob, oo);
  for (long c = get_group_id(0); c < C; c += get_num_groups(0)) {
    AT s = 0;
    for (long j = get_local_id(0); j < P * N; j += get_local_size(0)) s += ld(g, ((j / P) * C + c) * P + j % P);
    s = group_sum(s, part);
    if (get_local_id(0) == 0) st(out, c, (CT)s);
  }
}
#endif

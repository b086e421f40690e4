// Adam: m, v updated in place; the step goes to dx or is subtracted from x.
#if IS_FLOAT
kernel void adam_k(global const uchar* gb, long go, global uchar* mb, long mo, global uchar* vb, long vo,
                   global uchar* db, long doff, int has_dx, global uchar* xb, long xo, long n, CT b1, CT b2, CT eps,
                   CT eta, CT c1, CT c2) {
  global const ST* g = CPTR(ST, gb, go);
  global ST* m = PTR(ST, mb, mo);
  global ST* v = PTR(ST, vb, vo);
  for (long i = GID; i < n; i += GSIZE) {
    CT gi = ld(g, i);
    CT mi = b1 * ld(m, i) + (K(1) - b1) * gi;
    CT vi = b2 * ld(v, i) + (K(1) - b2) * gi * gi;
    st(m, i, mi);
    st(v, i, vi);
    CT step = eta * (mi * c1) / (sqrt(vi * c2) + eps);
    if (has_dx) st(PTR(ST, db, doff), i, step);
    else st(PTR(ST, xb, xo), i, ld(PTR(ST, xb, xo), i) - step);
  }
}
#endif

// permute, gather, scatter_add.
// dst[t] = src at the offset of t in (out_shape, src_strides), canonical.
kernel void permute_k(global const uchar* sb, long so, global uchar* db, long doff, int nd, long8 oshape_v,
                      long8 sstride_v, long n) {
  long sh[8], sd[8];
  vstore8(oshape_v, 0, sh);
  vstore8(sstride_v, 0, sd);
  global const ST* src = CPTR(ST, sb, so);
  global ST* dst = PTR(ST, db, doff);
  for (long t = GID; t < n; t += GSIZE) dst[t] = src[view_off(t, nd, sh, sd)];
}

// Out-of-range indices (which the frontend prevents) read as zero.
kernel void gather_k(global const uchar* sb, long so, global uchar* db, long doff, global const uchar* xb, long xo,
                     long inner, long axis_len, long outer, long nidx) {
  global const ST* src = CPTR(ST, sb, so);
  global ST* dst = PTR(ST, db, doff);
  global const long* idx = CPTR(long, xb, xo);
  long n = inner * nidx * outer;
  for (long t = GID; t < n; t += GSIZE) {
    long i = t % inner, j = (t / inner) % nidx, o = t / (inner * nidx);
    long k = idx[j];
    dst[t] = (k >= 0 && k < axis_len) ? src[(o * axis_len + k) * inner + i] : (ST)0;
  }
}

// One item per (inner, outer) walks j in order: repeated indices accumulate
// without atomics, in the CPU's order. Out-of-range indices are skipped.
kernel void scatter_add_k(global const uchar* sb, long so, global uchar* db, long doff, global const uchar* xb,
                          long xo, long inner, long axis_len, long outer, long nidx) {
  global const ST* src = CPTR(ST, sb, so);
  global ST* dst = PTR(ST, db, doff);
  global const long* idx = CPTR(long, xb, xo);
  for (long t = GID; t < inner * outer; t += GSIZE) {
    long i = t % inner, o = t / inner;
    for (long j = 0; j < nidx; ++j) {
      long k = idx[j];
      if (k < 0 || k >= axis_len) continue;
      long d = (o * axis_len + k) * inner + i;
      st(dst, d, (CT)(ld(dst, d) + ld(src, (o * nidx + j) * inner + i)));
    }
  }
}

// scatter_add's parallel path (ocl_movement.cpp says when it runs). The keys
// of the sort: each index, or axis_len (past every row) for one outside the
// axis, which is then skipped; and its position. Positions nidx..n2-1 pad
// the sort to n2, a power of two, with the key axis_len.
kernel void scatter_keys_k(global const uchar* xb, long xo, global long* keys, global long* pos, long axis_len,
                           long nidx, long n2) {
  global const long* idx = CPTR(long, xb, xo);
  for (long t = GID; t < n2; t += GSIZE) {
    long k = t < nidx ? idx[t] : axis_len;
    keys[t] = (k >= 0 && k < axis_len) ? k : axis_len;
    pos[t] = t;
  }
}

// One step (j, k) of a bitonic sort of the pairs (keys[t], pos[t]) into
// ascending order. Positions are distinct, so the order is total: equal
// indices end up in position order (the sort is stable by index). Each
// pair (t, t ^ j) is one item's, so items never touch the same element.
kernel void bitonic_step_k(global long* keys, global long* pos, long j, long k, long n2) {
  for (long t = GID; t < n2; t += GSIZE) {
    long l = t ^ j;
    if (l <= t) continue;
    long ka = keys[t], kb = keys[l], pa = pos[t], pb = pos[l];
    bool greater = ka > kb || (ka == kb && pa > pb);
    bool ascending = (t & k) == 0;
    if (greater == ascending) {
      keys[t] = kb;
      keys[l] = ka;
      pos[t] = pb;
      pos[l] = pa;
    }
  }
}

// After the sort: one item per (i, sorted position p, o). The item at the
// first position of a run of one index k adds the run's sources to
// dst[i, k, o] in position order, rounding to the storage type at each
// step: scatter_add_k's sums, to the bit. The other items have nothing to do.
kernel void scatter_add_sorted_k(global const uchar* sb, long so, global uchar* db, long doff, global const long* keys,
                                 global const long* pos, long inner, long axis_len, long outer, long nidx) {
  global const ST* src = CPTR(ST, sb, so);
  global ST* dst = PTR(ST, db, doff);
  long n = inner * nidx * outer;
  for (long t = GID; t < n; t += GSIZE) {
    long i = t % inner, p = (t / inner) % nidx, o = t / (inner * nidx);
    long k = keys[p];
    if (k >= axis_len || (p > 0 && keys[p - 1] == k)) continue;
    long d = (o * axis_len + k) * inner + i;
    for (long q = p; q < nidx && keys[q] == k; ++q)
      st(dst, d, (CT)(ld(dst, d) + ld(src, (o * nidx + pos[q]) * inner + i)));
  }
}

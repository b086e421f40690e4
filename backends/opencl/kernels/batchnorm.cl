// Batch normalisation over x (P, C, N): per-channel statistics by one
// work-group per channel (two passes: the mean, then the squared
// deviations from it, which loses less than E[x^2] - E[x]^2), then
// elementwise kernels. Scalars (eps, momentum) arrive in AT. The
// statistics, scale and bias are PT: the dtype, Float32 for the halves
// (backend.h's param_dtype, cuDNN's rule).
#if IS_FLOAT
#if DT == D_F16 || DT == D_BF16
typedef float PT;
#else
typedef ST PT;
#endif
inline AT ldp(global const uchar* b, long o, long i) { return (AT)CPTR(PT, b, o)[i]; }
inline void stp(global uchar* b, long o, long i, AT v) { PTR(PT, b, o)[i] = (PT)v; }
kernel void bn_stats_k(global const uchar* xb, long xo, long P, long C, long N, AT eps, AT momentum,
                       global uchar* mb, long mo, global uchar* ib, long io, int has_running, global uchar* rmb,
                       long rmo, global uchar* rvb, long rvo) {
  local AT part[MAX_LOCAL];
  global const ST* x = CPTR(ST, xb, xo);
  const long m = P * N;
  for (long c = get_group_id(0); c < C; c += get_num_groups(0)) {
    AT s = 0;
    for (long j = get_local_id(0); j < m; j += get_local_size(0)) s += ld(x, ((j / P) * C + c) * P + j % P);
    const AT mean = group_sum(s, part) / (AT)m;
    s = 0;
    for (long j = get_local_id(0); j < m; j += get_local_size(0)) {
      const AT d = (AT)ld(x, ((j / P) * C + c) * P + j % P) - mean;
      s += d * d;
    }
    const AT var = group_sum(s, part) / (AT)m;
    if (get_local_id(0) == 0) {
      stp(mb, mo, c, mean);
      stp(ib, io, c, (AT)1 / sqrt(var + eps));
      if (has_running) {
        const AT unbiased = m > 1 ? var * (AT)m / (AT)(m - 1) : var;  // Flux's running variance
        stp(rmb, rmo, c, ((AT)1 - momentum) * ldp(rmb, rmo, c) + momentum * mean);
        stp(rvb, rvo, c, ((AT)1 - momentum) * ldp(rvb, rvo, c) + momentum * unbiased);
      }
    }
  }
}

// y = scale * (x - mean) * invstd + bias; invstd = 1 / sqrt(stat + eps) when
// from_var (inference, stat the running variance), else stat itself.
kernel void bn_apply_k(global const uchar* xb, long xo, global uchar* yb, long yo, long P, long C, long n,
                       global const uchar* mb, long mo, global const uchar* sb, long so, int from_var, AT eps,
                       global const uchar* gb, long go, int has_scale, global const uchar* bb, long bo, int has_bias) {
  global const ST* x = CPTR(ST, xb, xo);
  global ST* y = PTR(ST, yb, yo);
  for (long t = GID; t < n; t += GSIZE) {
    const long c = (t / P) % C;
    const AT stat = ldp(sb, so, c);
    const AT inv = from_var ? (AT)1 / sqrt(stat + eps) : stat;
    const AT g = has_scale ? ldp(gb, go, c) : (AT)1;
    const AT b = has_bias ? ldp(bb, bo, c) : (AT)0;
    st(y, t, (CT)(g * (((AT)ld(x, t) - ldp(mb, mo, c)) * inv) + b));
  }
}

// Per channel: sums[2c] = sum dy, sums[2c+1] = sum dy * xhat; also dbias and
// dscale, which are those sums, when asked for.
kernel void bn_bwd_sums_k(global const uchar* xb, long xo, global const uchar* gb, long go, long P, long C, long N,
                          global const uchar* mb, long mo, global const uchar* ib, long io, global AT* sums,
                          global uchar* dsb, long dso, int has_dscale, global uchar* dbb, long dbo, int has_dbias) {
  local AT part[MAX_LOCAL];
  global const ST* x = CPTR(ST, xb, xo);
  global const ST* dy = CPTR(ST, gb, go);
  for (long c = get_group_id(0); c < C; c += get_num_groups(0)) {
    const AT mean = ldp(mb, mo, c), inv = ldp(ib, io, c);
    AT s_dy = 0, s_dyx = 0;
    for (long j = get_local_id(0); j < P * N; j += get_local_size(0)) {
      const long e = ((j / P) * C + c) * P + j % P;
      const AT g = (AT)ld(dy, e);
      s_dy += g;
      s_dyx += g * (((AT)ld(x, e) - mean) * inv);
    }
    s_dy = group_sum(s_dy, part);
    s_dyx = group_sum(s_dyx, part);
    if (get_local_id(0) == 0) {
      sums[2 * c] = s_dy;
      sums[2 * c + 1] = s_dyx;
      if (has_dbias) stp(dbb, dbo, c, s_dy);
      if (has_dscale) stp(dsb, dso, c, s_dyx);
    }
  }
}

// dx = scale * invstd * (dy - sum(dy) / m - xhat * sum(dy * xhat) / m).
kernel void bn_bwd_dx_k(global const uchar* xb, long xo, global const uchar* gb, long go, global uchar* db, long doff,
                        long P, long C, long n, long m, global const uchar* mb, long mo, global const uchar* ib,
                        long io, global const AT* sums, global const uchar* sb, long so, int has_scale) {
  global const ST* x = CPTR(ST, xb, xo);
  global const ST* dy = CPTR(ST, gb, go);
  global ST* dx = PTR(ST, db, doff);
  for (long t = GID; t < n; t += GSIZE) {
    const long c = (t / P) % C;
    const AT inv = ldp(ib, io, c);
    const AT xhat = ((AT)ld(x, t) - ldp(mb, mo, c)) * inv;
    const AT g = has_scale ? ldp(sb, so, c) : (AT)1;
    st(dx, t, (CT)(g * inv * ((AT)ld(dy, t) - sums[2 * c] / (AT)m - xhat * sums[2 * c + 1] / (AT)m)));
  }
}
#endif

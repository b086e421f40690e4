// The OpenCL C text of the dnn table's kernels (convolution's im2col and
// col2im, bias and channel sums, pooling, batch normalisation): one family
// of its own (KernelFamily in ocl_common.hpp), so that a process that never
// convolves never builds it. Built for the floating dtypes the host lets
// through (Float32 and Float64, and the halves, which load into float). Tensors are WHCN:
// spatial dim 0 fastest, then channel, then sample; the host passes the
// spatial geometry as long4 vectors (.x = dim 0, .y = dim 1, .z = dim 2,
// unused dims 1 with no padding). Every kernel writes its outputs once, so
// no atomics are needed: the backward passes gather over the windows that
// read an element instead of scattering into it.
#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

// Helpers: volumes, coordinates, and the work-group sum used by the
// per-channel reductions.
const char* const kDnnHelpers = R"CLC(
#if IS_FLOAT
inline long vol(long4 s) { return s.x * s.y * s.z; }
inline long4 coords(long i, long4 s) { return (long4)(i % s.x, (i / s.x) % s.y, i / (s.x * s.y), 0); }
inline long flat(long4 i, long4 s) { return (i.z * s.y + i.y) * s.x + i.x; }

// The sum of v over the work-group (its size a power of two, as
// ocl_program.cpp picks it), returned to every work-item. The first barrier
// lets the previous call's readers of part[0] finish before it is reused.
inline AT group_sum(AT v, local AT* part) {
  size_t l = get_local_id(0), n = get_local_size(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  part[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t h = n / 2; h > 0; h >>= 1) {
    if (l < h) part[l] += part[l + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return part[0];
}
#define MAX_LOCAL 64
#endif
)CLC";

// Convolution around CLBlast's GEMM. The col matrix of one sample is
// (P x cin*kvol) column-major: col[(c * kvol + k) * P + p] is the input
// that window tap k of output point p reads in channel c (0 in padding), so
// group g's columns are the contiguous block c in [g*cin_g, (g+1)*cin_g).
// A chunk of nb samples is nb such matrices one after another. Its elements
// are CT: the dtype, float for the halves.
const char* const kConvText = R"CLC(
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
)CLC";

// Pooling: one work-item per output (forward) or per input element
// (backward, gathering over the windows that hold it). Windows are walked in
// the libraries' order, dim 0 fastest, so "first" means the same as in
// cuDNN and oneDNN.
const char* const kPoolText = R"CLC(
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
)CLC";

// Batch normalisation over x (P, C, N): per-channel statistics by one
// work-group per channel (two passes: the mean, then the squared
// deviations from it, which loses less than E[x^2] - E[x]^2), then
// elementwise kernels. Scalars (eps, momentum) arrive in AT. The
// statistics, scale and bias are PT: the dtype, Float32 for the halves
// (backend.h's param_dtype, cuDNN's rule).
const char* const kBatchNormText = R"CLC(
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
)CLC";

}  // namespace

const KernelFamily kDnnKernels{"dnn", KernelNeeds::kPrelude, {kDnnHelpers, kConvText, kPoolText, kBatchNormText}};

}  // namespace flx_ocl

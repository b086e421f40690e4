// The OpenCL C 1.2 text of the compute table's kernels, one family (see
// KernelFamily in ocl_common.hpp): built as one program per (device, dtype)
// at run time, with -DDT=<flx_dtype> -DHAS_FP64=<0|1>, on the first launch
// of one of its kernels, so a process pays the compile only for the dtypes
// it uses. ocl_source.cpp puts the prelude, the element functions
// (include/flx/backend_elem.h) and the op switches generated from
// FLX_MAP_OPS before the kernels. Each kernel mirrors the CPU backend
// (backends/cpu/*.cpp) operation by operation: same compute types, same
// evaluation order, FP contraction off, so results match the CPU exactly
// where the math library does and to a few ulps where it does not.
#include "ocl_common.hpp"

namespace flx_ocl {

// Every family's first part: types, half and bfloat16 conversions, loads and
// stores, strided offsets.
const char* const kernel_prelude = R"CLC(
#pragma OPENCL FP_CONTRACT OFF
#if HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define D_F32 0
#define D_F64 1
#define D_F16 2
#define D_BF16 3
#define D_I32 4
#define D_I64 5
#define D_U8 6
#define D_BOOL 7

// ST: storage type, CT: compute type (halves compute in float), AT: the
// reduction accumulator (double for floats, as on the CPU).
#if DT == D_F32
typedef float ST; typedef float CT;
#define IS_FLOAT 1
#elif DT == D_F64
typedef double ST; typedef double CT;
#define IS_FLOAT 1
#elif DT == D_F16 || DT == D_BF16
typedef ushort ST; typedef float CT;
#define IS_FLOAT 1
#elif DT == D_I32
typedef int ST; typedef int CT;
#define AT_HIGH INT_MAX
#define AT_LOW INT_MIN
#elif DT == D_I64
typedef long ST; typedef long CT;
#define AT_HIGH LONG_MAX
#define AT_LOW LONG_MIN
#elif DT == D_U8
typedef uchar ST; typedef uchar CT;
#define AT_HIGH UCHAR_MAX
#define AT_LOW 0
#else
typedef uchar ST; typedef uchar CT;
#define AT_HIGH LONG_MAX
#define AT_LOW LONG_MIN
#endif
#ifndef IS_FLOAT
#define IS_FLOAT 0
#endif

#if IS_FLOAT
#if HAS_FP64
typedef double AT;
typedef double RT; // random-number arithmetic
#else
typedef float AT;
typedef float RT;
#endif
// Where max and min start: -Inf/Inf, so that a slice of all -Inf gives -Inf
// (-DBL_MAX would not).
#define AT_LOW (-INFINITY)
#define AT_HIGH INFINITY
#elif DT == D_BOOL
typedef long AT;
#else
typedef CT AT;
#endif

// K(v): a constant in the compute type, as the op bodies of backend_ops.h use it.
#define K(v) ((CT)(v))
#define GID get_global_id(0)
#define GSIZE get_global_size(0)
#define PTR(T, b, o) ((global T*)((b) + (o)))
#define CPTR(T, b, o) ((global const T*)((b) + (o)))

// ---- half and bfloat16 bits, rounding exactly as include/flx/dtype.hpp ----
inline ushort f2h(float f) {
  uint u = as_uint(f);
  uint sign = (u >> 16) & 0x8000u;
  uint a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // a * 2^24 rounded to nearest even, in integers (no denormal flushing)
    uint e = a >> 23;
    uint m = (a & 0x7fffffu) | (e ? 0x800000u : 0u);
    uint s = e ? 126u - e : 125u;
    if (s > 24u) return (ushort)sign;
    uint q = m >> s, rem = m & ((1u << s) - 1u), half_ = 1u << (s - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u))) ++q;
    return (ushort)(sign | q);
  }
  uint r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
  return (ushort)(sign | (r >> 13));
}
inline float bf2f(ushort h) { return as_float((uint)h << 16); }
// vload_half, but a NaN keeps its bits, signalling ones too, as
// flx::half_to_float leaves them (vload_half quiets them).
inline float h2f(global const ushort* p, long i) {
  ushort h = p[i];
  if ((h & 0x7fffu) > 0x7c00u) return as_float(((uint)(h & 0x8000u) << 16) | 0x7f800000u | ((uint)(h & 0x3ffu) << 13));
  return vload_half((size_t)i, (global const half*)p);
}
inline ushort f2bf(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}

inline CT ld(global const ST* p, long i) {
#if DT == D_F16
  return h2f(p, i);
#elif DT == D_BF16
  return bf2f(p[i]);
#elif DT == D_BOOL
  return p[i] != 0;
#else
  return p[i];
#endif
}
inline void st(global ST* p, long i, CT v) {
#if DT == D_F16
  p[i] = f2h(v);
#elif DT == D_BF16
  p[i] = f2bf(v);
#elif DT == D_BOOL
  p[i] = v != 0;
#else
  p[i] = v;
#endif
}

// Offset of flat index t in a strided view of nd dims.
inline long view_off(long t, int nd, const long* sh, const long* sd) {
  long off = 0;
  for (int k = 0; k < nd; ++k) {
    long ik = t % sh[k];
    t /= sh[k];
    off += ik * sd[k];
  }
  return off;
}

)CLC";

// The compute table's kernels, in the order the family joins them. Each
// piece holds its kernels' helpers; the prelude (and for map, the element
// functions and op switches) comes first.
namespace {

// Every op of the op list (FLX_MAP_OPS) through the generated op_value and op_cmp.
const char* const kMapText = R"CLC(
// out[t] = op(in0, in1, in2) over the canonical output shape (backend.h);
// operand k is the scalar ck when bit k of smask is set, else read through
// its strides. kind (from the host's op list lookup): 0 unary, 1 binary,
// 2 comparison (Bool output), 3 select (WHERE: in0 is Bool storage).
kernel void map_k(int op, int kind, int nd, long8 shape_v,
                  global const uchar* b0, long o0, long8 s0_v,
                  global const uchar* b1, long o1, long8 s1_v,
                  global const uchar* b2, long o2, long8 s2_v,
                  global uchar* ob, long oo, int smask, CT c0, CT c1, CT c2, CT a, CT b, long n) {
  long sh[8], s0[8], s1[8], s2[8];
  vstore8(shape_v, 0, sh);
  vstore8(s0_v, 0, s0);
  vstore8(s1_v, 0, s1);
  vstore8(s2_v, 0, s2);
  global const ST* p0 = CPTR(ST, b0, o0);
  global const ST* p1 = CPTR(ST, b1, o1);
  global const ST* p2 = CPTR(ST, b2, o2);
  for (long t = GID; t < n; t += GSIZE) {
    long i0 = 0, i1 = 0, i2 = 0;
    if (nd == 1) {
      i0 = t * s0[0];
      i1 = t * s1[0];
      i2 = t * s2[0];
    } else {
      long r = t;
      for (int k = 0; k < nd; ++k) {
        long ik = r % sh[k];
        r /= sh[k];
        i0 += ik * s0[k];
        i1 += ik * s1[k];
        i2 += ik * s2[k];
      }
    }
    if (kind == 3) {
      uchar c = (smask & 1) ? (c0 != 0) : (CPTR(uchar, b0, o0)[i0] != 0);
      CT v = c ? ((smask & 2) ? c1 : ld(p1, i1)) : ((smask & 4) ? c2 : ld(p2, i2));
      st(PTR(ST, ob, oo), t, v);
      continue;
    }
    CT x = (smask & 1) ? c0 : ld(p0, i0);
    CT y = kind == 0 ? K(0) : (smask & 2) ? c1 : ld(p1, i1);
    if (kind == 2) PTR(uchar, ob, oo)[t] = op_cmp(op, x, y);
    else st(PTR(ST, ob, oo), t, op_value(op, x, y, a, b));
  }
}
)CLC";

// From any dtype into DT.
const char* const kCastText = R"CLC(
#if DT == D_BOOL
#define CASTV(x) out[t] = ((x) != 0)
#elif DT == D_F16
#define CASTV(x) out[t] = f2h((float)(x))
#elif DT == D_BF16
#define CASTV(x) out[t] = f2bf((float)(x))
#else
#define CASTV(x) out[t] = (ST)(x)
#endif
kernel void cast_k(int sdt, global const uchar* sb, long so, global uchar* ob, long oo, long n) {
  global ST* out = PTR(ST, ob, oo);
  for (long t = GID; t < n; t += GSIZE) {
    switch (sdt) {
      case D_F32: CASTV(CPTR(float, sb, so)[t]); break;
#if HAS_FP64
      case D_F64: CASTV(CPTR(double, sb, so)[t]); break;
#endif
      case D_F16: CASTV(h2f(CPTR(ushort, sb, so), t)); break;
      case D_BF16: CASTV(bf2f(CPTR(ushort, sb, so)[t])); break;
      case D_I32: CASTV(CPTR(int, sb, so)[t]); break;
      case D_I64: CASTV(CPTR(long, sb, so)[t]); break;
      case D_U8: CASTV(CPTR(uchar, sb, so)[t]); break;
      case D_BOOL: CASTV((uchar)(CPTR(uchar, sb, so)[t] != 0)); break;
    }
  }
}
)CLC";

// Sum, mean, max, min (with a workspace for long runs), argmax and argmin.
const char* const kReduceText = R"CLC(
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
)CLC";

// permute, gather, scatter_add.
const char* const kMovementText = R"CLC(
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
)CLC";

// Uniform and normal numbers: Philox4x32-10, as backends/backend_common/philox.hpp.
const char* const kRandomText = R"CLC(
#if IS_FLOAT
inline uint4 philox(uint c0, uint c1, uint c2, uint c3, uint k0, uint k1) {
  for (int r = 0; r < 10; ++r) {
    uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (uint4)(c0, c1, c2, c3);
}
#if HAS_FP64
inline RT uniform01(uint4 r) { return (double)(((((ulong)r.x) << 32) | r.y) >> 11) * 0x1.0p-53; }
inline RT normal01(uint4 r) {
  double u1 = ((double)r.z + 1.0) * 0x1.0p-32;
  double u2 = (double)r.w * 0x1.0p-32;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#else  // no fp64: 24-bit float arithmetic (documented: not identical to the CPU)
inline RT uniform01(uint4 r) { return (float)(r.x >> 8) * 0x1.0p-24f; }
inline RT normal01(uint4 r) {
  float u1 = ((float)(r.z >> 8) + 1.0f) * 0x1.0p-24f;
  float u2 = (float)(r.w >> 8) * 0x1.0p-24f;
  return sqrt(-2.0f * log(u1)) * cos(6.2831855f * u2);
}
#endif

// top: the largest value of the dtype below b (backends/backend_common/uniform_bound.hpp).
kernel void random_k(int dist, global uchar* ob, long oo, long n, ulong seed, ulong offset, RT a, RT b, RT top) {
  global ST* out = PTR(ST, ob, oo);
  for (long t = GID; t < n; t += GSIZE) {
    ulong i = (ulong)t;
    uint4 r = philox((uint)i, (uint)(i >> 32), (uint)offset, (uint)(offset >> 32), (uint)seed, (uint)(seed >> 32));
    if (dist == 0) {
      st(out, t, (CT)(a + (b - a) * uniform01(r)));
      // rounding to a narrow type may reach b: keep the interval half-open
      if ((RT)ld(out, t) >= b) st(out, t, (CT)top);
    } else {
      st(out, t, (CT)(a + b * normal01(r)));
    }
  }
}
#endif
)CLC";

// Softmax and logsoftmax over the middle axis of (inner, len, outer), forward
// and backward (max_nan is backend_elem.h's).
const char* const kSoftmaxText = R"CLC(
#if IS_FLOAT
kernel void softmax_k(int lg, global const uchar* xb, long xo, global uchar* yb, long yo, long inner, long len,
                      long outer) {
  global const ST* x = CPTR(ST, xb, xo);
  global ST* y = PTR(ST, yb, yo);
  for (long t = GID; t < inner * outer; t += GSIZE) {
    long i = t % inner, o = t / inner, base = o * inner * len + i;
    CT m = -INFINITY;
    for (long j = 0; j < len; ++j) m = max_nan(m, ld(x, base + j * inner));
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
)CLC";

// Adam: m, v updated in place; the step goes to dx or is subtracted from x.
const char* const kOptimiserText = R"CLC(
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
)CLC";

// Around CLBlast: the k == 0 product, and halves packed into float and back.
const char* const kGemmText = R"CLC(
#if IS_FLOAT
// C = beta * C over a batch of strided m x n matrices (the k == 0 product).
kernel void gemm_scale_k(global uchar* cb, long co, long m, long n, long ldc, long stride, long batch, CT beta) {
  global ST* c = PTR(ST, cb, co);
  for (long t = GID; t < m * n * batch; t += GSIZE) {
    long i = t % m, j = (t / m) % n, bt = t / (m * n);
    long k = bt * stride + j * ldc + i;
    st(c, k, beta == K(0) ? K(0) : beta * ld(c, k));
  }
}
#if DT == D_F16 || DT == D_BF16
// Halves multiply in float: pack strided matrices into dense float ones and back.
kernel void pack_f32_k(global const uchar* sb, long so, long rows, long cols, long ld_, long stride, long batch,
                       global float* dst) {
  global const ST* s = CPTR(ST, sb, so);
  for (long t = GID; t < rows * cols * batch; t += GSIZE) {
    long i = t % rows, j = (t / rows) % cols, bt = t / (rows * cols);
    dst[t] = ld(s, bt * stride + j * ld_ + i);
  }
}
kernel void unpack_f32_k(global const float* src, global uchar* db, long doff, long rows, long cols, long ld_,
                         long stride, long batch) {
  global ST* d = PTR(ST, db, doff);
  for (long t = GID; t < rows * cols * batch; t += GSIZE) {
    long i = t % rows, j = (t / rows) % cols, bt = t / (rows * cols);
    st(d, bt * stride + j * ld_ + i, src[t]);
  }
}
#endif
#endif
)CLC";

}  // namespace

// One family for the whole compute table: a program costs PoCL a fixed
// ~150 ms to build (cold) whatever it holds, the pieces above add 0-25 ms
// each, and each kernel is compiled for the device on its first launch
// whichever program holds it, so a family per piece would slow down every
// program that uses two of them (figures in docs/opencl.md). A new table's
// kernels are a family of their own: programs that never call them never
// build them.
const KernelFamily kComputeKernels{
    "compute",
    KernelNeeds::kOpSwitches,
    {kMapText, kCastText, kReduceText, kMovementText, kRandomText, kSoftmaxText, kOptimiserText, kGemmText}};

}  // namespace flx_ocl

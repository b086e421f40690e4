// Every family's first part: types, half and bfloat16 conversions, loads and
// stores, strided offsets.
#pragma OPENCL FP_CONTRACT OFF
#if HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// DT is the program's dtype code, D_F32, D_F64, ..., D_BOOL the codes of
// the list of element types (flx/dtype_list.h): the host passes both as
// -D options (ocl_program.cpp).

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

// ---- half and bfloat16 bits: include/flx/half_bits.h, the header whose
// rounding include/flx/dtype.hpp uses (the #include is replaced by its text
// at build time) ----
#define FLX_HALF_FN inline
#define FLX_U16 ushort
#define FLX_U32 uint
#define FLX_U64 ulong
#include "flx/half_bits.h"
inline ushort f2h(float f) { return flx_f32_bits_to_half(as_uint(f)); }
inline ushort f2bf(float f) { return flx_f32_bits_to_bf16(as_uint(f)); }
inline float bf2f(ushort h) { return as_float(flx_bf16_to_f32_bits(h)); }
// In integers, not vload_half: a NaN keeps its bits, signalling ones too, as
// flx::half_to_float leaves them (vload_half quiets them).
inline float h2f(global const ushort* p, long i) { return as_float(flx_half_to_f32_bits(p[i])); }

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


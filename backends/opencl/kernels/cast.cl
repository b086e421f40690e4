// From any dtype into DT, by the rule of every backend (the CPU's
// cast_element, backends/cpu/cpu_common.hpp): Bool is "not zero"; a half or
// bfloat16 is the value rounded once, from a Float64 or an integer too
// (half_bits.h's entries for them, in the prelude); an integer saturates,
// NaN to 0 (OpenCL's _sat conversions: round toward zero, clamp, NaN 0);
// else C's conversion.
//   CASTV: from Float32, a half or Bool;  CASTD: from Float64;
//   CASTI: from an integer (UInt8, Int32, Int64).
#if DT == D_BOOL
#define CASTV(x) out[t] = ((x) != 0)
#define CASTD(x) CASTV(x)
#define CASTI(x) CASTV(x)
#elif DT == D_F16 || DT == D_BF16
#if DT == D_F16
#define CASTV(x) out[t] = f2h((float)(x))
#define CASTD(x) out[t] = flx_f64_bits_to_half(as_ulong(x))
#define CAST_INT_FN flx_int_to_half
#else
#define CASTV(x) out[t] = f2bf((float)(x))
#define CASTD(x) out[t] = flx_f64_bits_to_bf16(as_ulong(x))
#define CAST_INT_FN flx_int_to_bf16
#endif
inline ushort cast_int(long v) { return CAST_INT_FN(v < 0, v < 0 ? (ulong)0 - (ulong)v : (ulong)v); }
#define CASTI(x) out[t] = cast_int((long)(x))
#elif DT == D_I32
#define CASTV(x) out[t] = convert_int_sat(x)
#define CASTD(x) CASTV(x)
#define CASTI(x) CASTV(x)
#elif DT == D_I64
#define CASTV(x) out[t] = convert_long_sat(x)
#define CASTD(x) CASTV(x)
#define CASTI(x) CASTV(x)
#elif DT == D_U8
#define CASTV(x) out[t] = convert_uchar_sat(x)
#define CASTD(x) CASTV(x)
#define CASTI(x) CASTV(x)
#else
#define CASTV(x) out[t] = (ST)(x)
#define CASTD(x) CASTV(x)
#define CASTI(x) CASTV(x)
#endif
kernel void cast_k(int sdt, global const uchar* sb, long so, global uchar* ob, long oo, long n) {
  global ST* out = PTR(ST, ob, oo);
  for (long t = GID; t < n; t += GSIZE) {
    switch (sdt) {
      case D_F32: CASTV(CPTR(float, sb, so)[t]); break;
#if HAS_FP64
      case D_F64: CASTD(CPTR(double, sb, so)[t]); break;
#endif
      case D_F16: CASTV(h2f(CPTR(ushort, sb, so), t)); break;
      case D_BF16: CASTV(bf2f(CPTR(ushort, sb, so)[t])); break;
      case D_I32: CASTI(CPTR(int, sb, so)[t]); break;
      case D_I64: CASTI(CPTR(long, sb, so)[t]); break;
      case D_U8: CASTI(CPTR(uchar, sb, so)[t]); break;
      case D_BOOL: CASTV((uchar)(CPTR(uchar, sb, so)[t] != 0)); break;
    }
  }
}

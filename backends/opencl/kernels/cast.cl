// From any dtype into DT.
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

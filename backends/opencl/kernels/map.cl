// Every op of the op list (FLX_MAP_OPS) through the generated op_value and op_cmp.
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

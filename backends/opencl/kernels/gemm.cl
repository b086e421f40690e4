// Around CLBlast: the k == 0 product, and halves packed into float and back.
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

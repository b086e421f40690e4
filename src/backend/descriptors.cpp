// Canonical descriptors (descriptors.hpp).
#include "descriptors.hpp"

namespace flx::detail {

void canonicalize_dims(flx_map_desc& d) {
  const int nin = d.ninputs;
  int nd = 0;
  int64_t shape[FLX_MAX_DIMS], st[4][FLX_MAX_DIMS];  // operands, then the output
  int64_t out_stride = 1;
  for (int k = 0; k < d.ndim; ++k) {
    if (d.shape[k] == 1) continue;  // size-1 dims contribute nothing
    shape[nd] = d.shape[k];
    for (int i = 0; i < nin; ++i) st[i][nd] = d.in[i].is_scalar ? 0 : d.in[i].strides[k];
    st[3][nd] = out_stride;
    out_stride *= d.shape[k];
    ++nd;
  }
  // Merge dim j into the last kept one when every operand continues it.
  int w = 0;
  for (int j = 1; j < nd; ++j) {
    bool merge = st[3][j] == st[3][w] * shape[w];
    for (int i = 0; i < nin; ++i) merge &= st[i][j] == st[i][w] * shape[w];
    if (merge) {
      shape[w] *= shape[j];
    } else {
      ++w;
      shape[w] = shape[j];
      for (int i = 0; i < nin; ++i) st[i][w] = st[i][j];
      st[3][w] = st[3][j];
    }
  }
  if (nd == 0) {  // one element
    d.ndim = 1;
    d.shape[0] = 1;
    for (int i = 0; i < nin; ++i) d.in[i].strides[0] = 0;
  } else {
    d.ndim = w + 1;
    for (int k = 0; k < d.ndim; ++k) {
      d.shape[k] = shape[k];
      for (int i = 0; i < nin; ++i) d.in[i].strides[k] = st[i][k];
    }
  }
  for (int i = nin; i < 3; ++i) d.in[i] = flx_operand{};  // operands the op does not read: zeros, not garbage
  int64_t n = 1;
  for (int k = 0; k < d.ndim; ++k) n *= d.shape[k];
  d.numel = nd == 0 ? 1 : n;
}

flx_reduce_desc reduce_desc(int32_t op, int32_t dtype, int ndim, const int64_t* shape, uint32_t mask, double scale,
                            flx_mem in, flx_mem out) {
  flx_reduce_desc d{};
  d.op = op;
  d.dtype = dtype;
  d.scale = scale;
  d.in = in;
  d.out = out;
  // Runs of kept and of reduced dims; a dim continues the previous run of
  // its kind when that run ends exactly where it starts.
  int64_t stride = 1;
  int last = -1;  // kind of the previous non-trivial dim: 0 kept, 1 reduced
  for (int k = 0; k < ndim; ++k) {
    const bool red = (mask >> k) & 1u;
    const int64_t e = shape[k];
    if (e != 1) {
      int64_t* ext = red ? d.red_extent : d.kept_extent;
      int64_t* str = red ? d.red_stride : d.kept_stride;
      int32_t& n = red ? d.nred_runs : d.nkept_runs;
      if (n > 0 && last == int(red) && str[n - 1] * ext[n - 1] == stride) {
        ext[n - 1] *= e;
      } else {
        ext[n] = e;
        str[n] = stride;
        ++n;
      }
      last = int(red);
    }
    stride *= e;
  }
  d.nkept = d.nred = 1;
  for (int i = 0; i < d.nkept_runs; ++i) d.nkept *= d.kept_extent[i];
  for (int i = 0; i < d.nred_runs; ++i) d.nred *= d.red_extent[i];
  if (stride == 0) {  // an empty input: every output is the initial value
    d.nred = 0;
    if (d.nkept_runs == 0) d.nkept = 1;
  }
  // argmax/argmin of a size-1 dim: one trivial run, so backends see one.
  if ((op == FLX_REDUCE_ARGMAX || op == FLX_REDUCE_ARGMIN) && d.nred_runs == 0) {
    d.nred_runs = 1;
    d.red_extent[0] = 1;
    d.red_stride[0] = 0;
  }
  return d;
}

flx_permute_desc permute_desc(int32_t dtype, int ndim, const int64_t* shape, const int32_t* perm, flx_mem src,
                              flx_mem dst) {
  flx_permute_desc d{};
  d.dtype = dtype;
  d.src = src;
  d.dst = dst;
  int64_t in_stride[FLX_MAX_DIMS];
  int64_t s = 1;
  for (int k = 0; k < ndim; ++k) {
    in_stride[k] = s;
    s *= shape[k];
  }
  d.numel = s;
  int nd = 0;
  for (int k = 0; k < ndim; ++k) {
    const int64_t e = shape[perm[k]], st = in_stride[perm[k]];
    if (e == 1) continue;
    if (nd > 0 && d.src_strides[nd - 1] * d.out_shape[nd - 1] == st) {
      d.out_shape[nd - 1] *= e;  // still adjacent in src: one dim
    } else {
      d.out_shape[nd] = e;
      d.src_strides[nd] = st;
      ++nd;
    }
  }
  if (nd == 0) {
    nd = 1;
    d.out_shape[0] = 1;
    d.src_strides[0] = 0;
  }
  d.ndim = nd;
  return d;
}

}  // namespace flx::detail

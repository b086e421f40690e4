// Launchers for gather, scatter_add, permute, softmax (forward and backward)
// and the fused Adam step.
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

namespace {

void check_index(const flx_index_desc& d, const char* what) {
  require_dtype(d.dtype, what);
  if (d.inner < 0 || d.axis_len < 0 || d.outer < 0 || d.nidx < 0)
    raise(FLX_ERR_INVALID_ARGUMENT, "negative extent");
  elem_offset(d.src, dtype_size(d.dtype), what);
  elem_offset(d.dst, dtype_size(d.dtype), what);
  elem_offset(d.idx, 8, what);
}

}  // namespace

// Indices are not checked on the host (that would cost a device round trip);
// the frontend guarantees them, and the kernels read out-of-range ones as 0
// (gather) or skip them (scatter_add) instead of touching stray memory.
int gather(void*, int dev, const flx_index_desc* dp, flx_stream s) {
  return guard("gather", [&] {
    const flx_index_desc& d = *dp;
    check_index(d, "gather");
    Device& dv = device(dev);
    launch(dv, queue_of(dv, s), d.dtype, "gather_k", size_t(d.inner * d.nidx * d.outer), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), as_mem(d.idx), cl_long(d.idx.offset),
           cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
  });
}

int scatter_add(void*, int dev, const flx_index_desc* dp, flx_stream s) {
  return guard("scatter_add", [&] {
    const flx_index_desc& d = *dp;
    check_index(d, "scatter_add");
    if (d.dtype == FLX_BOOL) raise(FLX_ERR_UNSUPPORTED, "scatter_add on Bool");
    Device& dv = device(dev);
    if (d.nidx == 0) return;
    launch(dv, queue_of(dv, s), d.dtype, "scatter_add_k", size_t(d.inner * d.outer), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), as_mem(d.idx), cl_long(d.idx.offset),
           cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
  });
}

int permute(void*, int dev, const flx_permute_desc* dp, flx_stream s) {
  return guard("permute", [&] {
    const flx_permute_desc& d = *dp;
    require_dtype(d.dtype, "permute");
    if (d.ndim < 0 || d.ndim > FLX_MAX_DIMS) raise(FLX_ERR_INVALID_ARGUMENT, "bad ndim " + std::to_string(d.ndim));
    int64_t in_strides[FLX_MAX_DIMS], s_acc = 1, total = 1;
    for (int k = 0; k < d.ndim; ++k) {
      in_strides[k] = s_acc;
      s_acc *= d.shape[k];
    }
    unsigned seen = 0;
    cl_long8 oshape{}, sstride{};
    for (int k = 0; k < d.ndim; ++k) {
      int p = d.perm[k];
      if (p < 0 || p >= d.ndim || (seen >> p) & 1u) raise(FLX_ERR_INVALID_ARGUMENT, "perm is not a permutation");
      seen |= 1u << p;
      oshape.s[k] = d.shape[p];
      sstride.s[k] = in_strides[p];
      total *= d.shape[p];
    }
    size_t es = dtype_size(d.dtype);
    elem_offset(d.src, es, "permute");
    elem_offset(d.dst, es, "permute");
    Device& dv = device(dev);
    launch(dv, queue_of(dv, s), d.dtype, "permute_k", size_t(total), as_mem(d.src), cl_long(d.src.offset),
           as_mem(d.dst), cl_long(d.dst.offset), cl_int(d.ndim), oshape, sstride, cl_long(total));
  });
}

namespace {
void softmax_any(int dev, const flx_softmax_desc& d, bool backward, flx_stream s) {
  require_float(d.dtype, "softmax");
  size_t es = dtype_size(d.dtype);
  Device& dv = device(dev);
  size_t rows = size_t(d.inner * d.outer);
  if (!backward) {
    elem_offset(d.x, es, "softmax");
    elem_offset(d.y, es, "softmax");
    launch(dv, queue_of(dv, s), d.dtype, "softmax_k", rows, cl_int(d.log != 0), as_mem(d.x), cl_long(d.x.offset),
           as_mem(d.y), cl_long(d.y.offset), cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer));
  } else {
    elem_offset(d.y, es, "softmax_backward");
    elem_offset(d.dy, es, "softmax_backward");
    elem_offset(d.dx, es, "softmax_backward");
    launch(dv, queue_of(dv, s), d.dtype, "softmax_bwd_k", rows, cl_int(d.log != 0), as_mem(d.y), cl_long(d.y.offset),
           as_mem(d.dy), cl_long(d.dy.offset), as_mem(d.dx), cl_long(d.dx.offset), cl_long(d.inner),
           cl_long(d.axis_len), cl_long(d.outer));
  }
}
}  // namespace

int softmax(void*, int dev, const flx_softmax_desc* d, flx_stream s) {
  return guard("softmax", [&] { softmax_any(dev, *d, false, s); });
}
int softmax_backward(void*, int dev, const flx_softmax_desc* d, flx_stream s) {
  return guard("softmax_backward", [&] { softmax_any(dev, *d, true, s); });
}

int optim_step(void*, int dev, const flx_optim_desc* dp, flx_stream s) {
  return guard("optim_step", [&] {
    const flx_optim_desc& d = *dp;
    if (d.kind != FLX_OPTIM_ADAM) raise(FLX_ERR_UNSUPPORTED, "unknown optimiser kind " + std::to_string(d.kind));
    require_float(d.dtype, "optim_step");
    size_t es = dtype_size(d.dtype);
    const bool has_dx = d.dx.buf != nullptr;
    elem_offset(d.grad, es, "optim_step");
    elem_offset(d.m, es, "optim_step");
    elem_offset(d.v, es, "optim_step");
    if (has_dx) elem_offset(d.dx, es, "optim_step");
    else elem_offset(d.x, es, "optim_step");
    Device& dv = device(dev);
    // The bias corrections C(1) / C(1 - beta^t), in the compute type as on the CPU.
    Scalar c1, c2;
    if (d.dtype == FLX_F64) {
      c1 = Scalar::of(1.0 / (1 - d.beta1_pow));
      c2 = Scalar::of(1.0 / (1 - d.beta2_pow));
    } else {
      c1 = Scalar::of(1.0f / float(1 - d.beta1_pow));
      c2 = Scalar::of(1.0f / float(1 - d.beta2_pow));
    }
    const int32_t t = d.dtype;
    launch(dv, queue_of(dv, s), t, "adam_k", size_t(d.n), as_mem(d.grad), cl_long(d.grad.offset), as_mem(d.m),
           cl_long(d.m.offset), as_mem(d.v), cl_long(d.v.offset), has_dx ? as_mem(d.dx) : cl_mem(nullptr),
           cl_long(d.dx.offset), cl_int(has_dx), has_dx ? cl_mem(nullptr) : as_mem(d.x), cl_long(d.x.offset),
           cl_long(d.n), compute_scalar(t, d.beta1), compute_scalar(t, d.beta2), compute_scalar(t, d.eps),
           compute_scalar(t, d.eta), c1, c2);
  });
}

}  // namespace flx_ocl

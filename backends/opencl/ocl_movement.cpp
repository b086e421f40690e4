// Data movement: gather and scatter_add along one axis, and permute from
// its canonical descriptor (out_shape and src_strides already permuted and
// merged by libflx).
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

namespace {

void check_index(const flx_index_desc& d, const char* what) {
  require_dtype(d.dtype, what);
  if (d.inner < 0 || d.axis_len < 0 || d.outer < 0 || d.nidx < 0)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": extents must be >= 0; got inner " + std::to_string(d.inner) +
                                        ", axis_len " + std::to_string(d.axis_len) + ", outer " +
                                        std::to_string(d.outer) + ", nidx " + std::to_string(d.nidx));
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
    launch(dv, queue_of(dv, s), kComputeKernels, d.dtype, "gather_k", size_t(d.inner * d.nidx * d.outer), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), as_mem(d.idx), cl_long(d.idx.offset),
           cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
  });
}

int scatter_add(void*, int dev, const flx_index_desc* dp, flx_stream s) {
  return guard("scatter_add", [&] {
    const flx_index_desc& d = *dp;
    check_index(d, "scatter_add");
    if (d.dtype == FLX_BOOL) raise(FLX_ERR_UNSUPPORTED, "scatter_add takes every dtype but Bool; got Bool");
    Device& dv = device(dev);
    if (d.nidx == 0) return;
    launch(dv, queue_of(dv, s), kComputeKernels, d.dtype, "scatter_add_k", size_t(d.inner * d.outer), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), as_mem(d.idx), cl_long(d.idx.offset),
           cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
  });
}

int permute(void*, int dev, const flx_permute_desc* dp, flx_stream s) {
  return guard("permute", [&] {
    const flx_permute_desc& d = *dp;
    require_dtype(d.dtype, "permute");
    if (d.ndim < 1 || d.ndim > FLX_MAX_DIMS)
      raise(FLX_ERR_INVALID_ARGUMENT, "permute: a canonical descriptor has 1 to " + std::to_string(FLX_MAX_DIMS) +
                                          " dims; got ndim " + std::to_string(d.ndim));
    int64_t n = 1;
    for (int k = 0; k < d.ndim; ++k) n *= d.out_shape[k];
    if (n != d.numel || n < 0)
      raise(FLX_ERR_INVALID_ARGUMENT, "permute: numel " + std::to_string(d.numel) +
                                          " is not the product of out_shape, " + std::to_string(n));
    size_t es = dtype_size(d.dtype);
    elem_offset(d.src, es, "permute");
    elem_offset(d.dst, es, "permute");
    Device& dv = device(dev);
    launch(dv, queue_of(dv, s), kComputeKernels, d.dtype, "permute_k", size_t(d.numel), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), cl_int(d.ndim), long8_of(d.out_shape, d.ndim),
           long8_of(d.src_strides, d.ndim), cl_long(d.numel));
  });
}

}  // namespace flx_ocl

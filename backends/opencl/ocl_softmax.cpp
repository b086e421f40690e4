// Softmax and logsoftmax over the middle axis of (inner, axis, outer),
// forward and backward; one work-item per row, as the CPU loops.
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

namespace {
void softmax_any(int dev, const flx_softmax_desc& d, bool backward, flx_stream s) {
  require_float(d.dtype, "softmax");
  size_t es = dtype_size(d.dtype);
  Device& dv = device(dev);
  size_t rows = size_t(d.inner * d.outer);
  if (!backward) {
    elem_offset(d.x, es, "softmax");
    elem_offset(d.y, es, "softmax");
    launch(dv, queue_of(dv, s), kComputeKernels, d.dtype, "softmax_k", rows, cl_int(d.log != 0), as_mem(d.x),
           cl_long(d.x.offset), as_mem(d.y), cl_long(d.y.offset), cl_long(d.inner), cl_long(d.axis_len),
           cl_long(d.outer));
  } else {
    elem_offset(d.y, es, "softmax_backward");
    elem_offset(d.dy, es, "softmax_backward");
    elem_offset(d.dx, es, "softmax_backward");
    launch(dv, queue_of(dv, s), kComputeKernels, d.dtype, "softmax_bwd_k", rows, cl_int(d.log != 0), as_mem(d.y),
           cl_long(d.y.offset), as_mem(d.dy), cl_long(d.dy.offset), as_mem(d.dx), cl_long(d.dx.offset),
           cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer));
  }
}
}  // namespace

int softmax(void*, int dev, const flx_softmax_desc* d, flx_stream s) {
  return guard("softmax", [&] { softmax_any(dev, *d, false, s); });
}
int softmax_backward(void*, int dev, const flx_softmax_desc* d, flx_stream s) {
  return guard("softmax_backward", [&] { softmax_any(dev, *d, true, s); });
}

}  // namespace flx_ocl

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

// scatter_add adds each destination element's sources in index order, as
// the CPU does (the same bits, no atomics). scatter_add_k gives one work item
// per (i, o), which walks every index in order: as parallel as inner * outer.
// When that is fewer items than the device runs at once (a GPU's compute unit
// keeps about a thousand in flight; a CPU device, one per core) and there are
// many indices (an embedding's gradient: d features, thousands of tokens),
// the indices are first sorted by (index, position) with a bitonic sort
// (log2(n)(log2(n) + 1)/2 launches of one step each), then one item per
// (i, sorted position, o) adds a whole run of one index in position order:
// the same sums, parallel over the indices too. A run of one index repeated
// very often stays one item's serial loop.
namespace {
constexpr int64_t kDirectMaxIndices = 32;  // fewer: the direct kernel's loop is short anyway

bool sorted_path(const Device& dv, const flx_index_desc& d) {
  const int64_t at_once = dv.kind == FLX_DEVICE_CPU ? int64_t(dv.compute_units) : int64_t(dv.compute_units) * 1024;
  return d.nidx > kDirectMaxIndices && d.inner * d.outer < at_once;
}
}  // namespace

int scatter_add(void*, int dev, const flx_index_desc* dp, flx_stream s) {
  return guard("scatter_add", [&] {
    const flx_index_desc& d = *dp;
    check_index(d, "scatter_add");
    if (d.dtype == FLX_BOOL) raise(FLX_ERR_UNSUPPORTED, "scatter_add takes every dtype but Bool; got Bool");
    Device& dv = device(dev);
    if (d.nidx == 0 || d.inner * d.outer == 0 || d.axis_len == 0) return;
    cl_command_queue q = queue_of(dv, s);
    if (!sorted_path(dv, d)) {
      launch(dv, q, kComputeKernels, d.dtype, "scatter_add_k", size_t(d.inner * d.outer), as_mem(d.src),
             cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), as_mem(d.idx), cl_long(d.idx.offset),
             cl_long(d.inner), cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
      return;
    }
    int64_t n2 = 1;
    while (n2 < d.nidx) n2 <<= 1;
    TempBuffer keys(dv, size_t(n2) * 8), pos(dv, size_t(n2) * 8);
    launch(dv, q, kComputeKernels, d.dtype, "scatter_keys_k", size_t(n2), as_mem(d.idx), cl_long(d.idx.offset),
           keys.mem, pos.mem, cl_long(d.axis_len), cl_long(d.nidx), cl_long(n2));
    for (int64_t k = 2; k <= n2; k <<= 1)
      for (int64_t j = k >> 1; j > 0; j >>= 1)
        launch(dv, q, kComputeKernels, d.dtype, "bitonic_step_k", size_t(n2), keys.mem, pos.mem, cl_long(j),
               cl_long(k), cl_long(n2));
    launch(dv, q, kComputeKernels, d.dtype, "scatter_add_sorted_k", size_t(d.inner * d.nidx * d.outer), as_mem(d.src),
           cl_long(d.src.offset), as_mem(d.dst), cl_long(d.dst.offset), keys.mem, pos.mem, cl_long(d.inner),
           cl_long(d.axis_len), cl_long(d.outer), cl_long(d.nidx));
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

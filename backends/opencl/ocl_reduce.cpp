// Reductions: SUM, MAX, MIN over the canonical runs of backend.h (kept runs
// give each output's start, reduced runs its inputs), and ARGMAX/ARGMIN
// along their one reduced run. Few outputs over many inputs split each
// reduction into chunks whose partials go to the workspace libflx allocates
// after asking reduce_workspace; a second kernel combines them. Both calls
// size the chunks with plan_of(), so they agree.
#include <algorithm>
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {
namespace {

bool is_arg(int op) { return op == FLX_REDUCE_ARGMAX || op == FLX_REDUCE_ARGMIN; }

const char* op_name(int op) {
  static const char* names[] = {"sum", "max", "min", "argmax", "argmin"};
  return op >= FLX_REDUCE_SUM && op <= FLX_REDUCE_ARGMIN ? names[op] : "reduce";
}

void check_reduce(const flx_reduce_desc& d) {
  if (d.op < FLX_REDUCE_SUM || d.op > FLX_REDUCE_ARGMIN)
    raise(FLX_ERR_UNSUPPORTED, "unknown reduce op " + std::to_string(d.op));
  const char* name = op_name(d.op);
  if (!valid_dtype(d.dtype)) raise(FLX_ERR_INVALID_ARGUMENT, std::string(name) + ": unknown dtype " + std::to_string(d.dtype));
  if (d.op == FLX_REDUCE_SUM && d.dtype == FLX_BOOL)
    raise(FLX_ERR_UNSUPPORTED, "sum takes every dtype but Bool (convert first); got Bool");
  if (d.nkept_runs < 0 || d.nkept_runs > FLX_MAX_DIMS || d.nred_runs < 0 || d.nred_runs > FLX_MAX_DIMS)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(name) + ": expected 0 to " + std::to_string(FLX_MAX_DIMS) +
                                        " kept and reduced runs; got " + std::to_string(d.nkept_runs) + " and " +
                                        std::to_string(d.nred_runs));
  if (d.nkept < 0 || d.nred < 0)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(name) + ": negative nkept (" + std::to_string(d.nkept) +
                                        ") or nred (" + std::to_string(d.nred) + ")");
  if (is_arg(d.op) && d.nred_runs != 1)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(name) + " reduces exactly one run; the descriptor has " +
                                        std::to_string(d.nred_runs));
}

// How a SUM/MAX/MIN reduction is split: nchunks chunks of `chunk` inputs per
// output, partials of acc_size bytes (the kernels' AT), `workspace` bytes of
// them (0 with one chunk).
struct Plan {
  int64_t nchunks = 1, chunk = 0;
  size_t acc_size = 0;
  uint64_t workspace = 0;
};

Plan plan_of(const Device& dv, const flx_reduce_desc& d) {
  Plan p;
  if (is_arg(d.op) || d.nkept == 0) return p;
  const int64_t nkept = d.nkept, nred = d.nred;
  // Few outputs over many elements: enough chunks to fill the device.
  const int64_t target = int64_t(dv.compute_units) * 256;
  int64_t nchunks = 1;
  if (nkept < target && nred >= 1024) nchunks = std::min<int64_t>({target / nkept, nred / 256, 4096});
  nchunks = std::max<int64_t>(nchunks, 1);
  int64_t chunk = (nred + nchunks - 1) / nchunks;
  if (chunk > 0) nchunks = (nred + chunk - 1) / chunk;
  p.nchunks = std::max<int64_t>(nchunks, 1);
  p.chunk = chunk;
  p.acc_size = is_float(d.dtype) ? (dv.fp64 ? 8 : 4) : d.dtype == FLX_BOOL ? 8 : dtype_size(d.dtype);
  if (p.nchunks > 1) p.workspace = uint64_t(nkept) * uint64_t(p.nchunks) * p.acc_size;
  return p;
}

void arg_reduce(Device& dv, cl_command_queue q, const flx_reduce_desc& d) {
  elem_offset(d.out, 8, op_name(d.op));
  // nred, not red_extent[0]: libflx sets nred to 0 for an empty input.
  launch(dv, q, kComputeKernels, d.dtype, "argred_k", size_t(d.nkept), cl_int(d.op == FLX_REDUCE_ARGMAX), as_mem(d.in),
         cl_long(d.in.offset), as_mem(d.out), cl_long(d.out.offset), cl_int(d.nkept_runs),
         long8_of(d.kept_extent, d.nkept_runs), long8_of(d.kept_stride, d.nkept_runs), cl_long(d.nred),
         cl_long(d.red_stride[0]), cl_long(d.nkept));
}

}  // namespace

int reduce_workspace(void*, int dev, const flx_reduce_desc* d, uint64_t* bytes) {
  return guard("reduce_workspace", [&] {
    check_reduce(*d);
    *bytes = plan_of(device(dev), *d).workspace;
  });
}

int reduce(void*, int dev, const flx_reduce_desc* dp, flx_stream s) {
  return guard("reduce", [&] {
    const flx_reduce_desc& d = *dp;
    check_reduce(d);
    Device& dv = device(dev);
    cl_command_queue q = queue_of(dv, s);
    const size_t es = dtype_size(d.dtype);
    const char* name = op_name(d.op);
    elem_offset(d.in, es, name);
    if (d.nkept == 0) return;
    if (is_arg(d.op)) return arg_reduce(dv, q, d);
    elem_offset(d.out, es, name);
    const Plan p = plan_of(dv, d);
    cl_mem pm = nullptr;
    cl_long po = 0;
    if (p.nchunks > 1) {
      if (!d.workspace.buf || d.workspace_bytes < p.workspace)
        raise(FLX_ERR_INVALID_ARGUMENT,
              std::string(name) + " of " + std::to_string(d.nred) + " elements into " + std::to_string(d.nkept) +
                  " outputs needs " + std::to_string(p.workspace) + " bytes of workspace (reduce_workspace); got " +
                  (d.workspace.buf ? std::to_string(d.workspace_bytes) + " bytes" : std::string("none")));
      elem_offset(d.workspace, p.acc_size, "reduce workspace");
      check_range(dv, d.workspace, size_t(p.workspace), "reduce workspace");
      pm = as_mem(d.workspace);
      po = cl_long(d.workspace.offset);
    }
    Scalar scale = accum_scalar(d.dtype, d.op == FLX_REDUCE_SUM ? d.scale : 1.0, dv.fp64);
    const int nk = d.nkept_runs, nr = d.nred_runs;
    launch(dv, q, kComputeKernels, d.dtype, "reduce_k", size_t(d.nkept * p.nchunks), cl_int(d.op), as_mem(d.in),
           cl_long(d.in.offset), as_mem(d.out), cl_long(d.out.offset), pm, po, cl_int(nk), long8_of(d.kept_extent, nk),
           long8_of(d.kept_stride, nk), cl_int(nr), long8_of(d.red_extent, nr), long8_of(d.red_stride, nr),
           cl_long(d.nkept), cl_long(d.nred), cl_long(p.chunk), cl_int(p.nchunks), scale);
    if (p.nchunks > 1)
      launch(dv, q, kComputeKernels, d.dtype, "reduce_finish_k", size_t(d.nkept), cl_int(d.op), pm, po, as_mem(d.out),
             cl_long(d.out.offset), cl_long(d.nkept), cl_int(p.nchunks), scale);
  });
}

}  // namespace flx_ocl

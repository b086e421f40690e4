// Launchers for the elementwise kernels: cast, random and map. Host-side
// work is what the CPU backend does before its loops: the same op/dtype
// checks (from the op list, backends/backend_common/map_op_info.hpp) and scalars
// converted exactly as the CPU converts them. Map descriptors arrive
// canonical (libflx coalesced the dims), so they launch as they are.
#include <string>

#include "backend_common/map_op_info.hpp"
#include "backend_common/uniform_bound.hpp"
#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n,
         flx_stream s) {
  return guard("cast", [&] {
    require_dtype(dst_dtype, "cast");
    require_dtype(src_dtype, "cast");
    Device& d = device(dev);
    if ((dst_dtype == FLX_F64 || src_dtype == FLX_F64) && !d.fp64)
      raise(FLX_ERR_UNSUPPORTED, "Float64 needs cl_khr_fp64, which " + d.name + " lacks");
    elem_offset(dst, dtype_size(dst_dtype), "cast");
    elem_offset(src, dtype_size(src_dtype), "cast");
    cl_long so = cl_long(src.offset), doff = cl_long(dst.offset);
    launch(d, queue_of(d, s), kComputeKernels, dst_dtype, "cast_k", n, cl_int(src_dtype), as_mem(src), so, as_mem(dst),
           doff, cl_long(n));
  });
}

int random(void*, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
           double a, double b, flx_stream s) {
  return guard("random", [&] {
    require_dtype(dtype, "random");
    if (!is_float(dtype))
      raise(FLX_ERR_UNSUPPORTED, std::string("random numbers need a floating dtype; got ") + dtype_name(dtype));
    if (dist != FLX_RANDOM_UNIFORM && dist != FLX_RANDOM_NORMAL)
      raise(FLX_ERR_INVALID_ARGUMENT, "unknown distribution " + std::to_string(dist));
    Device& d = device(dev);
    elem_offset(dst, dtype_size(dtype), "random");
    // Without fp64 the numbers come from float arithmetic (not those of the CPU).
    Scalar sa = d.fp64 ? Scalar::of(a) : Scalar::of(float(a));
    Scalar sb = d.fp64 ? Scalar::of(b) : Scalar::of(float(b));
    const double top = flx::uniform_bound::largest_below(dtype, b);  // exact in dtype, so in float too
    Scalar stop = d.fp64 ? Scalar::of(top) : Scalar::of(float(top));
    launch(d, queue_of(d, s), kComputeKernels, dtype, "random_k", n, cl_int(dist), as_mem(dst), cl_long(dst.offset),
           cl_long(n), cl_ulong(seed), cl_ulong(offset), sa, sb, stop);
  });
}

// ---- map ----------------------------------------------------------------------
namespace {

namespace mo = flx::map_ops;

const char* dtypes_taken(mo::OpClass c) {
  switch (c) {
    case mo::OpClass::Num: return "every dtype but Bool";
    case mo::OpClass::Float: return "floating dtypes only";
    default: return "every dtype";
  }
}

// Kernel's `kind` argument: how map_k reads operands and stores the result.
enum Kind : cl_int { kUnary = 0, kBinary = 1, kCompare = 2, kSelect = 3 };
Kind kind_of(const mo::OpInfo& i) {
  if (i.cls == mo::OpClass::Select) return kSelect;
  if (i.cls == mo::OpClass::Cmp) return kCompare;
  return i.arity == 1 ? kUnary : kBinary;
}

// Checks the descriptor is one libflx could have made: a known op that
// takes the dtype, enough inputs, the output dtype the op writes, canonical
// dims. Returns the op's entry in the list.
const mo::OpInfo& check_map(const flx_map_desc& d) {
  if (!mo::exists(d.op))
    raise(FLX_ERR_UNSUPPORTED, "unknown op code " + std::to_string(d.op) + " (this backend implements ABI " +
                                   std::to_string(FLX_BACKEND_ABI_MAJOR) + "." +
                                   std::to_string(FLX_BACKEND_TARGET_MINOR) + ")");
  const mo::OpInfo& info = mo::info(d.op);
  if (!valid_dtype(d.in_dtype))
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(info.name) + ": unknown dtype " + std::to_string(d.in_dtype));
  if (!mo::accepts(d.op, d.in_dtype))
    raise(FLX_ERR_UNSUPPORTED, std::string(info.name) + " takes " + dtypes_taken(info.cls) + "; got " +
                                   dtype_name(d.in_dtype));
  if (d.ninputs < info.arity)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(info.name) + " takes " + std::to_string(info.arity) +
                                        " inputs; the descriptor has " + std::to_string(d.ninputs));
  const int32_t out_t = mo::is_compare(d.op) ? FLX_BOOL : d.in_dtype;
  if (d.out_dtype != out_t)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(info.name) + " of " + dtype_name(d.in_dtype) + " writes " +
                                        dtype_name(out_t) + "; the descriptor's out_dtype is " +
                                        (valid_dtype(d.out_dtype) ? dtype_name(d.out_dtype) : "unknown"));
  if (d.ndim < 1 || d.ndim > FLX_MAX_DIMS)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(info.name) + ": a canonical descriptor has 1 to " +
                                        std::to_string(FLX_MAX_DIMS) + " dims; got ndim " + std::to_string(d.ndim));
  int64_t n = 1;
  for (int k = 0; k < d.ndim; ++k) n *= d.shape[k];
  if (n != d.numel || n < 0)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(info.name) + ": numel " + std::to_string(d.numel) +
                                        " is not the product of the shape, " + std::to_string(n));
  return info;
}

}  // namespace

int map(void*, int dev, const flx_map_desc* dp, flx_stream s) {
  return guard("map", [&] {
    const flx_map_desc& d = *dp;
    const mo::OpInfo& info = check_map(d);
    Device& dv = device(dev);
    if (d.numel == 0) return;
    const int32_t t = d.in_dtype;
    const Kind kind = kind_of(info);
    const int nin = info.arity;
    cl_mem bufs[3] = {nullptr, nullptr, nullptr};
    cl_long offs[3] = {0, 0, 0};
    Scalar sc[3] = {compute_scalar(t, 0), compute_scalar(t, 0), compute_scalar(t, 0)};
    cl_int smask = 0;
    // Operands the op does not read (and scalars) get zero strides: the
    // frontend leaves their fields unset.
    cl_long8 strides[3] = {};
    for (int i = 0; i < nin; ++i) {
      // WHERE's condition is Bool storage; its scalar is `scalar != 0`.
      const bool cond = kind == kSelect && i == 0;
      const int32_t ti = cond ? FLX_BOOL : t;
      if (d.in[i].is_scalar) {
        smask |= 1 << i;
        sc[i] = cond ? compute_scalar(t, d.in[i].scalar != 0 ? 1.0 : 0.0) : stored_scalar(t, d.in[i].scalar);
      } else {
        bufs[i] = as_mem(d.in[i].mem);
        offs[i] = cl_long(elem_offset(d.in[i].mem, dtype_size(ti), info.name) * dtype_size(ti));
        strides[i] = long8_of(d.in[i].strides, d.ndim);
      }
    }
    elem_offset(d.out, dtype_size(d.out_dtype), info.name);
    launch(dv, queue_of(dv, s), kComputeKernels, t, "map_k", size_t(d.numel), cl_int(d.op), cl_int(kind),
           cl_int(d.ndim), long8_of(d.shape, d.ndim), bufs[0], offs[0], strides[0], bufs[1], offs[1], strides[1],
           bufs[2], offs[2], strides[2], as_mem(d.out), cl_long(d.out.offset), smask, sc[0], sc[1], sc[2],
           compute_scalar(t, d.alpha), compute_scalar(t, d.beta), cl_long(d.numel));
  });
}

}  // namespace flx_ocl

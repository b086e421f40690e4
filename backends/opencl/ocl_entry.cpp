// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1 and the "dnn" table version 1 (ABI minor 5). No
// other table or version is offered.
#include <cstdio>
#include <string>

#include "backend_common/fused_calls.hpp"
#include "ocl_common.hpp"
#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

// How this plugin runs Float16 and BFloat16 work (the core table's
// precision_path, minor 9): all of it through Float32, on every device.
// GEMMs and the convolutions' im2col products widen their operands into
// Float32 for CLBlast's SGEMM and round each output once (ocl_gemm.cpp),
// even where the device has cl_khr_fp16: CLBlast's HGEMM would also sum
// in Float16, where the other backends sum in Float32. The other kernels
// compute in float (backend_elem.h), the recurrent layers and attention
// are the compute table's GEMMs and maps.
#if FLX_BACKEND_TARGET_MINOR >= 9
int precision_path(void*, int dev, flx_precision_path* p) {
  if (!p || p->struct_size < sizeof *p)
    return set_error(FLX_ERR_INVALID_ARGUMENT, "precision_path: a null or short flx_precision_path");
  if (dev < 0 || dev >= device_count(nullptr))
    return set_error(FLX_ERR_INVALID_ARGUMENT, "precision_path: no OpenCL device " + std::to_string(dev));
  if (p->dtype != FLX_BF16 && p->dtype != FLX_F16)
    return set_error(FLX_ERR_INVALID_ARGUMENT, "precision_path: dtype " + std::to_string(p->dtype) +
                                                   " is not a half type (FLX_F16 or FLX_BF16)");
  const char* how = nullptr;
  switch (p->op) {
    case FLX_PRECISION_GEMM:
      how = "Float32 copies through CLBlast's SGEMM (its HGEMM would sum in Float16)";
      break;
    case FLX_PRECISION_CONV:
      how = "im2col in Float32, CLBlast's SGEMM";
      break;
    case FLX_PRECISION_BATCHNORM:
      how = "Float32 kernels";
      break;
    case FLX_PRECISION_ATTENTION:
      how = "tiles through the Float32 GEMMs (no attention kernel of its own)";
      break;
    case FLX_PRECISION_RNN:
      how = "the layer's GEMMs and maps, step by step";
      break;
    default:
      return set_error(FLX_ERR_INVALID_ARGUMENT, "precision_path: op " + std::to_string(p->op) +
                                                     " is not one this backend knows");
  }
  p->speed = FLX_PRECISION_EMULATED;
  std::snprintf(p->how, sizeof p->how, "%s", how);
  return FLX_OK;
}
#endif

const flx_compute_table compute_table = [] {
  auto t = flx::abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, flx_ocl)
  t.reduce_workspace = reduce_workspace;
  t.rule_step = rule_step;  // minor 12: every optimiser rule
  return t;
}();

const flx_dnn_table dnn_table = [] {
  auto t = flx::abi::table_header<flx_dnn_table>();
  FLX_SET_DNN_CALLS(t, flx_ocl)
  t.conv_workspace = conv_workspace;
  // pool_reserve_size stays NULL: pool_backward finds each window's maximum
  // again from x and y, so a training forward keeps nothing.
  return t;
}();

// Every fused op by its code (minor 14): the calls above.
const flx_fused_table fused_table = FLX_FUSED_TABLE_OF(&dnn_table, &compute_table);

const flx_backend core_table = [] {
  flx_backend f = flx::abi::core_table_header("OpenCL");
  FLX_SET_CORE_CALLS(f, flx_ocl)
  // release_cached (minor 1) stays NULL: the plugin keeps no cache. Device
  // memory is one cl_mem per alloc, given back to the driver by free.
#if FLX_BACKEND_TARGET_MINOR >= 9
  f.precision_path = precision_path;
#endif
  return f;
}();

}  // namespace

FLX_SERVE_TABLES(compute_table, dnn_table, fused_table)

}  // namespace flx_ocl

FLX_DEFINE_BACKEND_ENTRY(flx_ocl::core_table)

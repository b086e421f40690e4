// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1 and the "dnn" table version 1 (ABI minor 5). No
// other table or version is offered.
#include "ocl_common.hpp"
#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

const flx_compute_table compute_table = [] {
  auto t = flx::abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, flx_ocl)
  t.reduce_workspace = reduce_workspace;
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

const flx_backend core_table = [] {
  flx_backend f = flx::abi::core_table_header("OpenCL");
  FLX_SET_CORE_CALLS(f, flx_ocl)
  // release_cached (minor 1) stays NULL: the plugin keeps no cache. Device
  // memory is one cl_mem per alloc, given back to the driver by free.
  return f;
}();

}  // namespace

FLX_SERVE_TABLES(compute_table, dnn_table)

}  // namespace flx_ocl

FLX_DEFINE_BACKEND_ENTRY(flx_ocl::core_table)

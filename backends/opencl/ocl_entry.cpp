// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1. No other table or version is offered.
#include "ocl_common.hpp"

namespace flx_ocl {
namespace {

const flx_compute_table compute_table = [] {
  auto t = flx::abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, flx_ocl)
  t.reduce_workspace = reduce_workspace;
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

FLX_SERVE_TABLES(compute_table)

}  // namespace flx_ocl

FLX_DEFINE_BACKEND_ENTRY(flx_ocl::core_table)

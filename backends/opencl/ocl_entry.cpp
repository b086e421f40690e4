// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1. No other table or version is offered.
#include <cstring>

#include "ocl_common.hpp"

namespace flx_ocl {
namespace {

const flx_compute_table compute_table = [] {
  flx_compute_table t{};
  t.struct_size = sizeof(flx_compute_table);
  t.version = FLX_TABLE_COMPUTE_VERSION;
  t.fill = fill;
  t.random = random;
  t.cast = cast;
  t.map = map;
  t.reduce = reduce;
  t.reduce_workspace = reduce_workspace;
  t.gemm = gemm;
  t.gather = gather;
  t.scatter_add = scatter_add;
  t.permute = permute;
  t.softmax = softmax;
  t.softmax_backward = softmax_backward;
  t.optim_step = optim_step;
  return t;
}();

const void* get_table(void*, const char* name, uint32_t version) noexcept {
  if (name && std::strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == FLX_TABLE_COMPUTE_VERSION)
    return &compute_table;
  return nullptr;
}

const flx_backend core_table = [] {
  flx_backend f{};
  f.abi_major = FLX_BACKEND_ABI_MAJOR;
  f.struct_size = sizeof(flx_backend);
  f.abi_minor = FLX_BACKEND_TARGET_MINOR;
  f.name = "OpenCL";
  f.ctx = nullptr;
  f.functional = functional;
  f.device_count = device_count;
  f.device_props = device_props;
  f.last_error = last_error_fn;
  f.get_table = get_table;
  f.alloc = alloc;
  f.free = free_buffer;
  f.host_address = host_address;
  f.host_alloc = host_alloc;
  f.host_free = host_free;
  f.stream_create = stream_create;
  f.stream_destroy = stream_destroy;
  f.stream_synchronize = stream_synchronize;
  f.event_create = event_create;
  f.event_destroy = event_destroy;
  f.event_record = event_record;
  f.stream_wait_event = stream_wait_event;
  f.event_synchronize = event_synchronize;
  f.copy_h2d = copy_h2d;
  f.copy_d2h = copy_d2h;
  f.copy_d2d = copy_d2d;
  f.copy_peer = copy_peer;
  // release_cached (minor 1) stays NULL: the plugin keeps no cache. Device
  // memory is one cl_mem per alloc, given back to the driver by free.
  return f;
}();

}  // namespace
}  // namespace flx_ocl

// Any minor version is served (the table says which one it implements);
// another major version is not.
extern "C" __attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t abi_major,
                                                                                     uint32_t abi_minor) {
  (void)abi_minor;
  if (abi_major != FLX_BACKEND_ABI_MAJOR) return nullptr;
  return &flx_ocl::core_table;
}

// The entry point has exactly the ABI's type.
[[maybe_unused]] static constexpr flx_backend_entry_fn flx_ocl_entry_type_check = &flx_backend_entry;

// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies) and, through get_table, the
// "compute" table version 1, every call set.
#include <cstring>

#include "cuda_common.hpp"

namespace flx_cuda {
namespace {

const flx_compute_table compute_table = [] {
  flx_compute_table t{};
  t.struct_size = sizeof(flx_compute_table);
  t.version = FLX_TABLE_COMPUTE_VERSION;
  FLX_SET_COMPUTE_CALLS(t, flx_cuda)
  t.reduce_workspace = reduce_workspace;  // long reductions split over blocks
  return t;
}();

const flx_backend core_table = [] {
  flx_backend f{};
  f.abi_major = FLX_BACKEND_ABI_MAJOR;
  f.struct_size = sizeof(flx_backend);
  f.abi_minor = FLX_BACKEND_TARGET_MINOR;
  f.name = "CUDA";
  f.ctx = nullptr;
  FLX_SET_CORE_CALLS(f, flx_cuda)
#if FLX_BACKEND_TARGET_MINOR >= 1
  f.release_cached = release_cached;
#endif
  return f;
}();

}  // namespace

const void* get_table(void*, const char* name, uint32_t version) {
  if (name && std::strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == FLX_TABLE_COMPUTE_VERSION)
    return &compute_table;
  return nullptr;
}

}  // namespace flx_cuda

// Any minor version is served (the table says which one it implements);
// another major version is not.
extern "C" __attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t abi_major,
                                                                                     uint32_t abi_minor) {
  (void)abi_minor;
  if (abi_major != FLX_BACKEND_ABI_MAJOR) return nullptr;
  return &flx_cuda::core_table;
}

[[maybe_unused]] static constexpr flx_backend_entry_fn flx_cuda_entry_type_check = &flx_backend_entry;

// The calls of the ABI's tables (include/flx/backend.h) as lists, so that
// what builds a table (each backend) and what checks one (the dispatch
// layer) name them once:
//
//   FLX_CORE_CALLS(X, ...)      every call of flx_backend a backend must set
//   FLX_COMPUTE_CALLS(X, ...)   every call of flx_compute_table it must set
//
// X(field, ...) is expanded once per call with the extra arguments. Calls a
// backend may leave NULL (queries, minor-version additions: reduce_workspace,
// release_cached, gemm_epilogue) are set by hand where they exist. Not installed.
#pragma once

#include <type_traits>

#include "flx/backend.h"

// clang-format off
#define FLX_CORE_CALLS(X, ...) \
  X(functional, __VA_ARGS__) X(device_count, __VA_ARGS__) X(device_props, __VA_ARGS__) \
  X(last_error, __VA_ARGS__) X(get_table, __VA_ARGS__) X(alloc, __VA_ARGS__) X(free, __VA_ARGS__) \
  X(host_address, __VA_ARGS__) X(host_alloc, __VA_ARGS__) X(host_free, __VA_ARGS__) \
  X(stream_create, __VA_ARGS__) X(stream_destroy, __VA_ARGS__) X(stream_synchronize, __VA_ARGS__) \
  X(event_create, __VA_ARGS__) X(event_destroy, __VA_ARGS__) X(event_record, __VA_ARGS__) \
  X(stream_wait_event, __VA_ARGS__) X(event_synchronize, __VA_ARGS__) X(copy_h2d, __VA_ARGS__) \
  X(copy_d2h, __VA_ARGS__) X(copy_d2d, __VA_ARGS__) X(copy_peer, __VA_ARGS__)
#define FLX_COMPUTE_CALLS(X, ...) \
  X(fill, __VA_ARGS__) X(random, __VA_ARGS__) X(cast, __VA_ARGS__) X(map, __VA_ARGS__) \
  X(reduce, __VA_ARGS__) X(gemm, __VA_ARGS__) X(gather, __VA_ARGS__) X(scatter_add, __VA_ARGS__) \
  X(permute, __VA_ARGS__) X(softmax, __VA_ARGS__) X(softmax_backward, __VA_ARGS__) X(optim_step, __VA_ARGS__)
// clang-format on

// Inside a backend's namespace: declare every call under its field's name,
// with exactly the field's type (so a definition that does not match the
// ABI does not compile).
#define FLX_DECLARE_CORE_CALL_(f, ...) std::remove_pointer_t<decltype(flx_backend::f)> f;
#define FLX_DECLARE_COMPUTE_CALL_(f, ...) std::remove_pointer_t<decltype(flx_compute_table::f)> f;
#define FLX_DECLARE_BACKEND_CALLS                   \
  FLX_CORE_CALLS(FLX_DECLARE_CORE_CALL_, unused)    \
  FLX_COMPUTE_CALLS(FLX_DECLARE_COMPUTE_CALL_, unused)

// Set every field of table `t` to the function of the same name in
// namespace `ns`.
#define FLX_SET_CALL_(f, t, ns) t.f = ns::f;
#define FLX_SET_CORE_CALLS(t, ns) FLX_CORE_CALLS(FLX_SET_CALL_, t, ns)
#define FLX_SET_COMPUTE_CALLS(t, ns) FLX_COMPUTE_CALLS(FLX_SET_CALL_, t, ns)

// The fixed fields of a backend's tables, as this header's ABI version
// (FLX_BACKEND_TARGET_MINOR for the minor) describes them.
inline flx_backend core_table_header(const char* name) {
  flx_backend f{};
  f.abi_major = FLX_BACKEND_ABI_MAJOR;
  f.struct_size = sizeof(flx_backend);
  f.abi_minor = FLX_BACKEND_TARGET_MINOR;
  f.name = name;
  return f;
}
inline flx_compute_table compute_table_header() {
  flx_compute_table t{};
  t.struct_size = sizeof(flx_compute_table);
  t.version = FLX_TABLE_COMPUTE_VERSION;
  return t;
}

// get_table for a backend whose one op table is `compute`.
inline const void* only_compute_table(const flx_compute_table& t, const char* name, uint32_t version) {
  const char* want = FLX_TABLE_COMPUTE;
  if (!name || version != FLX_TABLE_COMPUTE_VERSION) return nullptr;
  for (int i = 0;; ++i) {  // strcmp without <cstring> in every backend
    if (name[i] != want[i]) return nullptr;
    if (!name[i]) return &t;
  }
}

// A plugin's exported entry point: its core table for this major version
// and any minor (the table says which minor it implements), else NULL.
#define FLX_DEFINE_BACKEND_ENTRY(core_table)                                                                 \
  extern "C" __attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t abi_major, \
                                                                                       uint32_t) {         \
    return abi_major == FLX_BACKEND_ABI_MAJOR ? &(core_table) : nullptr;                                     \
  }                                                                                                          \
  [[maybe_unused]] static constexpr flx_backend_entry_fn flx_backend_entry_type_check_ = &flx_backend_entry;

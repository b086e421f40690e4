// The tables of the backend ABI (include/flx/backend.h), each declared once.
// A declaration lists a table's calls, each with the ABI minor version that
// added it and whether a backend must provide it:
//
//   #define FLX_<TABLE>_CALLS(X, ...)  X(call, minor, need, __VA_ARGS__) ...
//
//   need  required: every backend that implements that minor or a later one
//                   sets it (the dispatch layer reports it as lacking
//                   otherwise: flx-info lists it, and an op that needs it is
//                   NotImplemented);
//         optional: a backend may leave it NULL, and libflx does without it
//                   (no workspace, the unfused ops, no cache to release).
//
// An op table is declared with FLX_DECLARE_TABLE(struct, name, version,
// minor, CALLS) and listed in FLX_OP_TABLES. From the declarations follow:
// the dispatch layer's table slots, lookups and checks, flx-info's "lacks"
// lists and the NotImplemented messages (src/backend), and in each backend
// the declarations of its calls (FLX_DECLARE_BACKEND_CALLS), the filling of
// its tables (FLX_SET_*_CALLS, table_header) and get_table / list_tables
// (FLX_SERVE_TABLES). Adding a table: docs/backends.md. Installed: <flx/plugin/...>.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flx/backend.h"

// FLX_SINCE_<n>(...): its arguments when the layout this code is built
// against (FLX_BACKEND_TARGET_MINOR) has what minor n added, else nothing.
// One definition per minor version.
#define FLX_SINCE_0(...) __VA_ARGS__
#if FLX_BACKEND_TARGET_MINOR >= 1
#define FLX_SINCE_1(...) __VA_ARGS__
#else
#define FLX_SINCE_1(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 2
#define FLX_SINCE_2(...) __VA_ARGS__
#else
#define FLX_SINCE_2(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 3
#define FLX_SINCE_3(...) __VA_ARGS__
#else
#define FLX_SINCE_3(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 4
#define FLX_SINCE_4(...) __VA_ARGS__
#else
#define FLX_SINCE_4(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 5
#define FLX_SINCE_5(...) __VA_ARGS__
#else
#define FLX_SINCE_5(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 6
#define FLX_SINCE_6(...) __VA_ARGS__
#else
#define FLX_SINCE_6(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 7
#define FLX_SINCE_7(...) __VA_ARGS__
#else
#define FLX_SINCE_7(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 8
#define FLX_SINCE_8(...) __VA_ARGS__
#else
#define FLX_SINCE_8(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 9
#define FLX_SINCE_9(...) __VA_ARGS__
#else
#define FLX_SINCE_9(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 10
#define FLX_SINCE_10(...) __VA_ARGS__
#else
#define FLX_SINCE_10(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 11
#define FLX_SINCE_11(...) __VA_ARGS__
#else
#define FLX_SINCE_11(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 12
#define FLX_SINCE_12(...) __VA_ARGS__
#else
#define FLX_SINCE_12(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 13
#define FLX_SINCE_13(...) __VA_ARGS__
#else
#define FLX_SINCE_13(...)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 14
#define FLX_SINCE_14(...) __VA_ARGS__
#else
#define FLX_SINCE_14(...)
#endif
static_assert(FLX_BACKEND_ABI_MINOR == 14, "a new ABI minor version: add its FLX_SINCE_ definition above");

// ---- the declarations ----------------------------------------------------------
// clang-format off
#define FLX_CORE_CALLS(X, ...) \
  X(functional, 0, required, __VA_ARGS__) X(device_count, 0, required, __VA_ARGS__) \
  X(device_props, 0, required, __VA_ARGS__) X(last_error, 0, required, __VA_ARGS__) \
  X(get_table, 0, required, __VA_ARGS__) X(alloc, 0, required, __VA_ARGS__) X(free, 0, required, __VA_ARGS__) \
  X(host_address, 0, required, __VA_ARGS__) X(host_alloc, 0, required, __VA_ARGS__) \
  X(host_free, 0, required, __VA_ARGS__) X(stream_create, 0, required, __VA_ARGS__) \
  X(stream_destroy, 0, required, __VA_ARGS__) X(stream_synchronize, 0, required, __VA_ARGS__) \
  X(event_create, 0, required, __VA_ARGS__) X(event_destroy, 0, required, __VA_ARGS__) \
  X(event_record, 0, required, __VA_ARGS__) X(stream_wait_event, 0, required, __VA_ARGS__) \
  X(event_synchronize, 0, required, __VA_ARGS__) X(copy_h2d, 0, required, __VA_ARGS__) \
  X(copy_d2h, 0, required, __VA_ARGS__) X(copy_d2d, 0, required, __VA_ARGS__) \
  X(copy_peer, 0, required, __VA_ARGS__) \
  X(release_cached, 1, optional, __VA_ARGS__) \
  X(memory_info, 2, optional, __VA_ARGS__) \
  X(list_tables, 3, required, __VA_ARGS__) \
  X(event_query, 4, optional, __VA_ARGS__) X(device_address, 4, optional, __VA_ARGS__) \
  X(precision_path, 9, optional, __VA_ARGS__)

#define FLX_COMPUTE_CALLS(X, ...) \
  X(fill, 0, required, __VA_ARGS__) X(random, 0, required, __VA_ARGS__) X(cast, 0, required, __VA_ARGS__) \
  X(map, 0, required, __VA_ARGS__) X(reduce, 0, required, __VA_ARGS__) \
  X(reduce_workspace, 0, optional, __VA_ARGS__) \
  X(gemm, 0, required, __VA_ARGS__) X(gather, 0, required, __VA_ARGS__) X(scatter_add, 0, required, __VA_ARGS__) \
  X(permute, 0, required, __VA_ARGS__) X(softmax, 0, required, __VA_ARGS__) \
  X(softmax_backward, 0, required, __VA_ARGS__) X(optim_step, 0, required, __VA_ARGS__) \
  X(gemm_epilogue, 2, optional, __VA_ARGS__) X(rule_step, 12, optional, __VA_ARGS__)

#define FLX_COMM_CALLS(X, ...) \
  X(comm_id, 4, required, __VA_ARGS__) X(comm_init, 4, required, __VA_ARGS__) \
  X(comm_poll, 4, required, __VA_ARGS__) X(collective, 4, required, __VA_ARGS__) \
  X(comm_abort, 4, required, __VA_ARGS__) X(comm_destroy, 4, required, __VA_ARGS__)

#define FLX_DNN_CALLS(X, ...) \
  X(conv_workspace, 5, optional, __VA_ARGS__) X(conv_forward, 5, required, __VA_ARGS__) \
  X(conv_backward_data, 5, required, __VA_ARGS__) X(conv_backward_filter, 5, required, __VA_ARGS__) \
  X(pool_reserve_size, 5, optional, __VA_ARGS__) X(pool_forward, 5, required, __VA_ARGS__) \
  X(pool_backward, 5, required, __VA_ARGS__) X(batchnorm_forward, 5, required, __VA_ARGS__) \
  X(batchnorm_backward, 5, required, __VA_ARGS__) \
  X(rnn_reserve_size, 6, optional, __VA_ARGS__) X(rnn_forward, 6, optional, __VA_ARGS__) \
  X(rnn_backward, 6, optional, __VA_ARGS__) \
  X(attention_workspace, 7, optional, __VA_ARGS__) X(attention_forward, 7, optional, __VA_ARGS__) \
  X(attention_backward, 7, optional, __VA_ARGS__) \
  X(groupnorm_forward, 10, optional, __VA_ARGS__) X(groupnorm_backward, 10, optional, __VA_ARGS__) \
  X(conv_backward, 13, optional, __VA_ARGS__)

#define FLX_FUSED_CALLS(X, ...) \
  X(supports, 14, required, __VA_ARGS__) X(scratch_bytes, 14, required, __VA_ARGS__) \
  X(run, 14, required, __VA_ARGS__)

// The op tables libflx uses: T(id, struct, ...), each declared below with
// FLX_DECLARE_TABLE. The dispatch layer keeps one slot per entry (id_).
#define FLX_OP_TABLES(T, ...) \
  T(compute, flx_compute_table, __VA_ARGS__) \
  T(comm, flx_comm_table, __VA_ARGS__) \
  T(dnn, flx_dnn_table, __VA_ARGS__) \
  T(fused, flx_fused_table, __VA_ARGS__)
// clang-format on

// ---- what the declarations become ------------------------------------------------
namespace flx::abi {

enum class Need : uint8_t { required, optional };

struct CallDecl {
  const char* name;  // nullptr ends a list
  uint32_t offset;   // of the field in its table
  uint32_t since;    // the ABI minor version that added it
  Need need;
};

// A table as the dispatch layer reads it at run time. The core table
// (flx_backend) has calls but no name or version.
struct TableDecl {
  const char* name;
  uint32_t version;
  uint32_t since;  // the ABI minor version that brought the table
  const CallDecl* calls;
  size_t ncalls;
};

// Decl<T>: the declaration of table struct T (FLX_DECLARE_TABLE,
// FLX_DECLARE_CORE_TABLE): Decl<T>::info.
template <class T>
struct Decl;

// Whether a list names every call of T: one entry per pointer after the
// first call, in the order of the struct. Checked at the current layout
// only (built for an older minor, a list is shorter than a table declared
// whole, such as a table that came later).
template <class T, size_t N>
constexpr bool covers_every_call(const CallDecl (&calls)[N]) {
  for (size_t i = 1; i + 1 < N; ++i)
    if (calls[i].offset != calls[i - 1].offset + sizeof(void*)) return false;
  return N > 1 && calls[N - 2].offset + sizeof(void*) == sizeof(T);
}

}  // namespace flx::abi

#define FLX_CALL_DECL_(f, since, need, T) \
  FLX_SINCE_##since(::flx::abi::CallDecl{#f, uint32_t(offsetof(T, f)), since, ::flx::abi::Need::need}, )
#define FLX_TABLE_DECL_(T, NAME, VERSION, SINCE, CALLS)                                                     \
  template <>                                                                                                \
  struct flx::abi::Decl<T> {                                                                                 \
    static constexpr CallDecl calls[] = {CALLS(FLX_CALL_DECL_, T) CallDecl{}};                               \
    static constexpr const char* name = NAME;                                                                \
    static constexpr uint32_t version = VERSION;                                                             \
    static constexpr TableDecl info{NAME, VERSION, SINCE, calls, sizeof calls / sizeof calls[0] - 1};        \
  };                                                                                                         \
  static_assert(FLX_BACKEND_TARGET_MINOR != FLX_BACKEND_ABI_MINOR || flx::abi::covers_every_call<T>(         \
                                                                         flx::abi::Decl<T>::calls),          \
                #CALLS " lists every call of " #T ", in order");
// An op table: its struct, name and version for get_table, the ABI minor
// version that brought it, and its calls.
#define FLX_DECLARE_TABLE(T, NAME, VERSION, SINCE, CALLS) FLX_TABLE_DECL_(T, NAME, VERSION, SINCE, CALLS)

FLX_TABLE_DECL_(flx_backend, nullptr, 0, 0, FLX_CORE_CALLS)
FLX_DECLARE_TABLE(flx_compute_table, FLX_TABLE_COMPUTE, FLX_TABLE_COMPUTE_VERSION, 0, FLX_COMPUTE_CALLS)
FLX_DECLARE_TABLE(flx_comm_table, FLX_TABLE_COMM, FLX_TABLE_COMM_VERSION, 4, FLX_COMM_CALLS)
FLX_DECLARE_TABLE(flx_dnn_table, FLX_TABLE_DNN, FLX_TABLE_DNN_VERSION, 5, FLX_DNN_CALLS)
FLX_DECLARE_TABLE(flx_fused_table, FLX_TABLE_FUSED, FLX_TABLE_FUSED_VERSION, 14, FLX_FUSED_CALLS)

// ---- for backends ------------------------------------------------------------------
#define FLX_IF_required(...) __VA_ARGS__
#define FLX_IF_optional(...)

// Inside a backend's namespace: declare every required call of table struct
// T (its list CALLS) under its field's name, with exactly the field's type,
// so that a definition that does not match the ABI does not compile.
// FLX_DECLARE_BACKEND_CALLS does it for the core and compute tables. An
// optional call the backend provides is declared with FLX_DECLARE_CALL.
#define FLX_DECLARE_CALL(T, f) std::remove_pointer_t<decltype(T::f)> f;
#define FLX_DECLARE_REQUIRED_(f, since, need, T) FLX_SINCE_##since(FLX_IF_##need(FLX_DECLARE_CALL(T, f)))
#define FLX_DECLARE_REQUIRED_CALLS(CALLS, T) CALLS(FLX_DECLARE_REQUIRED_, T)
#define FLX_DECLARE_BACKEND_CALLS                            \
  FLX_DECLARE_REQUIRED_CALLS(FLX_CORE_CALLS, flx_backend) \
  FLX_DECLARE_REQUIRED_CALLS(FLX_COMPUTE_CALLS, flx_compute_table)

// Set every required field of table `t` (its list CALLS) to the function of
// the same name in namespace `ns`; optional ones are set by hand, where the
// backend has them.
#define FLX_SET_REQUIRED_(f, since, need, t, ns) FLX_SINCE_##since(FLX_IF_##need(t.f = ns::f;))
#define FLX_SET_REQUIRED_CALLS(CALLS, t, ns) CALLS(FLX_SET_REQUIRED_, t, ns)
#define FLX_SET_CORE_CALLS(t, ns) FLX_SET_REQUIRED_CALLS(FLX_CORE_CALLS, t, ns)
#define FLX_SET_COMPUTE_CALLS(t, ns) FLX_SET_REQUIRED_CALLS(FLX_COMPUTE_CALLS, t, ns)
#define FLX_SET_COMM_CALLS(t, ns) FLX_SET_REQUIRED_CALLS(FLX_COMM_CALLS, t, ns)
#define FLX_SET_DNN_CALLS(t, ns) FLX_SET_REQUIRED_CALLS(FLX_DNN_CALLS, t, ns)

namespace flx::abi {

// The fixed fields of a backend's core table and of its op tables, as this
// header's layout (FLX_BACKEND_TARGET_MINOR for the minor) describes them.
inline flx_backend core_table_header(const char* name) {
  flx_backend f{};
  f.abi_major = FLX_BACKEND_ABI_MAJOR;
  f.struct_size = sizeof(flx_backend);
  f.abi_minor = FLX_BACKEND_TARGET_MINOR;
  f.name = name;
  return f;
}
template <class T>
T table_header() {
  T t{};
  t.struct_size = sizeof(T);
  t.version = Decl<T>::version;
  return t;
}

constexpr bool same_name(const char* a, const char* b) {
  for (int i = 0;; ++i) {  // strcmp without <cstring> in every backend
    if (a[i] != b[i]) return false;
    if (!a[i]) return true;
  }
}
// get_table over the tables a backend serves: the one of that name and
// version, else NULL.
template <class... T>
const void* find_table(const char* name, uint32_t version, const T&... tables) {
  const void* found = nullptr;
  ((found = found ? found
                  : (name && version == Decl<T>::version && same_name(name, Decl<T>::name) ? &tables : nullptr)),
   ...);
  return found;
}
template <class... T>
constexpr std::array<flx_table_ref, sizeof...(T)> table_refs(const T&...) {
  return {flx_table_ref{Decl<T>::name, Decl<T>::version}...};
}

}  // namespace flx::abi

// Inside a backend's namespace: get_table and list_tables (minor 3) for the
// op tables given (objects of declared table structs), e.g.
// FLX_SERVE_TABLES(compute_table).
#define FLX_SERVE_TABLES(...)                                                 \
  const void* get_table(void*, const char* name, uint32_t version) {         \
    return ::flx::abi::find_table(name, version, __VA_ARGS__);                \
  }                                                                           \
  FLX_SINCE_3(const flx_table_ref* list_tables(void*, uint32_t* count) {     \
    static const auto refs = ::flx::abi::table_refs(__VA_ARGS__);             \
    *count = uint32_t(refs.size());                                           \
    return refs.data();                                                       \
  })

// A plugin's exported entry point: its core table for this major version
// and any minor (the table says which minor it implements), else NULL.
#define FLX_DEFINE_BACKEND_ENTRY(core_table)                                                                 \
  extern "C" __attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t abi_major, \
                                                                                       uint32_t) {         \
    return abi_major == FLX_BACKEND_ABI_MAJOR ? &(core_table) : nullptr;                                     \
  }                                                                                                          \
  [[maybe_unused]] static constexpr flx_backend_entry_fn flx_backend_entry_type_check_ = &flx_backend_entry;

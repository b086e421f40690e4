// A backend plugin built outside the repository, against the installed
// headers only (the plugin SDK: <flx/backend.h> and <flx/plugin/...>): it
// serves as "Metal", a valid core table whose functional() says why not,
// with a reason computed from the op list's constexpr lookups.
#include <flx/backend.h>
#include <flx/plugin/map_op_info.hpp>

#include <cstdio>
#include <cstring>

namespace {

static_assert(flx::map_ops::arity(FLX_OP_ADD) == 2, "the installed op list's lookups");

int functional(void*, char* reason, size_t cap) {
  std::snprintf(reason, cap, "not functional: the consumer's toy plugin (%s takes %d operands)",
                flx::map_ops::info(FLX_OP_ADD).name, flx::map_ops::arity(FLX_OP_ADD));
  return 0;
}
int device_count(void*) { return 0; }
const char* last_error(void*) { return ""; }
const void* get_table(void*, const char*, uint32_t) { return nullptr; }

flx_backend core;

}  // namespace

extern "C" __attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t, uint32_t) {
  std::memset(&core, 0, sizeof core);
  core.abi_major = FLX_BACKEND_ABI_MAJOR;
  core.abi_minor = FLX_BACKEND_ABI_MINOR;
  core.struct_size = sizeof core;
  core.name = "Metal";
  core.functional = functional;
  core.device_count = device_count;
  core.last_error = last_error;
  core.get_table = get_table;
  return &core;
}

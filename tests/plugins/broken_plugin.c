/* Deliberately broken backend plugins for the loader's tests, selected at
 * compile time:
 *   FLX_TEST_BAD_VERSION    - a core table of a future ABI major version
 *   FLX_TEST_V1             - a plugin of ABI version 1 (its table began
 *                             with api_version = 1, as the major does now)
 *   FLX_TEST_NO_ENTRY       - exports no entry point at all
 *   FLX_TEST_NOT_FUNCTIONAL - a valid table whose functional() says
 *                             "not functional: no driver" */
#include <string.h>

#include "flx/backend.h"

#if defined(FLX_TEST_NO_ENTRY)
int flx_backend_something_else(void) { return 0; }
#else
static int functional(void* ctx, char* reason, size_t cap) {
  (void)ctx;
  strncpy(reason, "not functional: no driver", cap - 1);
  reason[cap - 1] = '\0';
  return 0;
}
static int device_count(void* ctx) {
  (void)ctx;
  return 0;
}
static const char* last_error(void* ctx) {
  (void)ctx;
  return "";
}
static const void* get_table(void* ctx, const char* name, uint32_t version) {
  (void)ctx, (void)name, (void)version;
  return NULL;
}

static flx_backend core;

__attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t major, uint32_t minor) {
  (void)major, (void)minor;
  memset(&core, 0, sizeof core);
#if defined(FLX_TEST_BAD_VERSION)
  core.abi_major = FLX_BACKEND_ABI_MAJOR + 97;
#elif defined(FLX_TEST_V1)
  core.abi_major = 1;
#else
  core.abi_major = FLX_BACKEND_ABI_MAJOR;
#endif
  core.abi_minor = FLX_BACKEND_ABI_MINOR;
  core.struct_size = sizeof core;
  core.name = "CUDA";
  core.functional = functional;
  core.device_count = device_count;
  core.last_error = last_error;
  core.get_table = get_table;
  return &core;
}
#endif

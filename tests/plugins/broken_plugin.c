/* Deliberately broken backend plugins for the loader's tests, selected at
 * compile time:
 *   FLX_TEST_BAD_VERSION   - exports the entry point with a wrong api_version
 *   FLX_TEST_NO_ENTRY      - exports no entry point at all
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

static flx_backend_iface iface;

__attribute__((visibility("default"))) const flx_backend_iface* flx_backend_entry(uint32_t version) {
  (void)version;
  memset(&iface, 0, sizeof iface);
#if defined(FLX_TEST_BAD_VERSION)
  iface.api_version = FLX_BACKEND_API_VERSION + 99;
#else
  iface.api_version = FLX_BACKEND_API_VERSION;
#endif
  iface.struct_size = sizeof iface;
  iface.name = "CUDA";
  iface.functional = functional;
  iface.device_count = device_count;
  return &iface;
}
#endif

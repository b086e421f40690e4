/* A small working backend plugin over host memory, for the compatibility
 * tests: it serves as "CUDA" and is built in two variants:
 *   FLX_TEST_OLD_MINOR   built against ABI minor 0 (-DFLX_BACKEND_TARGET_MINOR=0,
 *                        so its core table lacks what minor 1 added) with a
 *                        compute table that ends after `fill`, as a table
 *                        from before the other functions would
 *   FLX_TEST_NO_COMPUTE  no op table at all
 *   FLX_TEST_RELEASE     no op table; every allocation fails as out of memory
 *                        until release_cached (minor 1) has been called, as
 *                        a caching allocator's would while its cache holds
 *                        the memory; memory_info (minor 2) reports the bytes
 *                        in use and, reserved, those plus a 1 MiB cache
 *                        until the cache is released
 * Memory, copies, streams and events work in both; libflx must load either
 * and refuse only the ops they lack, with a typed error. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "flx/backend.h"

static char* at(flx_mem m) { return (char*)m.buf + m.offset; }

static int functional(void* ctx, char* reason, size_t cap) {
  (void)ctx;
  if (cap) reason[0] = '\0';
  return 1;
}
static int device_count(void* ctx) {
  (void)ctx;
  return 1;
}
static int device_props(void* ctx, int dev, flx_device_props* out) {
  (void)ctx, (void)dev;
  memset(out, 0, sizeof *out);
  strcpy(out->name, "host memory test device");
  out->kind = FLX_DEVICE_GPU;
  out->total_memory = 1u << 30;
  out->free_memory = 1u << 30;
  return FLX_OK;
}
static const char* last_error(void* ctx) {
  (void)ctx;
  return "";
}
#if defined(FLX_TEST_RELEASE)
static int released = 0;
static uint64_t used = 0, used_peak = 0, cached = 1u << 20, reserved_peak = 1u << 20;
static int release_cached(void* ctx, int dev) {
  (void)ctx, (void)dev;
  released = 1;
  cached = 0;
  return FLX_OK;
}
static int memory_info(void* ctx, int dev, flx_memory_info* out) {
  (void)ctx, (void)dev;
  out->used = used;
  out->used_peak = used_peak;
  out->reserved = used + cached;
  out->reserved_peak = reserved_peak;
  return FLX_OK;
}
#endif
/* Each buffer starts with a 16-byte header holding its size. */
static int alloc(void* ctx, int dev, size_t bytes, flx_stream s, flx_buffer* out) {
  (void)ctx, (void)dev, (void)s;
#if defined(FLX_TEST_RELEASE)
  if (!released) return FLX_ERR_OUT_OF_MEMORY;
  released = 0; /* the next allocation needs another release */
  used += bytes;
  if (used > used_peak) used_peak = used;
  if (used + cached > reserved_peak) reserved_peak = used + cached;
#endif
  char* p = (char*)malloc(16 + (bytes ? bytes : 1));
  if (!p) return FLX_ERR_OUT_OF_MEMORY;
  memcpy(p, &bytes, sizeof bytes);
  *out = (flx_buffer)(p + 16);
  return FLX_OK;
}
static void free_buf(void* ctx, int dev, flx_buffer b, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  if (!b) return;
  char* p = (char*)b - 16;
#if defined(FLX_TEST_RELEASE)
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  used -= bytes;
#endif
  free(p);
}
/* Not host-addressable, so libflx moves data with the copy calls. */
static void* host_address(void* ctx, int dev, flx_buffer b) {
  (void)ctx, (void)dev, (void)b;
  return NULL;
}
static int host_alloc(void* ctx, size_t bytes, void** out) {
  (void)ctx;
  *out = malloc(bytes ? bytes : 1);
  return *out ? FLX_OK : FLX_ERR_OUT_OF_MEMORY;
}
static void host_free(void* ctx, void* p) {
  (void)ctx;
  free(p);
}
static int stream_create(void* ctx, int dev, flx_stream* out) {
  (void)ctx, (void)dev;
  *out = NULL;
  return FLX_OK;
}
static void stream_destroy(void* ctx, int dev, flx_stream s) { (void)ctx, (void)dev, (void)s; }
static int stream_sync(void* ctx, int dev, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  return FLX_OK;
}
static int event_create(void* ctx, int dev, flx_event* out) {
  (void)ctx, (void)dev;
  *out = NULL;
  return FLX_OK;
}
static void event_destroy(void* ctx, int dev, flx_event e) { (void)ctx, (void)dev, (void)e; }
static int event_record(void* ctx, int dev, flx_event e, flx_stream s) {
  (void)ctx, (void)dev, (void)e, (void)s;
  return FLX_OK;
}
static int stream_wait_event(void* ctx, int dev, flx_stream s, flx_event e) {
  (void)ctx, (void)dev, (void)s, (void)e;
  return FLX_OK;
}
static int event_sync(void* ctx, int dev, flx_event e) {
  (void)ctx, (void)dev, (void)e;
  return FLX_OK;
}
static int copy_h2d(void* ctx, int dev, flx_mem dst, const void* src, size_t n, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  memcpy(at(dst), src, n);
  return FLX_OK;
}
static int copy_d2h(void* ctx, int dev, void* dst, flx_mem src, size_t n, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  memcpy(dst, at(src), n);
  return FLX_OK;
}
static int copy_d2d(void* ctx, int dev, flx_mem dst, flx_mem src, size_t n, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  memmove(at(dst), at(src), n);
  return FLX_OK;
}
static int copy_peer(void* ctx, int dd, flx_mem dst, int sd, flx_mem src, size_t n, flx_stream s) {
  (void)sd;
  return copy_d2d(ctx, dd, dst, src, n, s);
}

#if defined(FLX_TEST_OLD_MINOR)
/* Float32 fill only: enough to show that what the table holds works. */
static int fill(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  if (dtype != FLX_F32) return FLX_ERR_UNSUPPORTED;
  float v = (float)value;
  for (size_t i = 0; i < n; ++i) memcpy(at(dst) + 4 * i, &v, 4);
  return FLX_OK;
}
static flx_compute_table compute;
#endif

static const void* get_table(void* ctx, const char* name, uint32_t version) {
  (void)ctx, (void)name, (void)version;
#if defined(FLX_TEST_OLD_MINOR)
  if (strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == 1) {
    memset(&compute, 0, sizeof compute);
    compute.struct_size = (uint32_t)(offsetof(flx_compute_table, fill) + sizeof compute.fill);
    compute.version = 1;
    compute.fill = fill;
    return &compute;
  }
#endif
  return NULL;
}

static flx_backend core;

__attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t major, uint32_t minor) {
  (void)minor;
  if (major != FLX_BACKEND_ABI_MAJOR) return NULL;
  memset(&core, 0, sizeof core);
  core.abi_major = FLX_BACKEND_ABI_MAJOR;
  core.abi_minor = FLX_BACKEND_TARGET_MINOR;
  core.struct_size = sizeof core;
  core.name = "CUDA";
  core.functional = functional;
  core.device_count = device_count;
  core.device_props = device_props;
  core.last_error = last_error;
  core.get_table = get_table;
  core.alloc = alloc;
  core.free = free_buf;
  core.host_address = host_address;
  core.host_alloc = host_alloc;
  core.host_free = host_free;
  core.stream_create = stream_create;
  core.stream_destroy = stream_destroy;
  core.stream_synchronize = stream_sync;
  core.event_create = event_create;
  core.event_destroy = event_destroy;
  core.event_record = event_record;
  core.stream_wait_event = stream_wait_event;
  core.event_synchronize = event_sync;
  core.copy_h2d = copy_h2d;
  core.copy_d2h = copy_d2h;
  core.copy_d2d = copy_d2d;
  core.copy_peer = copy_peer;
#if defined(FLX_TEST_RELEASE)
  core.release_cached = release_cached;
  core.memory_info = memory_info;
#endif
  return &core;
}

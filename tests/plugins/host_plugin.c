/* A small working backend plugin over host memory, for the compatibility
 * tests, built in these variants (tests/CMakeLists.txt):
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
 *   FLX_TEST_ABI_2_2     built against the headers of ABI 2.2 as they were
 *                        (tests/plugins/abi_2_2), served as AMDGPU: a compute
 *                        table of that layout with fill and map (Float32
 *                        negation only; anything else is answered
 *                        unsupported), and no other table
 *   FLX_TEST_PROBE       built at the current minor, served as Metal: the
 *                        "probe" table (probe_table.h) that no libflx knows,
 *                        with a workspace, and no compute table. Streams are
 *                        numbered tokens, and flx_test_probe_log() lists
 *                        the allocations, frees and probe calls in order.
 * Memory, copies, streams and events work in all; libflx must load each
 * and refuse only the ops they lack, with a typed error. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "flx/backend.h"
#if defined(FLX_TEST_PROBE)
#include <stdio.h>

#include "probe_table.h"
#endif

#if defined(FLX_TEST_ABI_2_2)
#define FLX_TEST_NAME "AMDGPU"
#elif defined(FLX_TEST_PROBE)
#define FLX_TEST_NAME "Metal"
#else
#define FLX_TEST_NAME "CUDA"
#endif

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
static const char* error = "";
static const char* last_error(void* ctx) {
  (void)ctx;
  return error;
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
#if defined(FLX_TEST_PROBE)
/* What happened, in order: "alloc 16 s1; probe scale workspace 16 s1; ..." */
static char probe_log[4096];
static void note(const char* what, size_t bytes, flx_stream s) {
  size_t used = strlen(probe_log);
  snprintf(probe_log + used, sizeof probe_log - used, "%s%s %zu s%zu", used ? "; " : "", what, bytes, (size_t)s);
}
__attribute__((visibility("default"))) const char* flx_test_probe_log(void) { return probe_log; }
__attribute__((visibility("default"))) void flx_test_probe_log_clear(void) { probe_log[0] = '\0'; }
#else
#define note(what, bytes, s) ((void)(s))
#endif
/* Each buffer starts with a 16-byte header holding its size. */
static int alloc(void* ctx, int dev, size_t bytes, flx_stream s, flx_buffer* out) {
  (void)ctx, (void)dev;
  note("alloc", bytes, s);
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
  (void)ctx, (void)dev;
  if (!b) return;
  char* p = (char*)b - 16;
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  note("free", bytes, s);
#if defined(FLX_TEST_RELEASE)
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
/* Streams are tokens (work runs at once); the probe variant numbers them
 * from 1 so its log tells them apart. */
static size_t streams_made = 0;
static int stream_create(void* ctx, int dev, flx_stream* out) {
  (void)ctx, (void)dev;
#if defined(FLX_TEST_PROBE)
  *out = (flx_stream)++streams_made;
#else
  (void)streams_made;
  *out = NULL;
#endif
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

#if defined(FLX_TEST_OLD_MINOR) || defined(FLX_TEST_ABI_2_2)
/* Float32 fill: enough to show that what the table holds works. */
static int fill(void* ctx, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  if (dtype != FLX_F32) return FLX_ERR_UNSUPPORTED;
  float v = (float)value;
  for (size_t i = 0; i < n; ++i) memcpy(at(dst) + 4 * i, &v, 4);
  return FLX_OK;
}
static flx_compute_table compute;
#endif
#if defined(FLX_TEST_ABI_2_2)
/* Float32 negation of a contiguous vector; every other op is unsupported,
 * as a backend answers for what it lacks. */
static int map(void* ctx, int dev, const flx_map_desc* d, flx_stream s) {
  (void)ctx, (void)dev, (void)s;
  if (d->op != FLX_OP_NEG || d->in_dtype != FLX_F32 || d->ndim != 1 || d->in[0].is_scalar ||
      d->in[0].strides[0] != 1) {
    error = "this test backend negates contiguous Float32 vectors, and does nothing else";
    return FLX_ERR_UNSUPPORTED;
  }
  for (int64_t i = 0; i < d->numel; ++i) {
    float v;
    memcpy(&v, at(d->in[0].mem) + 4 * i, 4);
    v = -v;
    memcpy(at(d->out) + 4 * i, &v, 4);
  }
  return FLX_OK;
}
#endif
#if defined(FLX_TEST_PROBE)
/* y = factor * x through the workspace: x is copied there first, so the
 * result is right only when the workspace is memory of the size asked for. */
static int probe_scale_workspace(void* ctx, int dev, const flx_probe_desc* d, uint64_t* bytes) {
  (void)ctx, (void)dev;
  *bytes = (uint64_t)d->n * 4;
  return FLX_OK;
}
static int probe_scale(void* ctx, int dev, const flx_probe_desc* d, flx_stream s) {
  (void)ctx, (void)dev;
  if (d->dtype != FLX_F32) {
    error = "probe scale takes Float32 only";
    return FLX_ERR_UNSUPPORTED;
  }
  if (!FLX_DESC_HAS(d, flx_probe_desc, workspace_bytes) || !d->workspace.buf ||
      d->workspace_bytes < (uint64_t)d->n * 4) {
    error = "probe scale: the workspace is missing or smaller than it asked for";
    return FLX_ERR_INVALID_ARGUMENT;
  }
  note("probe scale workspace", (size_t)d->workspace_bytes, s);
  memcpy(at(d->workspace), at(d->x), (size_t)d->n * 4);
  for (int64_t i = 0; i < d->n; ++i) {
    float v;
    memcpy(&v, at(d->workspace) + 4 * i, 4);
    v = (float)(d->factor * v);
    memcpy(at(d->y) + 4 * i, &v, 4);
  }
  return FLX_OK;
}
static flx_probe_table probe;
#endif

static const void* get_table(void* ctx, const char* name, uint32_t version) {
  (void)ctx, (void)name, (void)version;
#if defined(FLX_TEST_OLD_MINOR) || defined(FLX_TEST_ABI_2_2)
  if (strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == 1) {
    memset(&compute, 0, sizeof compute);
#if defined(FLX_TEST_OLD_MINOR)
    compute.struct_size = (uint32_t)(offsetof(flx_compute_table, fill) + sizeof compute.fill);
#else
    compute.struct_size = sizeof compute;
    compute.map = map;
#endif
    compute.version = 1;
    compute.fill = fill;
    return &compute;
  }
#endif
#if defined(FLX_TEST_PROBE)
  if (strcmp(name, FLX_TABLE_PROBE) == 0 && version == FLX_TABLE_PROBE_VERSION) {
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    probe.version = FLX_TABLE_PROBE_VERSION;
    probe.scale = probe_scale;
    probe.scale_workspace = probe_scale_workspace;
    return &probe;
  }
#endif
  return NULL;
}

#if FLX_BACKEND_TARGET_MINOR >= 3
static const flx_table_ref* list_tables(void* ctx, uint32_t* count) {
  (void)ctx;
#if defined(FLX_TEST_PROBE)
  static const flx_table_ref refs[] = {{FLX_TABLE_PROBE, FLX_TABLE_PROBE_VERSION}};
  *count = 1;
  return refs;
#else
  *count = 0;
  return NULL;
#endif
}
#endif

static flx_backend core;

__attribute__((visibility("default"))) const flx_backend* flx_backend_entry(uint32_t major, uint32_t minor) {
  (void)minor;
  if (major != FLX_BACKEND_ABI_MAJOR) return NULL;
  memset(&core, 0, sizeof core);
  core.abi_major = FLX_BACKEND_ABI_MAJOR;
  core.abi_minor = FLX_BACKEND_TARGET_MINOR;
  core.struct_size = sizeof core;
  core.name = FLX_TEST_NAME;
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
#if FLX_BACKEND_TARGET_MINOR >= 3
  core.list_tables = list_tables;
#endif
  return &core;
}

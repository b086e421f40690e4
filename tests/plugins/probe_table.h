/* The "probe" op table of the op-table tests (tests/test_op_tables.cpp): a
 * table no libflx knows, declared by that test as a table of libflx is
 * declared (backends/backend_common/backend_tables.hpp), and served by the test
 * plugin host_plugin.c built with FLX_TEST_PROBE. It follows the rules of
 * tables that come with minor 3 or later (backend.h): its descriptor
 * begins with struct_size, and a call that needs scratch memory says how
 * much with an optional *_workspace call. */
#ifndef FLX_TEST_PROBE_TABLE_H
#define FLX_TEST_PROBE_TABLE_H

#include "flx/backend.h"

#define FLX_TABLE_PROBE "probe"
#define FLX_TABLE_PROBE_VERSION 1u

/* y = factor * x over n contiguous elements. */
typedef struct flx_probe_desc {
  uint32_t struct_size; /* sizeof(flx_probe_desc) as the caller was built */
  int32_t dtype;
  int64_t n;
  double factor;
  flx_mem x, y;
  flx_mem workspace; /* of workspace_bytes, as scale_workspace asked for */
  uint64_t workspace_bytes;
} flx_probe_desc;

typedef struct flx_probe_table {
  uint32_t struct_size; /* sizeof(flx_probe_table) as the backend was built */
  uint32_t version;     /* FLX_TABLE_PROBE_VERSION */
  int (*scale)(void* ctx, int dev, const flx_probe_desc* d, flx_stream s);
  /* optional: bytes of workspace scale needs for d */
  int (*scale_workspace)(void* ctx, int dev, const flx_probe_desc* d, uint64_t* bytes);
} flx_probe_table;

#endif /* FLX_TEST_PROBE_TABLE_H */

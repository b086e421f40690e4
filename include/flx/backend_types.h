/* flx backend ABI: the version, the element types, statuses, handles and
 * memory that every table's calls share (include/flx/backend.h, the ABI's
 * entry point, says how the tables fit together and the rules for changing
 * them). Plain C. */
#ifndef FLX_BACKEND_TYPES_H
#define FLX_BACKEND_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "flx/dtype_list.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLX_BACKEND_ABI_MAJOR 2u
#define FLX_BACKEND_ABI_MINOR 14u
#ifndef FLX_BACKEND_TARGET_MINOR
#define FLX_BACKEND_TARGET_MINOR FLX_BACKEND_ABI_MINOR
#endif
#define FLX_BACKEND_ENTRY_SYMBOL "flx_backend_entry"
#define FLX_MAX_DIMS 8

/* Op table names and the versions this header describes. */
#define FLX_TABLE_COMPUTE "compute"
#define FLX_TABLE_COMPUTE_VERSION 1u
#define FLX_TABLE_DNN "dnn" /* convolution, pooling, normalisation (minor 5); recurrent layers (minor 6); attention (minor 7); group normalisation (minor 10); conv_backward (minor 13) */
#define FLX_TABLE_DNN_VERSION 1u
#define FLX_TABLE_COMM "comm" /* collectives (minor 4) */
#define FLX_TABLE_COMM_VERSION 1u
/* FLX_TABLE_FUSED "fused" (minor 14): backend_fused.h */

/* True when `table` (a pointer to a table whose first field is struct_size)
 * is long enough to hold `field` and the backend set it. */
#define FLX_HAS_FN(table, type, field)                                                         \
  ((table) != NULL && (table)->struct_size >= offsetof(type, field) + sizeof((table)->field) && \
   (table)->field != NULL)
/* True when descriptor `desc` (of a table from minor 3 on: its first field
 * is struct_size) holds `field`. */
#define FLX_DESC_HAS(desc, type, field) \
  ((desc)->struct_size >= offsetof(type, field) + sizeof((desc)->field))

/* Element types. Float16 and BFloat16 are stored as IEEE half and bfloat16
 * bits, rounded to nearest even; from minor 3 on, every path that stores a
 * NaN into them (cast, fill, map, random, reductions, ...) writes
 * sign|0x7E00 (Float16) or sign|0x7FC0 (BFloat16), the CPU's bits, whatever
 * the NaN's payload. */
#define FLX_DTYPE_ENUMERATOR_(code, sfx, name, bytes, kind, rank) FLX_##sfx = code,
typedef enum flx_dtype {
  /* FLX_F32 = 0, FLX_F64 = 1, FLX_F16 = 2, FLX_BF16 = 3, FLX_I32 = 4,
   * FLX_I64 = 5, FLX_U8 = 6, FLX_BOOL = 7: from flx/dtype_list.h */
  FLX_DTYPES(FLX_DTYPE_ENUMERATOR_)
} flx_dtype;
#undef FLX_DTYPE_ENUMERATOR_

typedef enum flx_status {
  FLX_OK = 0,
  FLX_ERR_OUT_OF_MEMORY = 1,
  FLX_ERR_INVALID_ARGUMENT = 2,
  FLX_ERR_UNSUPPORTED = 3, /* op/dtype combination this backend lacks */
  FLX_ERR_DEVICE = 4       /* driver or runtime failure */
} flx_status;

typedef enum flx_device_kind {
  FLX_DEVICE_CPU = 0,
  FLX_DEVICE_GPU = 1,
  FLX_DEVICE_ACCELERATOR = 2
} flx_device_kind;

typedef struct flx_buffer_s* flx_buffer;
typedef struct flx_stream_s* flx_stream;
typedef struct flx_event_s* flx_event;

typedef struct flx_mem {
  flx_buffer buf;
  uint64_t offset; /* bytes */
} flx_mem;

typedef struct flx_device_props {
  char name[256];
  int32_t kind; /* flx_device_kind */
  uint64_t total_memory;
  uint64_t free_memory;
} flx_device_props;

/* ---- workspace and reserve space -------------------------------------------
 * A call that needs scratch memory has an optional *_workspace function that
 * says how many bytes (0 when none) for a descriptor; libflx allocates them
 * from the device's allocator on the call's stream, passes them in the
 * descriptor's `workspace`, and frees them stream-ordered right after the
 * call (the memory is reused only once the stream has passed the call). A
 * backend without the function gets no workspace. A forward call whose
 * backward needs state from it (cuDNN's BatchNorm and RNN reserve space,
 * oneDNN's pooling workspace) gets a `reserve` of the size its
 * *_reserve_size function gives, allocated the same way, which libflx keeps
 * with the autodiff record and hands to the backward call; it is freed when
 * the record goes. */

#ifdef __cplusplus
}
#endif

#endif /* FLX_BACKEND_TYPES_H */

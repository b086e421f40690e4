/* A test backend for the fused Dense tests (tests/test_dense_fused.cpp),
 * linked into that test program, not a plugin: the CPU backend's tables with
 * gemm_epilogue wrapped so that it counts the calls per epilogue kind and
 * refuses, with FLX_ERR_UNSUPPORTED, the kinds in a mask, as a backend
 * whose library's heuristic finds no algorithm does, or fails them with
 * FLX_ERR_DEVICE and a message, as a failed cublasLtMatmul does. Everything
 * else is the CPU's. */
#include <stddef.h>
#include <string.h>

#include "flx/backend.h"

static const flx_compute_table* cpu_compute;
static const char* (*core_last_error)(void* ctx);
static flx_compute_table compute;
static flx_backend core;
static int calls[4];
static unsigned refuse, failing;
static int failed_last; /* the last gemm_epilogue failed: last_error tells why */

static int counting_gemm_epilogue(void* ctx, int dev, const flx_gemm_epilogue_desc* d, flx_stream s) {
  if (d->epilogue < 0 || d->epilogue > 3) return FLX_ERR_INVALID_ARGUMENT;
  ++calls[d->epilogue];
  failed_last = 0;
  if (refuse & (1u << d->epilogue)) return FLX_ERR_UNSUPPORTED;
  if (failing & (1u << d->epilogue)) {
    failed_last = 1;
    return FLX_ERR_DEVICE;
  }
  return cpu_compute->gemm_epilogue(ctx, dev, d, s);
}

static const char* counting_last_error(void* ctx) {
  return failed_last ? "cublasLtMatmul failed: CUBLAS_STATUS_EXECUTION_FAILED (the test backend)"
                     : core_last_error(ctx);
}

static const void* counting_get_table(void* ctx, const char* name, uint32_t version) {
  (void)ctx;
  return name && strcmp(name, FLX_TABLE_COMPUTE) == 0 && version == FLX_TABLE_COMPUTE_VERSION ? &compute : NULL;
}

/* The counting backend over `cpu` (the CPU backend's core table), named
 * `name`; NULL when the CPU backend has no gemm_epilogue to wrap. */
const flx_backend* flx_test_counting_backend(const flx_backend* cpu, const char* name) {
  cpu_compute = (const flx_compute_table*)cpu->get_table(cpu->ctx, FLX_TABLE_COMPUTE, FLX_TABLE_COMPUTE_VERSION);
  if (!FLX_HAS_FN(cpu_compute, flx_compute_table, gemm_epilogue)) return NULL;
  compute = *cpu_compute;
  compute.gemm_epilogue = counting_gemm_epilogue;
  core = *cpu;
  core.name = name;
  core.get_table = counting_get_table;
  core_last_error = cpu->last_error;
  core.last_error = counting_last_error;
  return &core;
}
int flx_test_counting_calls(int kind) { return kind >= 0 && kind < 4 ? calls[kind] : 0; }
void flx_test_counting_reset(unsigned refuse_mask) {
  memset(calls, 0, sizeof calls);
  refuse = refuse_mask;
  failing = 0;
  failed_last = 0;
}
/* The kinds in fail_mask fail with FLX_ERR_DEVICE from now on. */
void flx_test_counting_fail(unsigned fail_mask) { failing = fail_mask; }

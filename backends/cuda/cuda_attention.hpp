// Attention without its scores (the dnn table's attention_* calls, ABI
// minor 7; backend.h has the meaning): the arguments the kernels take and
// their launchers. cuda_attention.cu holds the entry points and the kernels
// for every floating dtype and head size (CUDA cores, one query or key row
// per group of four lanes); cuda_attention_wmma.cu the tensor-core kernels
// for Float16 and BFloat16 with equal head sizes of 16 to 128, which the
// entry points prefer where they apply.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flx/backend.h"

namespace flx_cuda {

// One call's operands and geometry, by value into the kernels. Element
// offsets (column-major, backend.h):
//   q (hq, H, Lq, B), k (hq, H, Lk, B), v (hv, H, Lk, B), o (hv, H, Lq, B),
//   lse and the backward's row dots (Lq, H, B), dbias and the dropout
//   counter (Lk, Lq, H, B); mask and bias through their strides.
struct AttnArgs {
  const void *q, *k, *v, *mask, *bias;
  const void* o;     // backward: the forward's output
  const void* dout;  // backward
  void* out;         // forward: o
  void* lse;         // forward: written when set; backward: read
  void *dq, *dk, *dv, *dbias;
  void* rowdot;  // backward: sum_d dout * o per row (workspace), float (double for Float64)
  int64_t hq, hv, H, Lq, Lk, B;
  int64_t mask_stride[4], bias_stride[4];
  double scale, dropout;
  uint64_t seed, offset;
  int causal;
};

// The tensor-core kernels run a case when this holds (and the pointers are
// 2-byte aligned, as every Float16/BFloat16 buffer is).
bool attention_wmma_applies(int32_t dtype, int64_t hq, int64_t hv);
// Forward, and the backward's two passes (dk/dv over key tiles, dq over
// query tiles), on the tensor cores; the row dots must be in a.rowdot and
// dbias zeroed before the backward ones. Each returns an flx_status.
int attention_wmma_forward(cudaStream_t st, int32_t dtype, const AttnArgs& a);
int attention_wmma_backward(cudaStream_t st, int32_t dtype, const AttnArgs& a);

}  // namespace flx_cuda

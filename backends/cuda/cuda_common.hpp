// Shared pieces of the CUDA backend: error reporting, the per-device state
// (memory pool, default stream, cuBLAS handle) and the ABI's calls under
// their fields' names (cuda_entry.cpp builds the tables from them).
// flx_buffer is the device pointer itself; flx_stream is a cudaStream_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "backend_common/backend_tables.hpp"
#include "flx/backend.h"

namespace flx_cuda {

// Set the calling thread's error message and return the status.
int fail(int status, const std::string& msg);
const char* last_error(void*);

// FLX_OK, or FLX_ERR_DEVICE / FLX_ERR_OUT_OF_MEMORY with "<what>: <error
// string>" as the message.
int check(cudaError_t e, const char* what);

inline char* addr(flx_mem m) { return reinterpret_cast<char*>(m.buf) + m.offset; }

// FLX_OK when the `bytes` bytes at m lie within a live allocation of device
// dev (cuda_allocations.hpp); otherwise FLX_ERR_INVALID_ARGUMENT saying why,
// as the other backends refuse a copy or fill past a buffer's end.
int check_range(int dev, flx_mem m, size_t bytes, const char* what);
// The same for n elements of elem_bytes each.
int check_elements(int dev, flx_mem m, size_t n, size_t elem_bytes, const char* what);

// Make `dev` current on this thread and check it exists; the stream to use
// for `s` (the device's default stream when s is NULL) goes to *out.
int enter(int dev, flx_stream s, cudaStream_t* out, const char* what);

// The multiprocessor count of the device the calling thread last entered
// (enter() records it; 0 before any).
int current_sm_count();

// The kernels' launch shape for n work items (grid-stride loops): one item
// per thread up to 32 blocks per multiprocessor, then the threads loop.
// 32 blocks of 256 threads is four times what a multiprocessor of sm_80 or
// sm_90 holds at once (2048 threads), so every large launch fills the GPU in
// a few full waves, and each thread then amortises its index set-up over
// several items instead of the grid growing to millions of blocks.
inline unsigned blocks_for(int64_t n, unsigned threads = 256) {
  const int64_t b = (n + threads - 1) / threads;
  const int sms = current_sm_count();
  const int64_t cap = sms > 0 ? int64_t(sms) * 32 : 4096;
  return unsigned(b < 1 ? 1 : (b > cap ? cap : b));
}

// Whether Float32 GEMM may use TF32 tensor cores: FLX_CUDA_ALLOW_TF32=1 in
// the environment, read once (off otherwise, as PyTorch's default).
bool allow_tf32();

// After a kernel launch: the launch error, if any.
int launched(const char* what);

// The ABI's calls, implemented across the cuda_*.cpp/.cu files.
FLX_DECLARE_BACKEND_CALLS
int release_cached(void*, int dev);
int gemm_epilogue(void*, int dev, const flx_gemm_epilogue_desc* d, flx_stream s);  // minor 2, optional
int rule_step(void*, int dev, const flx_rule_desc* d, flx_stream s);  // minor 12 (cuda_optim.cu)
int reduce_workspace(void*, int dev, const flx_reduce_desc* d, uint64_t* bytes);
#if FLX_BACKEND_TARGET_MINOR >= 4
FLX_DECLARE_CALL(flx_backend, event_query)     // minor 4, optional
FLX_DECLARE_CALL(flx_backend, device_address)  // minor 4, optional
#endif
#if FLX_BACKEND_TARGET_MINOR >= 9
FLX_DECLARE_CALL(flx_backend, precision_path)  // minor 9, optional (cuda_precision.cpp)
#endif
#if FLX_CUDA_HAVE_NCCL
FLX_DECLARE_REQUIRED_CALLS(FLX_COMM_CALLS, flx_comm_table)  // cuda_comm.cpp, on NCCL
#endif
#if FLX_CUDA_HAVE_CUDNN && FLX_BACKEND_TARGET_MINOR >= 5
FLX_DECLARE_REQUIRED_CALLS(FLX_DNN_CALLS, flx_dnn_table)  // cuda_dnn_conv.cpp, cuda_dnn_pool_bn.cpp, on cuDNN
FLX_DECLARE_CALL(flx_dnn_table, conv_workspace)           // optional: padded copies and cuDNN's workspace
#if FLX_BACKEND_TARGET_MINOR >= 6
FLX_DECLARE_CALL(flx_dnn_table, rnn_reserve_size)  // minor 6, optional: cuda_dnn_rnn.cpp, LSTMs on cuDNN
FLX_DECLARE_CALL(flx_dnn_table, rnn_forward)
FLX_DECLARE_CALL(flx_dnn_table, rnn_backward)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 7
FLX_DECLARE_CALL(flx_dnn_table, attention_workspace)  // minor 7, optional: cuda_attention.cu, flx's own kernels
FLX_DECLARE_CALL(flx_dnn_table, attention_forward)
FLX_DECLARE_CALL(flx_dnn_table, attention_backward)
#endif
#endif

}  // namespace flx_cuda

// The backend's tables and the one exported symbol: the core table
// (devices, memory, streams, events, copies; event_query and
// device_address, optional, too) and, through get_table, the "compute"
// table version 1, every call set (gemm_epilogue, optional, too), and the
// "comm" table version 1 on NCCL (cuda_comm.cpp) when the build found
// nccl.h (FLX_CUDA_HAVE_NCCL), and the "dnn" table version 1 on cuDNN
// (cuda_dnn_conv.cpp, cuda_dnn_pool_bn.cpp) when it found cudnn.h
// (FLX_CUDA_HAVE_CUDNN), with LSTMs, GRUs and tanh and relu RNNs on cuDNN's
// RNN (cuda_dnn_rnn.cpp) and attention on flx's own kernels
// (cuda_attention.cu); and the "fused" table (minor 14) made of those.
#include "backend_common/fused_calls.hpp"
#include "cuda_common.hpp"
#include "cuda_device.hpp"

namespace flx_cuda {
namespace {

const flx_compute_table compute_table = [] {
  auto t = flx::abi::table_header<flx_compute_table>();
  FLX_SET_COMPUTE_CALLS(t, flx_cuda)
  t.reduce_workspace = reduce_workspace;  // long reductions split over blocks
#if FLX_BACKEND_TARGET_MINOR >= 2
  t.gemm_epilogue = gemm_epilogue;  // cuBLASLt epilogues (cuda_gemm_lt.cpp)
#endif
#if FLX_BACKEND_TARGET_MINOR >= 12
  t.rule_step = rule_step;  // every optimiser rule (cuda_optim.cu)
#endif
  return t;
}();

#if FLX_CUDA_HAVE_NCCL
const flx_comm_table comm_table = [] {
  auto t = flx::abi::table_header<flx_comm_table>();
  FLX_SET_COMM_CALLS(t, flx_cuda)
  return t;
}();
#endif

#if FLX_CUDA_HAVE_CUDNN && FLX_BACKEND_TARGET_MINOR >= 5
const flx_dnn_table dnn_table = [] {
  auto t = flx::abi::table_header<flx_dnn_table>();
  FLX_SET_DNN_CALLS(t, flx_cuda)
  t.conv_workspace = conv_workspace;  // pool_reserve_size stays NULL: pooling keeps no reserve
#if FLX_BACKEND_TARGET_MINOR >= 6
  t.rnn_reserve_size = rnn_reserve_size;  // LSTMs on cuDNN (cuda_dnn_rnn.cpp)
  t.rnn_forward = rnn_forward;
  t.rnn_backward = rnn_backward;
#endif
#if FLX_BACKEND_TARGET_MINOR >= 7
  t.attention_workspace = attention_workspace;  // flx's own kernels (cuda_attention.cu)
  t.attention_forward = attention_forward;
  t.attention_backward = attention_backward;
#endif
  return t;
}();
#define FLX_CUDA_DNN_TABLE , dnn_table
#define FLX_CUDA_DNN_PTR &dnn_table
#else
#define FLX_CUDA_DNN_TABLE
#define FLX_CUDA_DNN_PTR nullptr
#endif

#if FLX_BACKEND_TARGET_MINOR >= 14
// Every fused op by its code (minor 14): the calls above.
const flx_fused_table fused_table = FLX_FUSED_TABLE_OF(FLX_CUDA_DNN_PTR, &compute_table);
#define FLX_CUDA_FUSED_TABLE , fused_table
#else
#define FLX_CUDA_FUSED_TABLE
#endif

const flx_backend core_table = [] {
  flx_backend f = flx::abi::core_table_header("CUDA");
  FLX_SET_CORE_CALLS(f, flx_cuda)
#if FLX_BACKEND_TARGET_MINOR >= 1
  f.release_cached = release_cached;
#endif
#if FLX_BACKEND_TARGET_MINOR >= 2
  f.memory_info = memory_info;
#endif
#if FLX_BACKEND_TARGET_MINOR >= 4
  f.event_query = event_query;
  f.device_address = device_address;
#endif
#if FLX_BACKEND_TARGET_MINOR >= 9
  f.precision_path = precision_path;  // which half ops run on the tensor cores (cuda_precision.cpp)
#endif
  return f;
}();

}  // namespace

#if FLX_CUDA_HAVE_NCCL
FLX_SERVE_TABLES(compute_table, comm_table FLX_CUDA_DNN_TABLE FLX_CUDA_FUSED_TABLE)
#else
FLX_SERVE_TABLES(compute_table FLX_CUDA_DNN_TABLE FLX_CUDA_FUSED_TABLE)
#endif

}  // namespace flx_cuda

FLX_DEFINE_BACKEND_ENTRY(flx_cuda::core_table)

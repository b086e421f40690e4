// NCCL, opened by the first call of the comm table that needs it (comm_id,
// comm_init), not linked: probing the plugin (functional(), which flx-info
// and every get_device() ask), and looking its tables up, then maps no NCCL,
// and a process that never joins a communicator never pays its 200 MB.
// The entry points keep the types of the nccl.h the plugin was built with;
// the dtype and op maps of the comm table are here too.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace flx_cuda {

struct NcclApi {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclCommFinalize) comm_finalize;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclReduce) reduce;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclGetLastError) last_error;
  int version = 0;  // ncclGetVersion's code: 22809 for 2.28.9
};

// The oldest NCCL the plugin takes: 2.14 brought non-blocking communicators
// (ncclConfig_t's blocking) and ncclCommFinalize.
inline constexpr int kMinNcclVersion = 21400;

// The library's entry points in *out: FLX_OK, or `status` with last_error()
// saying what `what` needed, every path tried (or the version found) and
// what to do. Loaded once per process (a failure is not retried);
// thread-safe.
int nccl_api(const NcclApi** out, int status, const char* what);

// The paths tried, in order: the soname (LD_LIBRARY_PATH, the plugin's
// RUNPATH, the system's), then beside the CUDA runtime the plugin uses (a
// toolkit's lib64), then the lib directory of pip's nvidia-nccl wheel
// beside that runtime's wheel (nvidia/cu13/lib -> nvidia/nccl/lib).
std::vector<std::string> nccl_candidates(const std::string& runtime_dir);

// "2.28.9" from 22809 (and 2.8.4 from 2804, NCCL's older code).
std::string nccl_version_string(int code);

// flx_dtype -> ncclDataType_t (Bool as ncclUint8); false for none.
bool nccl_dtype(int32_t dtype, ncclDataType_t* out);
// flx_comm_op -> ncclRedOp_t (AVG is ncclAvg); false for none.
bool nccl_op(int32_t op, ncclRedOp_t* out);

// "<ncclGetErrorString(r)>: <ncclGetLastError()>" (the second part only
// when NCCL has a message), for last_error().
std::string nccl_error(const NcclApi& api, ncclResult_t r);

}  // namespace flx_cuda

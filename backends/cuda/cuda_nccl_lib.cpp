// Opens NCCL on first use (see cuda_nccl_lib.hpp), as cuda_blas_libs.cpp
// opens cuBLAS, and maps the comm table's dtypes and ops to NCCL's.
#include "cuda_nccl_lib.hpp"

#include <cuda_runtime_api.h>

#include "backend_common/vendor_library.hpp"
#include "cuda_common.hpp"

#define FLX_CUDA_STR2(x) #x
#define FLX_CUDA_STR(x) FLX_CUDA_STR2(x)

namespace flx_cuda {
namespace {

constexpr const char* kSoname = "libnccl.so." FLX_CUDA_STR(NCCL_MAJOR);
// What to do when NCCL cannot be used; the wheel's name carries the CUDA
// major version the plugin was built for.
const std::string& fix() {
  static const std::string f = "install NCCL " FLX_CUDA_STR(NCCL_MAJOR) ".x, 2.14 or later, for CUDA " +
                               std::to_string(CUDART_VERSION / 1000) + " (pip install nvidia-nccl-cu" +
                               std::to_string(CUDART_VERSION / 1000) + ", or NVIDIA's libnccl" FLX_CUDA_STR(
                                   NCCL_MAJOR) " package), or put the directory holding " +
                               kSoname + " on LD_LIBRARY_PATH";
  return f;
}

using flx::vendor::LoadedApi;
using flx::vendor::VendorLibrary;

const LoadedApi<NcclApi>& loaded_nccl() {
  return flx::vendor::load_once<NcclApi>(
      [] {
        const std::string runtime_dir =
            flx::vendor::directory_of(reinterpret_cast<const void*>(&cudaGetDeviceCount));
        return flx::vendor::open_vendor_library("NCCL", nccl_candidates(runtime_dir), fix().c_str());
      },
      [](VendorLibrary& lib, NcclApi& api) {
        lib.resolve("ncclGetVersion", api.get_version);
        lib.resolve("ncclGetUniqueId", api.get_unique_id);
        lib.resolve("ncclCommInitRankConfig", api.comm_init_rank_config);
        lib.resolve("ncclCommGetAsyncError", api.comm_get_async_error);
        lib.resolve("ncclCommFinalize", api.comm_finalize);
        lib.resolve("ncclCommDestroy", api.comm_destroy);
        lib.resolve("ncclCommAbort", api.comm_abort);
        lib.resolve("ncclAllReduce", api.all_reduce);
        lib.resolve("ncclBroadcast", api.broadcast);
        lib.resolve("ncclReduce", api.reduce);
        lib.resolve("ncclGetErrorString", api.error_string);
        lib.resolve("ncclGetLastError", api.last_error);
        // Older than non-blocking communicators: refused whole, whatever
        // resolved (2.13 has every symbol above but ncclCommFinalize).
        if (lib.ok() && (api.get_version(&api.version) != ncclSuccess || api.version < kMinNcclVersion))
          lib.error = "NCCL " + nccl_version_string(api.version) +
                      " was loaded, but flx needs 2.14 or later (non-blocking communicators)\nTo fix: " + fix();
      });
}

}  // namespace

std::vector<std::string> nccl_candidates(const std::string& runtime_dir) {
  std::vector<std::string> c{kSoname};
  if (!runtime_dir.empty()) {
    c.push_back(runtime_dir + "/" + kSoname);
    c.push_back(runtime_dir + "/../../nccl/lib/" + kSoname);
  }
  return c;
}

std::string nccl_version_string(int code) {
  // NCCL_VERSION(X, Y, Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z since.
  const bool old = code < 10000;
  const int major = old ? code / 1000 : code / 10000, minor = old ? code / 100 % 10 : code / 100 % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

int nccl_api(const NcclApi** out, int status, const char* what) {
  const LoadedApi<NcclApi>& l = loaded_nccl();
  if (!l.error.empty()) return fail(status, std::string(what) + ": " + l.error);
  *out = &l.api;
  return FLX_OK;
}

bool nccl_dtype(int32_t dtype, ncclDataType_t* out) {
  switch (dtype) {
    case FLX_F32: *out = ncclFloat32; return true;
    case FLX_F64: *out = ncclFloat64; return true;
    case FLX_F16: *out = ncclFloat16; return true;
    case FLX_BF16: *out = ncclBfloat16; return true;
    case FLX_I32: *out = ncclInt32; return true;
    case FLX_I64: *out = ncclInt64; return true;
    case FLX_U8:
    case FLX_BOOL: *out = ncclUint8; return true;  // Bool holds 0 or 1: MAX is any, MIN is all
  }
  return false;
}

bool nccl_op(int32_t op, ncclRedOp_t* out) {
  switch (op) {
    case FLX_COMM_SUM: *out = ncclSum; return true;
    case FLX_COMM_MAX: *out = ncclMax; return true;
    case FLX_COMM_MIN: *out = ncclMin; return true;
    case FLX_COMM_AVG: *out = ncclAvg; return true;
  }
  return false;
}

std::string nccl_error(const NcclApi& api, ncclResult_t r) {
  std::string s = api.error_string(r);
  const char* last = api.last_error(nullptr);  // the comm argument is unused
  if (last && *last) s += std::string(": ") + last;
  return s;
}

}  // namespace flx_cuda

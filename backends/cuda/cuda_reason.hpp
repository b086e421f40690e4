// Why the CUDA backend cannot run, worded for users, from plain inputs (the
// runtime's error code, the device count, CUDA_VISIBLE_DEVICES, the driver
// and runtime versions), so that it is unit-tested without a GPU or even
// without libcudart: this file and cuda_reason.cpp include no CUDA header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flx_cuda {

// What cudaGetDeviceCount and friends reported.
struct ProbeResult {
  int error = 0;                 // cudaError_t of cudaGetDeviceCount (0: success)
  std::string error_string;      // cudaGetErrorString(error)
  int device_count = 0;          // 0 when the call failed
  const char* visible = nullptr; // getenv("CUDA_VISIBLE_DEVICES"), or NULL when unset
  int driver_version = 0;        // cudaDriverGetVersion (1000*major + 10*minor), 0 when no driver
  int runtime_version = 0;       // cudaRuntimeGetVersion
};

// The cudaError_t codes the reasons depend on (stable values of the CUDA
// runtime API; restated so this file needs no CUDA header).
inline constexpr int kErrInsufficientDriver = 35;  // cudaErrorInsufficientDriver
inline constexpr int kErrNoDevice = 100;           // cudaErrorNoDevice

// "12.4" from 12040.
std::string cuda_version_string(int v);

// The devices CUDA_VISIBLE_DEVICES selects, as the runtime reads it: a
// comma-separated list of indices (or GPU-/MIG- UUIDs), cut at the first
// invalid entry; "-1" or an empty list hides every GPU. nullopt when the
// variable is unset (every device visible). UUID entries count as one
// device each; their index is -1.
std::optional<std::vector<int>> parse_visible_devices(const char* value);

// Empty when the backend is usable (a device count above 0 and no error);
// otherwise the reason, worded for users.
std::string unusable_reason(const ProbeResult& p);

}  // namespace flx_cuda

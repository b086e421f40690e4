// Backends and device selection, as Flux v0.14 does it:
//
//   Device dev = get_device({.verbose = true});  // preference, else first functional GPU, else CPU
//   Device d1  = get_device("OpenCL", 1);        // a given device (0-based)
//   gpu_backend("OpenCL");                       // write LocalPreferences.toml (new processes)
//
// GPU backends are plugins (libflx_backend_<name>.so) found in
// $FLX_BACKEND_PATH, then in the flx/ folder beside libflx and beside libflx
// itself (as loaded, then with links resolved), never in a folder fixed at
// build time; they are loaded on first need or by load_backend(name).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flx/device.hpp"
#include "flx/dtype.hpp"
#include "flx/functor.hpp"

namespace flx {

struct FLX_API GetDeviceOptions {
  bool verbose = false;  // log each step of the selection
  bool force = false;    // throw instead of falling back when the preference fails
};

// The device the preference names if functional, else the first functional
// of CUDA, AMDGPU, Metal and OpenCL (GPU or accelerator devices only), else
// the CPU.
FLX_API Device get_device(const GetDeviceOptions& opts = {});
// Device `ordinal` (0-based) of backend `name`; throws BackendUnavailable.
FLX_API Device get_device(std::string_view name, int ordinal = 0);

// The one device x's tensors live on (the CPU when it holds none); throws
// DeviceMismatch when they live on several.
FLX_API Device common_device(const std::vector<Tensor>& ts);
template <class T>
Device get_device(const T& x)
  requires(!std::is_convertible_v<T, std::string_view> && !std::is_same_v<T, GetDeviceOptions>)
{
  return common_device(leaves(x));
}

// The GPU backend in force for this process: $FLX_GPU_BACKEND, else
// LocalPreferences.toml ([Flux] gpu_backend, searched from the working
// directory upwards), else "CUDA". Read once per process.
FLX_API std::string gpu_backend();
// Where gpu_backend() came from: "environment (FLX_GPU_BACKEND)", a file
// path, or "default".
FLX_API std::string gpu_backend_source();
// Write the preference into LocalPreferences.toml (the one found from the
// working directory upwards, else a new one in the working directory),
// keeping its other tables and keys. Takes effect in new processes.
FLX_API void gpu_backend(std::string_view name);

// Load a backend plugin now (the explicit `using CUDA`); throws
// BackendUnavailable with the reason when it is missing or not functional.
FLX_API void load_backend(std::string_view name);
// Whether a backend is installed and works on this machine.
FLX_API bool functional(std::string_view name);

struct FLX_API BackendStatus {
  std::string name;         // "CUDA"
  bool built_in = false;    // the CPU
  bool plugin_found = false;
  std::string plugin_path;  // where the plugin was found
  bool functional = false;
  std::string reason;       // why not, when not functional
  std::string abi;          // the backend ABI version it implements ("2.1")
  // Op tables it serves: "compute v1", "compute v1 (lacks map, reduce)",
  // "dnn v1 (unknown to this libflx)".
  std::vector<std::string> tables;
};
FLX_API BackendStatus backend_status(std::string_view name);

struct FLX_API DeviceInfo {
  Device device;
  std::string name;
  std::string kind;  // "CPU", "GPU", "accelerator"
  uint64_t total_memory = 0;
  uint64_t free_memory = 0;
};
// The devices of a functional backend (empty when not functional).
FLX_API std::vector<DeviceInfo> devices(std::string_view backend);

// How a device runs Float16 or BFloat16 work, one family of ops at a time
// (flx-info lists them): "fast" (in the type, on hardware made for it:
// tensor cores, AVX512-BF16, AMX), "emulated" (correct, through Float32,
// so no faster than Float32) or "missing" (NotImplemented), and what runs
// it or why it is not fast. The backend's own answer, from what it
// dispatches on that device.
struct FLX_API PrecisionPath {
  DType dtype;
  std::string op;     // "GEMM", "convolution", "batch norm", "attention", "recurrent layers"
  std::string speed;  // "fast", "emulated", "missing"
  std::string how;    // "oneDNN brg:avx512_core_bf16", "Float32 copies: ..."
};
// Every family in Float16 and in BFloat16 on device d; empty when its
// backend does not say (a plugin built before ABI 2.9 brought the call).
FLX_API std::vector<PrecisionPath> precision_paths(const Device& d);

struct FLX_API MemoryStats {
  int64_t in_use = 0;       // bytes held by live tensors now
  int64_t peak = 0;         // most bytes in use at once
  int64_t allocations = 0;  // live allocations now
  // What the backend's allocator holds on the device (in use plus cached for
  // reuse, as torch.cuda.memory_reserved), now and at most; -1 where the
  // backend does not report it (the CPU, OpenCL).
  int64_t reserved = -1;
  int64_t reserved_peak = -1;
};
// Memory flx has allocated on a device (freed deterministically: a tensor's
// storage goes when its last handle does), and what the device's allocator
// holds for it.
FLX_API MemoryStats memory_stats(const Device& d);

// Transfer rates of device d in GB/s (1e9 bytes per second), each the median
// of `repeats` copies of `bytes` bytes: host to device and device to host
// from pinned (page-locked) and from ordinary, pageable host memory, and
// device to device within d. A rate is 0 where the backend has no pinned
// memory. For `flx-info --bandwidth`, and to judge a data pipeline against.
struct FLX_API Bandwidth {
  double h2d_pinned = 0, h2d_pageable = 0;
  double d2h_pinned = 0, d2h_pageable = 0;
  double d2d = 0;
  size_t bytes = 0;
  int repeats = 0;
};
FLX_API Bandwidth measure_bandwidth(const Device& d, size_t bytes = size_t(64) << 20, int repeats = 5);
// Rate in GB/s of moving `bytes` bytes from device `from` to device `to`
// (both of one backend: a peer copy, or through the host where the backend
// has no direct path), the median of `repeats` moves.
FLX_API double measure_peer_bandwidth(const Device& from, const Device& to, size_t bytes = size_t(64) << 20,
                              int repeats = 5);

// Wait until the work this thread has queued on device d is done (as
// CUDA.synchronize()): for timing, and before reading device results by
// other means than flx. Copies to the host wait by themselves.
FLX_API void synchronize(const Device& d);

}  // namespace flx

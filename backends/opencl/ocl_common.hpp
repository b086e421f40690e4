// Shared pieces of the OpenCL backend: the process-wide device table, errors
// that become (status, message) at the ABI boundary, and kernel launches.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backend_common/backend_tables.hpp"
#include "flx/backend.h"

namespace flx_ocl {

// ---- errors -----------------------------------------------------------------
// Thrown inside the plugin only; guard() turns it into a status and sets the
// calling thread's last_error message. Nothing escapes through the C ABI.
struct Error : std::exception {
  int status;
  std::string msg;
  Error(int s, std::string m) : status(s), msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
};
[[noreturn]] inline void raise(int status, const std::string& msg) { throw Error(status, msg); }
const char* cl_error_name(cl_int err);
// Throws FLX_ERR_OUT_OF_MEMORY or FLX_ERR_DEVICE naming the call when err != CL_SUCCESS.
void check_cl(cl_int err, const std::string& what);

int set_error(int status, const std::string& msg);
const char* last_error();

template <class F>
int guard(const char* what, F&& f) noexcept {
  try {
    f();
    return FLX_OK;
  } catch (const Error& e) {
    return set_error(e.status, std::string(what) + ": " + e.msg);
  } catch (const std::bad_alloc&) {
    return set_error(FLX_ERR_OUT_OF_MEMORY, std::string(what) + ": out of host memory");
  } catch (const std::exception& e) {
    return set_error(FLX_ERR_DEVICE, std::string(what) + ": " + e.what());
  } catch (...) {
    return set_error(FLX_ERR_DEVICE, std::string(what) + ": unknown error");
  }
}

// ---- devices ----------------------------------------------------------------
constexpr int kNumDtypes = 8;

// ---- kernel families ------------------------------------------------------------
// A family is kernels built together: one program per (device, dtype), built
// on the first launch of any of its kernels and kept for the process. A
// process compiles only the families it launches, so the kernels of a new
// table cost nothing to the programs that never call them. A family is one
// constant (ocl_families.cpp), its OpenCL C text in kernels/*.cl (embedded
// at build time as flx_ocl::embedded::<file>_cl, see CMakeLists.txt), and
// it is named by the host code that launches its kernels; nothing else
// lists the families. Each program costs the driver a fixed time
// (PoCL: about 150 ms cold, 35 ms from its cache), so a family holds the
// kernels that are used together: one per table (docs/opencl.md).
enum class KernelNeeds {
  kPrelude,           // the prelude only: types, loads and stores, strided offsets
  kElementFunctions,  // and include/flx/backend_ops.h and backend_elem.h (max_nan, sigm, ...)
  kOpSwitches,        // and op_value/op_cmp, the switches generated from FLX_MAP_OPS
};
struct KernelFamily {
  const char* name;   // "compute": in FLX_OPENCL_VERBOSE's lines and in build errors
  KernelNeeds needs;  // what goes before the kernels
  std::vector<const char*> kernels;  // OpenCL C: the family's kernels (and their helpers), joined in order
};
extern const KernelFamily kComputeKernels;  // the compute table's (ocl_families.cpp)

struct Kernel {
  std::string name;
  cl_kernel k = nullptr;
  size_t local = 1;  // work-group size used for every launch (fixed: PoCL compiles one variant per size)
  bool launched = false;  // under Device::launch_mu; the first launch waits for the device (ocl_program.cpp)
};

// One family's program for one dtype on one device.
struct Program {
  std::once_flag once;  // the build: one thread runs it, concurrent first users wait for it
  std::string error;    // the build log when the build failed
  cl_program prog = nullptr;
  std::vector<Kernel> kernels;
};
// A program build: what FLX_OPENCL_VERBOSE prints, and what the tests read
// (built_programs) to check that a process builds only what it launches.
struct BuiltProgram {
  std::string family;
  int dtype;
  bool ok;
  double ms;
};

struct Device {
  cl_device_id id = nullptr;
  cl_platform_id platform = nullptr;
  cl_context ctx = nullptr;  // shared by every device of the platform
  cl_command_queue queue = nullptr;  // the default (NULL) stream, in order
  std::string name;
  int kind = FLX_DEVICE_GPU;
  uint64_t total_mem = 0, max_alloc = 0;
  bool fp64 = false, exact_divsqrt = false, amd_free_mem = false;
  cl_uint compute_units = 1;
  size_t max_wg = 1;
  std::mutex launch_mu;  // clSetKernelArg + enqueue (kernel objects are not thread safe)
  std::mutex programs_mu;  // the two below (not the builds: each Program's once_flag orders its own)
  std::map<const KernelFamily*, std::array<Program, kNumDtypes>> programs;  // entries are never removed
  std::vector<BuiltProgram> built;  // every build so far, in order
};

struct State {
  std::string reason;  // why there is no usable device
  std::vector<std::unique_ptr<Device>> devices;
};
// Discovered once; deliberately never destroyed (the ICD may be gone at exit).
State& state();
Device& device(int dev);
inline cl_command_queue queue_of(Device& d, flx_stream s) {
  return s ? reinterpret_cast<cl_command_queue>(s) : d.queue;
}
inline cl_mem as_mem(flx_buffer b) { return reinterpret_cast<cl_mem>(b); }
inline cl_mem as_mem(flx_mem m) { return reinterpret_cast<cl_mem>(m.buf); }

// Kernel `name` of the family's program for dtype, building the program on
// first use. A failed build throws FLX_ERR_DEVICE with the build log (and
// again on every later use: it is not retried).
Kernel& kernel(Device& d, const KernelFamily& family, int dtype, const char* name);
// FLX_OPENCL_VERBOSE=1: print each program build, and time each kernel's
// first run (ocl_program.cpp; read once).
bool verbose();
double ms_since(std::chrono::steady_clock::time_point t0);
std::vector<BuiltProgram> built_programs(Device& d);  // in the order they were built
// The OpenCL C source of a family's program (ocl_source.cpp): the prelude
// (kernels/prelude.cl),
// what the family needs of the element functions (include/flx/backend_elem.h)
// and the op switches generated from FLX_MAP_OPS, then its kernels.
std::string program_source(const KernelFamily& family);

// Throws FLX_ERR_INVALID_ARGUMENT unless [m.offset, m.offset + bytes) lies in
// m's buffer and the buffer belongs to d's context.
void check_range(Device& d, flx_mem m, size_t bytes, const char* what);

// ---- launches ---------------------------------------------------------------
// A scalar kernel argument whose C type depends on the dtype (float, double,
// int, long, uchar): the bytes and their size.
struct Scalar {
  unsigned char bytes[8] = {};
  size_t size = 0;
  template <class T>
  static Scalar of(T v) {
    static_assert(sizeof(T) <= 8);
    Scalar s;
    std::memcpy(s.bytes, &v, sizeof v);
    s.size = sizeof v;
    return s;
  }
};

inline void set_arg(cl_kernel k, cl_uint i, const Scalar& v, const char* name) {
  check_cl(clSetKernelArg(k, i, v.size, v.bytes), std::string("clSetKernelArg(") + name + ")");
}
template <class T>
void set_arg(cl_kernel k, cl_uint i, const T& v, const char* name) {
  check_cl(clSetKernelArg(k, i, sizeof(T), &v), std::string("clSetKernelArg(") + name + ", " + std::to_string(i) + ")");
}
void enqueue(Device& d, cl_command_queue q, Kernel& k, size_t items);

// Run kernel `name` of the family's program for dtype over `items`
// work-items (grid-stride loops in the kernels cover any count).
template <class... A>
void launch(Device& d, cl_command_queue q, const KernelFamily& family, int dtype, const char* name, size_t items,
            const A&... args) {
  if (items == 0) return;
  Kernel& k = kernel(d, family, dtype, name);
  std::lock_guard<std::mutex> lock(d.launch_mu);
  cl_uint i = 0;
  (set_arg(k.k, i++, args, name), ...);
  enqueue(d, q, k, items);
}

// A device buffer released when it goes out of scope. Releasing right after
// enqueueing is safe: OpenCL deletes a memory object only once its reference
// count is zero and the enqueued commands using it have finished.
struct TempBuffer {
  cl_mem mem = nullptr;
  TempBuffer(Device& d, size_t bytes);
  ~TempBuffer() {
    if (mem) clReleaseMemObject(mem);
  }
  TempBuffer(const TempBuffer&) = delete;
  TempBuffer& operator=(const TempBuffer&) = delete;
};

// ---- ABI entry points, implemented across the files under their fields'
// names: the core table (ocl_context.cpp, ocl_memory.cpp, ocl_entry.cpp) and
// the compute table (ocl_memory.cpp, ocl_elementwise.cpp, ocl_reduce.cpp,
// ocl_gemm.cpp, ocl_movement.cpp, ocl_softmax.cpp, ocl_optim.cpp).
FLX_DECLARE_BACKEND_CALLS
int reduce_workspace(void*, int dev, const flx_reduce_desc* d, uint64_t* bytes);
int rule_step(void*, int dev, const flx_rule_desc* d, flx_stream s);  // minor 12 (ocl_optim.cpp)

// Canonical descriptors carry dims as int64 arrays; kernels take them as long8.
inline cl_long8 long8_of(const int64_t* v, int n) {
  cl_long8 r{};
  for (int k = 0; k < 8; ++k) r.s[k] = k < n ? v[k] : 0;
  return r;
}

}  // namespace flx_ocl

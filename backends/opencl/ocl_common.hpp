// Shared pieces of the OpenCL backend: the process-wide device table, errors
// that become (status, message) at the ABI boundary, and kernel launches.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

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

struct Kernel {
  std::string name;
  cl_kernel k = nullptr;
  size_t local = 1;  // work-group size used for every launch (fixed: PoCL compiles one variant per size)
};

// One program per dtype, built on first use for one device.
struct Program {
  bool tried = false;
  std::string error;  // the build log when the build failed
  cl_program prog = nullptr;
  std::vector<Kernel> kernels;
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
  std::mutex build_mu;  // program builds (slow: held only while building)
  std::mutex launch_mu;  // clSetKernelArg + enqueue (kernel objects are not thread safe)
  Program programs[kNumDtypes];
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

// Kernels are looked up by name in the dtype's program, building it first.
const Kernel& kernel(Device& d, int dtype, const char* name);
extern const char* const kernel_source;

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
void enqueue(Device& d, cl_command_queue q, const Kernel& k, size_t items);

// Run kernel `name` of dtype's program over `items` work-items (grid-stride
// loops in the kernels cover any count).
template <class... A>
void launch(Device& d, cl_command_queue q, int dtype, const char* name, size_t items, const A&... args) {
  if (items == 0) return;
  const Kernel& k = kernel(d, dtype, name);
  std::lock_guard<std::mutex> lock(d.launch_mu);
  cl_uint i = 0;
  (set_arg(k.k, i++, args, name), ...);
  enqueue(d, q, k, items);
}

// A device buffer released when it goes out of scope. Releasing right after
// enqueueing is safe: OpenCL frees it once the commands using it finish.
struct TempBuffer {
  cl_mem mem = nullptr;
  TempBuffer(Device& d, size_t bytes);
  ~TempBuffer() {
    if (mem) clReleaseMemObject(mem);
  }
  TempBuffer(const TempBuffer&) = delete;
  TempBuffer& operator=(const TempBuffer&) = delete;
};

// ---- ABI entry points implemented across the files ---------------------------
int alloc(void*, int dev, size_t bytes, flx_buffer* out);
void free_buffer(void*, int dev, flx_buffer buf);
void* host_address(void*, int dev, flx_buffer buf);
int host_alloc(void*, size_t bytes, void** out);
void host_free(void*, void* ptr);
int copy_h2d(void*, int dev, flx_mem dst, const void* src, size_t bytes, flx_stream s);
int copy_d2h(void*, int dev, void* dst, flx_mem src, size_t bytes, flx_stream s);
int copy_d2d(void*, int dev, flx_mem dst, flx_mem src, size_t bytes, flx_stream s);
int copy_peer(void*, int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes, flx_stream s);
int fill(void*, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s);

int random(void*, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
           double a, double b, flx_stream s);
int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream s);
int map(void*, int dev, const flx_map_desc* d, flx_stream s);
int reduce(void*, int dev, const flx_reduce_desc* d, flx_stream s);
int gemm(void*, int dev, const flx_gemm_desc* d, flx_stream s);
int gather(void*, int dev, const flx_index_desc* d, flx_stream s);
int scatter_add(void*, int dev, const flx_index_desc* d, flx_stream s);
int permute(void*, int dev, const flx_permute_desc* d, flx_stream s);
int softmax(void*, int dev, const flx_softmax_desc* d, flx_stream s);
int softmax_backward(void*, int dev, const flx_softmax_desc* d, flx_stream s);
int optim_step(void*, int dev, const flx_optim_desc* d, flx_stream s);

}  // namespace flx_ocl

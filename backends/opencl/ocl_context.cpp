// Discovery (every device of every platform, one context per platform, one
// in-order queue per device), errors, device properties, streams and events.
// The tables and the exported entry point are in ocl_entry.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ocl_common.hpp"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif
#ifndef CL_DEVICE_GLOBAL_FREE_MEMORY_AMD
#define CL_DEVICE_GLOBAL_FREE_MEMORY_AMD 0x4039
#endif

namespace flx_ocl {

namespace {
thread_local std::string t_error;
}

int set_error(int status, const std::string& msg) {
  t_error = msg;
  return status;
}
const char* last_error() { return t_error.c_str(); }

const char* cl_error_name(cl_int e) {
  switch (e) {
#define N(x) \
  case x: return #x;
    N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE) N(CL_COMPILER_NOT_AVAILABLE)
    N(CL_MEM_OBJECT_ALLOCATION_FAILURE) N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_MEM_COPY_OVERLAP) N(CL_BUILD_PROGRAM_FAILURE) N(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) N(CL_INVALID_VALUE) N(CL_INVALID_DEVICE_TYPE)
    N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT) N(CL_INVALID_COMMAND_QUEUE)
    N(CL_INVALID_HOST_PTR) N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_BUFFER_SIZE) N(CL_INVALID_PROGRAM)
    N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME) N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX)
    N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE) N(CL_INVALID_KERNEL_ARGS) N(CL_INVALID_WORK_DIMENSION)
    N(CL_INVALID_WORK_GROUP_SIZE) N(CL_INVALID_WORK_ITEM_SIZE) N(CL_INVALID_GLOBAL_OFFSET)
    N(CL_INVALID_EVENT_WAIT_LIST) N(CL_INVALID_EVENT) N(CL_INVALID_OPERATION) N(CL_INVALID_BUILD_OPTIONS)
    N(CL_INVALID_GLOBAL_WORK_SIZE)
#undef N
    case CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "OpenCL error";
}

void check_cl(cl_int err, const std::string& what) {
  if (err == CL_SUCCESS) return;
  bool oom = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY || err == CL_OUT_OF_RESOURCES;
  raise(oom ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
        what + " failed: " + cl_error_name(err) + " (" + std::to_string(err) + ")");
}

namespace {

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}
template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}
std::string platform_name(cl_platform_id p) {
  char buf[256] = {};
  clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof buf - 1, buf, nullptr);
  return buf;
}

// "OpenCL 1.2 pocl ..." -> 102
int parse_version(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor;
}

void discover(State& st) {
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && np == 0)) {
    st.reason = "no OpenCL platform found (install an ICD such as pocl-opencl-icd)";
    return;
  }
  if (err != CL_SUCCESS) {
    st.reason = std::string("clGetPlatformIDs failed: ") + cl_error_name(err);
    return;
  }
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  std::string notes;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> all(nd), ids;
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, all.data(), nullptr);
    for (cl_device_id id : all) {  // OpenCL 1.2 is the floor (fill, markers with wait lists)
      std::string ver = device_string(id, CL_DEVICE_VERSION);
      if (parse_version(ver) >= 102) ids.push_back(id);
      else notes += "; " + device_string(id, CL_DEVICE_NAME) + " skipped (" + ver + ", needs OpenCL 1.2)";
    }
    if (ids.empty()) continue;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, cl_context_properties(p), 0};
    cl_context ctx = clCreateContext(props, cl_uint(ids.size()), ids.data(), nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
      notes += "; " + platform_name(p) + ": clCreateContext failed (" + cl_error_name(err) + ")";
      continue;
    }
    for (cl_device_id id : ids) {
      cl_command_queue q = clCreateCommandQueue(ctx, id, 0, &err);
      if (err != CL_SUCCESS) {
        notes += "; " + device_string(id, CL_DEVICE_NAME) + ": clCreateCommandQueue failed";
        continue;
      }
      auto d = std::make_unique<Device>();
      d->id = id;
      d->platform = p;
      d->ctx = ctx;
      d->queue = q;
      d->name = device_string(id, CL_DEVICE_NAME);
      auto type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
      d->kind = (type & CL_DEVICE_TYPE_GPU)           ? FLX_DEVICE_GPU
                : (type & CL_DEVICE_TYPE_ACCELERATOR) ? FLX_DEVICE_ACCELERATOR
                : (type & CL_DEVICE_TYPE_CPU)         ? FLX_DEVICE_CPU
                                                      : FLX_DEVICE_ACCELERATOR;
      d->total_mem = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      d->max_alloc = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d->fp64 = device_value<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
      d->exact_divsqrt =
          (device_value<cl_device_fp_config>(id, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      d->amd_free_mem = device_string(id, CL_DEVICE_EXTENSIONS).find("cl_amd_device_attribute_query") != std::string::npos;
      d->compute_units = std::max<cl_uint>(1, device_value<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
      d->max_wg = std::max<size_t>(1, device_value<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE));
      st.devices.push_back(std::move(d));
    }
  }
  if (st.devices.empty()) st.reason = "no OpenCL devices" + notes;
}

}  // namespace

State& state() {
  static State* s = [] {
    auto* st = new State;  // leaked on purpose: released by the OS, not at static destruction
    try {
      discover(*st);
    } catch (const std::exception& e) {
      st->devices.clear();
      st->reason = std::string("OpenCL discovery failed: ") + e.what();
    }
    return st;
  }();
  return *s;
}

Device& device(int dev) {
  State& st = state();
  if (dev < 0 || dev >= int(st.devices.size()))
    raise(FLX_ERR_INVALID_ARGUMENT, "no OpenCL device " + std::to_string(dev) + " (this machine has " +
                                        std::to_string(st.devices.size()) + ")");
  return *st.devices[size_t(dev)];
}

namespace {
void copy_reason(const std::string& r, char* out, size_t cap) {
  if (!out || !cap) return;
  size_t n = std::min(cap - 1, r.size());
  std::memcpy(out, r.data(), n);
  out[n] = '\0';
}
}  // namespace

int functional(void*, char* reason, size_t cap) {
  try {
    State& st = state();
    copy_reason(st.devices.empty() ? st.reason : std::string(), reason, cap);
    return st.devices.empty() ? 0 : 1;
  } catch (...) {
    copy_reason("OpenCL discovery failed", reason, cap);
    return 0;
  }
}
int device_count(void*) {
  try {
    return int(state().devices.size());
  } catch (...) {
    return 0;
  }
}
int device_props(void*, int dev, flx_device_props* out) {
  return guard("device_props", [&] {
    Device& d = device(dev);
    std::memset(out, 0, sizeof *out);
    copy_reason(d.name, out->name, sizeof out->name);
    out->kind = d.kind;
    out->total_memory = d.total_mem;
    if (d.amd_free_mem) {  // AMD reports free memory in KiB
      cl_ulong kib[2] = {0, 0};
      if (clGetDeviceInfo(d.id, CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, sizeof kib, kib, nullptr) == CL_SUCCESS)
        out->free_memory = uint64_t(kib[0]) * 1024;
    }
  });
}
const char* last_error(void*) { return last_error(); }

// ---- streams: extra in-order queues; NULL is the device's default queue ----
int stream_create(void*, int dev, flx_stream* out) {
  return guard("stream_create", [&] {
    Device& d = device(dev);
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(d.ctx, d.id, 0, &err);
    check_cl(err, "clCreateCommandQueue");
    *out = reinterpret_cast<flx_stream>(q);
  });
}
void stream_destroy(void*, int, flx_stream s) {
  if (!s) return;
  auto q = reinterpret_cast<cl_command_queue>(s);
  clFinish(q);
  clReleaseCommandQueue(q);
}
int stream_synchronize(void*, int dev, flx_stream s) {
  return guard("stream_synchronize", [&] { check_cl(clFinish(queue_of(device(dev), s)), "clFinish"); });
}

// ---- events: a marker's cl_event, replaced at each record --------------------
namespace {
struct Event {
  cl_event ev = nullptr;
  cl_context ctx = nullptr;
};
}  // namespace
int event_create(void*, int dev, flx_event* out) {
  return guard("event_create", [&] {
    device(dev);
    *out = reinterpret_cast<flx_event>(new Event);
  });
}
void event_destroy(void*, int, flx_event e) {
  auto* ev = reinterpret_cast<Event*>(e);
  if (!ev) return;
  if (ev->ev) clReleaseEvent(ev->ev);
  delete ev;
}
int event_record(void*, int dev, flx_event e, flx_stream s) {
  return guard("event_record", [&] {
    Device& d = device(dev);
    auto* ev = reinterpret_cast<Event*>(e);
    if (!ev) raise(FLX_ERR_INVALID_ARGUMENT, "NULL event");
    cl_command_queue q = queue_of(d, s);
    cl_event marker = nullptr;
    check_cl(clEnqueueMarkerWithWaitList(q, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
    clFlush(q);  // another queue may wait on it
    if (ev->ev) clReleaseEvent(ev->ev);
    ev->ev = marker;
    ev->ctx = d.ctx;
  });
}
int stream_wait_event(void*, int dev, flx_stream s, flx_event e) {
  return guard("stream_wait_event", [&] {
    Device& d = device(dev);
    auto* ev = reinterpret_cast<Event*>(e);
    if (!ev || !ev->ev) return;  // never recorded: nothing to wait for
    if (ev->ctx == d.ctx)
      check_cl(clEnqueueBarrierWithWaitList(queue_of(d, s), 1, &ev->ev, nullptr), "clEnqueueBarrierWithWaitList");
    else  // an event of another platform can't enter this queue: wait on the host
      check_cl(clWaitForEvents(1, &ev->ev), "clWaitForEvents");
  });
}
int event_synchronize(void*, int dev, flx_event e) {
  return guard("event_synchronize", [&] {
    device(dev);
    auto* ev = reinterpret_cast<Event*>(e);
    if (ev && ev->ev) check_cl(clWaitForEvents(1, &ev->ev), "clWaitForEvents");
  });
}

}  // namespace flx_ocl

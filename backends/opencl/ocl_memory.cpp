// Memory: device buffers (a flx_buffer is the cl_mem), pinned host memory
// (a mapped CL_MEM_ALLOC_HOST_PTR buffer), copies honouring byte offsets, and
// fill. Copies from or to pageable host memory complete before returning (the
// caller may reuse the memory at once); with pinned memory they are
// asynchronous on the stream, as the ABI says.
//
// alloc and free are stream-ordered in the ABI. Here a buffer is never
// reused: alloc creates a cl_mem, free drops the reference, and OpenCL
// deletes the object only once the commands already enqueued on it (on any
// queue) have finished. So free needs no synchronisation and the stream is
// not needed for ordering; both still check the device.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {
namespace {

struct Pinned {
  size_t bytes = 0;
  cl_mem mem = nullptr;  // NULL: plain aligned host memory (no device to pin with)
  cl_command_queue queue = nullptr;
};
std::mutex g_pinned_mu;
std::map<const char*, Pinned>& pinned_blocks() {
  static auto* m = new std::map<const char*, Pinned>;  // leaked with the device table
  return *m;
}

// Is [p, p + bytes) inside one pinned block?
bool is_pinned(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(g_pinned_mu);
  auto& m = pinned_blocks();
  auto it = m.upper_bound(c);
  if (it == m.begin()) return false;
  --it;
  return it->second.mem && c >= it->first && c + bytes <= it->first + it->second.bytes;
}

}  // namespace

void check_range(Device& d, flx_mem m, size_t bytes, const char* what) {
  if (!m.buf) raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  size_t size = 0;
  check_cl(clGetMemObjectInfo(as_mem(m), CL_MEM_SIZE, sizeof size, &size, nullptr), "clGetMemObjectInfo");
  if (m.offset > size || bytes > size - m.offset)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(bytes) + " bytes at offset " +
                                        std::to_string(m.offset) + " run past the buffer's " + std::to_string(size) +
                                        " bytes");
  cl_context ctx = nullptr;
  clGetMemObjectInfo(as_mem(m), CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr);
  if (ctx != d.ctx)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the buffer belongs to another OpenCL platform than " + d.name);
}

int alloc(void*, int dev, size_t bytes, flx_stream, flx_buffer* out) {
  return guard("alloc", [&] {
    Device& d = device(dev);
    if (d.max_alloc && bytes > d.max_alloc)
      raise(FLX_ERR_OUT_OF_MEMORY, std::to_string(bytes) + " bytes is more than " + d.name +
                                       " allows in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE = " +
                                       std::to_string(d.max_alloc) + ")");
    cl_int err;
    cl_mem m = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1), nullptr, &err);
    check_cl(err, "clCreateBuffer(" + std::to_string(bytes) + " bytes)");
    *out = reinterpret_cast<flx_buffer>(m);
  });
}

// Safe while kernels or copies using buf are still enqueued (see the top).
void free(void*, int, flx_buffer buf, flx_stream) {
  if (buf) clReleaseMemObject(as_mem(buf));
}

void* host_address(void*, int, flx_buffer) { return nullptr; }

int host_alloc(void*, size_t bytes, void** out) {
  return guard("host_alloc", [&] {
    size_t n = std::max<size_t>(bytes, 1);
    Pinned p;
    p.bytes = n;
    void* ptr = nullptr;
    State& st = state();
    if (!st.devices.empty()) {
      Device& d = *st.devices[0];
      cl_int err;
      cl_mem m = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, n, nullptr, &err);
      if (err == CL_SUCCESS) {
        ptr = clEnqueueMapBuffer(d.queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, nullptr, nullptr, &err);
        if (err == CL_SUCCESS && ptr) {
          p.mem = m;
          p.queue = d.queue;
        } else {
          clReleaseMemObject(m);
          ptr = nullptr;
        }
      }
    }
    if (!ptr) {  // fall back to ordinary aligned memory
      ptr = std::aligned_alloc(64, (n + 63) / 64 * 64);
      if (!ptr) raise(FLX_ERR_OUT_OF_MEMORY, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    }
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    pinned_blocks()[static_cast<const char*>(ptr)] = p;
    *out = ptr;
  });
}

void host_free(void*, void* ptr) {
  if (!ptr) return;
  Pinned p;
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    auto& m = pinned_blocks();
    auto it = m.find(static_cast<const char*>(ptr));
    if (it == m.end()) return;  // not ours
    p = it->second;
    m.erase(it);
  }
  if (p.mem) {
    clEnqueueUnmapMemObject(p.queue, p.mem, ptr, 0, nullptr, nullptr);
    clFinish(p.queue);
    clReleaseMemObject(p.mem);
  } else {
    std::free(ptr);
  }
}

int copy_h2d(void*, int dev, flx_mem dst, const void* src, size_t bytes, flx_stream s) {
  return guard("copy_h2d", [&] {
    if (!bytes) return;
    if (!src) raise(FLX_ERR_INVALID_ARGUMENT, "the host source is a null pointer");
    Device& d = device(dev);
    check_range(d, dst, bytes, "copy_h2d");
    cl_bool blocking = is_pinned(src, bytes) ? CL_FALSE : CL_TRUE;
    check_cl(clEnqueueWriteBuffer(queue_of(d, s), as_mem(dst), blocking, dst.offset, bytes, src, 0, nullptr, nullptr),
             "clEnqueueWriteBuffer");
  });
}

int copy_d2h(void*, int dev, void* dst, flx_mem src, size_t bytes, flx_stream s) {
  return guard("copy_d2h", [&] {
    if (!bytes) return;
    if (!dst) raise(FLX_ERR_INVALID_ARGUMENT, "the host destination is a null pointer");
    Device& d = device(dev);
    check_range(d, src, bytes, "copy_d2h");
    cl_bool blocking = is_pinned(dst, bytes) ? CL_FALSE : CL_TRUE;
    check_cl(clEnqueueReadBuffer(queue_of(d, s), as_mem(src), blocking, src.offset, bytes, dst, 0, nullptr, nullptr),
             "clEnqueueReadBuffer");
  });
}

namespace {
// dst <- src within one context on queue q, after the events in `wait`;
// *done (when given) gets the event of the last command.
void copy_buffer(Device& d, cl_command_queue q, flx_mem dst, flx_mem src, size_t bytes, cl_uint nwait,
                 const cl_event* wait, cl_event* done = nullptr) {
  bool overlap = dst.buf == src.buf && dst.offset < src.offset + bytes && src.offset < dst.offset + bytes;
  if (dst.buf == src.buf && dst.offset == src.offset) {
    if (done) check_cl(clEnqueueMarkerWithWaitList(q, nwait, wait, done), "clEnqueueMarkerWithWaitList");
    return;
  }
  if (!overlap) {
    check_cl(clEnqueueCopyBuffer(q, as_mem(src), as_mem(dst), src.offset, dst.offset, bytes, nwait, wait, done),
             "clEnqueueCopyBuffer");
    return;
  }
  // memmove semantics: through a temporary buffer
  TempBuffer tmp(d, bytes);
  check_cl(clEnqueueCopyBuffer(q, as_mem(src), tmp.mem, src.offset, 0, bytes, nwait, wait, nullptr),
           "clEnqueueCopyBuffer");
  check_cl(clEnqueueCopyBuffer(q, tmp.mem, as_mem(dst), 0, dst.offset, bytes, 0, nullptr, done),
           "clEnqueueCopyBuffer");
}

// A cl_event released at the end of the scope.
struct EventRef {
  cl_event e = nullptr;
  ~EventRef() {
    if (e) clReleaseEvent(e);
  }
};
}  // namespace

int copy_d2d(void*, int dev, flx_mem dst, flx_mem src, size_t bytes, flx_stream s) {
  return guard("copy_d2d", [&] {
    if (!bytes) return;
    Device& d = device(dev);
    check_range(d, dst, bytes, "copy_d2d");
    check_range(d, src, bytes, "copy_d2d");
    copy_buffer(d, queue_of(d, s), dst, src, bytes, 0, nullptr);
  });
}

// Between devices, on s: a stream of the source device, as libflx's
// dispatch layer passes it (NULL: the source's default queue). Within one
// platform the buffers share a context, so s copies directly, once the
// destination's default queue has reached this point (a marker); then the
// destination's default queue waits for the copy (a barrier), so that work
// on either device stays ordered with it without blocking the host. Across
// platforms the bytes go through host memory and the call blocks.
int copy_peer(void*, int dst_dev, flx_mem dst, int src_dev, flx_mem src, size_t bytes, flx_stream s) {
  return guard("copy_peer", [&] {
    if (!bytes) return;
    Device& dd = device(dst_dev);
    Device& sd = device(src_dev);
    check_range(dd, dst, bytes, "copy_peer");
    check_range(sd, src, bytes, "copy_peer");
    cl_command_queue q = queue_of(sd, s);
    if (&dd == &sd) {
      copy_buffer(sd, q, dst, src, bytes, 0, nullptr);
    } else if (dd.ctx == sd.ctx) {
      EventRef ready, done;
      check_cl(clEnqueueMarkerWithWaitList(dd.queue, 0, nullptr, &ready.e), "clEnqueueMarkerWithWaitList");
      clFlush(dd.queue);
      copy_buffer(sd, q, dst, src, bytes, 1, &ready.e, &done.e);
      clFlush(q);
      check_cl(clEnqueueBarrierWithWaitList(dd.queue, 1, &done.e, nullptr), "clEnqueueBarrierWithWaitList");
    } else {
      constexpr size_t chunk = size_t(64) << 20;
      std::vector<char> staging(std::min(bytes, chunk));
      for (size_t done = 0; done < bytes; done += staging.size()) {
        size_t n = std::min(staging.size(), bytes - done);
        check_cl(clEnqueueReadBuffer(q, as_mem(src), CL_TRUE, src.offset + done, n, staging.data(), 0, nullptr,
                                     nullptr),
                 "clEnqueueReadBuffer");
        check_cl(clEnqueueWriteBuffer(dd.queue, as_mem(dst), CL_TRUE, dst.offset + done, n, staging.data(), 0,
                                      nullptr, nullptr),
                 "clEnqueueWriteBuffer");
      }
    }
  });
}

int fill(void*, int dev, flx_mem dst, int32_t dtype, size_t n, double value, flx_stream s) {
  return guard("fill", [&] {
    require_dtype(dtype, "fill");
    if (!n) return;
    Device& d = device(dev);
    size_t es = dtype_size(dtype);
    elem_offset(dst, es, "fill");
    check_range(d, dst, n * es, "fill");
    Scalar pattern = storage_bytes(dtype, value);
    check_cl(clEnqueueFillBuffer(queue_of(d, s), as_mem(dst), pattern.bytes, pattern.size, dst.offset, n * es, 0,
                                 nullptr, nullptr),
             "clEnqueueFillBuffer");
  });
}

}  // namespace flx_ocl

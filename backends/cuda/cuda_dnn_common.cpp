// The dnn table's shared pieces (cuda_dnn_common.hpp).
#include "cuda_dnn_common.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "cuda_thread_handles.hpp"

namespace flx_cuda {
namespace {

// This thread's cuDNN handles, one per (device, stream), bound to their
// stream when made, as the cuBLAS handles are (cuda_stream_handles.hpp):
// a handle is not to be used by two threads at once, and one per stream
// keeps cudnnSetStream out of every call. Destroyed when the thread ends,
// each with its device current, unless the runtime is already gone (a
// thread ending during process exit), where the driver frees everything.
int handle_for(const CudnnApi& api, int dev, cudaStream_t st, cudnnHandle_t* out) {
  thread_local ThreadHandles<CudnnApi, cudnnHandle_t> handles;  // cuda_thread_handles.hpp
  handles.api = &api;
  return handles.hs.get(dev, st, [&](cudnnHandle_t* h) -> int {
    if (cudnnStatus_t e = api.create(h); e != CUDNN_STATUS_SUCCESS) return cudnn_fail(api, e, "cudnnCreate");
    if (cudnnStatus_t e = api.set_stream(*h, st); e != CUDNN_STATUS_SUCCESS) {
      (void)api.destroy(*h);
      return cudnn_fail(api, e, "cudnnSetStream");
    }
    return FLX_OK;
  }, out);
}

}  // namespace

int dnn_begin(int dev, flx_stream s, const char* what, DnnCall* out) {
  if (int e = enter(dev, s, &out->stream, what)) return e;
  if (int e = cudnn_api(&out->api, FLX_ERR_DEVICE, what)) return e;
  return handle_for(*out->api, dev, out->stream, &out->handle);
}

bool cudnn_dtype(int32_t dtype, cudnnDataType_t* out) {
  switch (dtype) {
    case FLX_F32: *out = CUDNN_DATA_FLOAT; return true;
    case FLX_F64: *out = CUDNN_DATA_DOUBLE; return true;
    case FLX_F16: *out = CUDNN_DATA_HALF; return true;
    case FLX_BF16: *out = CUDNN_DATA_BFLOAT16; return true;
  }
  return false;
}

size_t dnn_dtype_bytes(int32_t dtype) {
  return flx::backend_common::dtype_is_float(dtype) ? flx::backend_common::dtype_bytes(dtype) : 0;
}

int set_packed_tensor(const CudnnApi& api, TensorDesc& t, cudnnDataType_t type, const std::vector<int>& dims,
                      const char* what) {
  if (int e = t.create(api, "cudnnCreateTensorDescriptor")) return e;
  std::vector<int> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = int(s);  // the caller checked that the element count fits an int
    s *= dims[i];
  }
  if (cudnnStatus_t e = api.set_tensor_nd(t.get(), type, int(dims.size()), dims.data(), strides.data());
      e != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, e, std::string("cudnnSetTensorNdDescriptor (") + what + ")");
  return FLX_OK;
}

std::vector<int> cudnn_spatial(const int64_t* v, int nspatial, int fill) {
  const int n = nspatial < 2 ? 2 : nspatial;
  std::vector<int> r(size_t(n), fill);
  for (int j = 0; j < n; ++j) {
    const int i = n - 1 - j;  // cuDNN's j-th spatial dim is the ABI's dim n-1-j
    if (i < nspatial) r[size_t(j)] = int(v[i]);
  }
  return r;
}

DnnBox dnn_box(const int64_t* size, int nspatial, int64_t nc) {
  DnnBox b{{1, 1, 1}, nc};
  for (int i = 0; i < nspatial && i < 3; ++i) b.size[i] = size[i];
  return b;
}

int cudnn_fail_for(const CudnnApi& api, cudnnStatus_t s, const std::string& what, int32_t dtype) {
  const bool refused = s >= CUDNN_STATUS_NOT_SUPPORTED && s <= CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  if (refused && (dtype == FLX_F16 || dtype == FLX_BF16)) {
    (void)cudnn_fail(api, s, what);  // cuDNN's own words first
    return fail(FLX_ERR_UNSUPPORTED, std::string(last_error(nullptr)) + "; this cuDNN does not run it for " +
                                         dtype_name(dtype) + " data: use Float32");
  }
  return cudnn_fail(api, s, what);
}

int dnn_invalid(const char* what, const std::string& field, int64_t value, const std::string& why) {
  return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": " + field + " = " + std::to_string(value) + ": " + why);
}

int dnn_operand(int dev, flx_mem m, int64_t n, size_t elem_bytes, const char* what, const char* name) {
  const std::string w = std::string(what) + ": " + name;
  if (n == 0) return FLX_OK;  // an empty operand may have no buffer
  if (!m.buf)
    return fail(FLX_ERR_INVALID_ARGUMENT, w + " is not set (a NULL buffer); the call needs " + std::to_string(n) +
                                              " elements there");
  return check_elements(dev, m, size_t(n), elem_bytes, w.c_str());
}

int dnn_constant_buffer(int dev, int32_t param_dtype, int64_t count, DnnConstant kind, void** out) {
  static std::mutex mu;
  static std::map<std::tuple<int, int32_t, int, int64_t>, void*> buffers;  // never freed: a few per process
  const auto key = std::make_tuple(dev, param_dtype, int(kind), count);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = buffers.find(key); it != buffers.end()) {
    *out = it->second;
    return FLX_OK;
  }
  const size_t eb = param_dtype == FLX_F64 ? 8 : 4;
  void* p = nullptr;
  if (int e = check(cudaMalloc(&p, size_t(count) * eb + 1), "cudaMalloc (batchnorm's constant parameters)")) return e;
  std::vector<unsigned char> host(size_t(count) * eb, 0);
  if (kind == DnnConstant::ONES)
    for (int64_t i = 0; i < count; ++i) {
      if (eb == 8) {
        const double one = 1.0;
        std::memcpy(&host[size_t(i) * 8], &one, 8);
      } else {
        const float one = 1.0f;
        std::memcpy(&host[size_t(i) * 4], &one, 4);
      }
    }
  // A copy from pageable memory may return before its DMA has landed, and
  // the buffer is then read by kernels on the plugin's non-blocking
  // streams, which do not wait for the legacy stream: so the legacy stream
  // is waited for before the buffer is handed out (once per key).
  int e = check(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice),
                "cudaMemcpy (batchnorm's constant parameters)");
  if (!e) e = check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (batchnorm's constant parameters)");
  if (e) {
    (void)cudaFree(p);
    return e;
  }
  buffers.emplace(key, p);
  *out = p;
  return FLX_OK;
}

}  // namespace flx_cuda

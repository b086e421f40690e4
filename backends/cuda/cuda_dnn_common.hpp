// Shared pieces of the dnn table (cuda_dnn_conv.cpp, cuda_dnn_pool_bn.cpp):
// the cuDNN handle of a call, descriptors that free themselves, the dtype
// map, the blend scalars and the shape checks.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_common/dtype_info.hpp"
#include "cuda_common.hpp"
#include "cuda_dnn_kernels.hpp"
#include "cuda_dnn_lib.hpp"

namespace flx_cuda {

// What a dnn call runs with: cuDNN, this thread's handle for (device,
// stream), bound to the stream, and the stream.
struct DnnCall {
  const CudnnApi* api = nullptr;
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
};
// Enter dev (cuda_common.hpp's enter(): "no CUDA device" and the like come
// from there, before cuDNN is opened), open cuDNN on first use, and get the
// handle. An flx_status with last_error() set.
int dnn_begin(int dev, flx_stream s, const char* what, DnnCall* out);

// flx_dtype -> cudnnDataType_t for the floating dtypes; false for others.
bool cudnn_dtype(int32_t dtype, cudnnDataType_t* out);
size_t dnn_dtype_bytes(int32_t dtype);  // 0 for an unknown or non-floating dtype
using flx::backend_common::dtype_name;  // "Float32", ... (the list of element types)

// alpha = 1 and beta = 0 (or 1) as cuDNN reads them: double for double
// tensors, float for every other (cuDNN's rule for its blend factors).
struct Blend {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  const void* one(int32_t dtype) const { return dtype == FLX_F64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(int32_t dtype) const { return dtype == FLX_F64 ? static_cast<const void*>(&d0) : &f0; }
};

// cuDNN descriptors owned by a C++ object (destroyed with it, the destroy
// call's status ignored: nothing can be done about it in a destructor).
template <class D, auto Create, auto Destroy>
class CudnnDesc {
 public:
  CudnnDesc() = default;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  ~CudnnDesc() {
    if (d_) (void)(api_->*Destroy)(d_);
  }
  int create(const CudnnApi& api, const char* what) {
    api_ = &api;
    if (cudnnStatus_t s = (api.*Create)(&d_); s != CUDNN_STATUS_SUCCESS) {
      d_ = nullptr;
      return cudnn_fail(api, s, what);
    }
    return FLX_OK;
  }
  D get() const { return d_; }

 private:
  const CudnnApi* api_ = nullptr;
  D d_ = nullptr;
};
using TensorDesc = CudnnDesc<cudnnTensorDescriptor_t, &CudnnApi::create_tensor, &CudnnApi::destroy_tensor>;
using FilterDesc = CudnnDesc<cudnnFilterDescriptor_t, &CudnnApi::create_filter, &CudnnApi::destroy_filter>;
using ConvDesc = CudnnDesc<cudnnConvolutionDescriptor_t, &CudnnApi::create_conv, &CudnnApi::destroy_conv>;
using PoolDesc = CudnnDesc<cudnnPoolingDescriptor_t, &CudnnApi::create_pool, &CudnnApi::destroy_pool>;

// A packed NCHW / NCDHW tensor descriptor of dims (N, C, spatial...),
// cuDNN's order (the slowest first), strides computed.
int set_packed_tensor(const CudnnApi& api, TensorDesc& t, cudnnDataType_t type, const std::vector<int>& dims,
                      const char* what);

// The ABI's spatial values (dim 0 = W first, nspatial of them) in cuDNN's
// order (the slowest first) for a cuDNN tensor of max(nspatial, 2) spatial
// dims: 1-D runs as 2-D with an H of size 1 (`fill` for the missing dim:
// 1 for sizes, strides and dilations, 0 for padding).
std::vector<int> cudnn_spatial(const int64_t* v, int nspatial, int fill);

// The ABI's spatial extents as a box (unused dims 1), and its nc.
DnnBox dnn_box(const int64_t* size, int nspatial, int64_t nc);

// cudnn_fail for a launch of dtype data: cuDNN refusing Float16 or
// BFloat16 data (CUDNN_STATUS_NOT_SUPPORTED*, nothing queued) is
// FLX_ERR_UNSUPPORTED, as the table asks for an optional dtype a backend
// lacks, so libflx reports NotImplemented; anything else as cudnn_fail.
int cudnn_fail_for(const CudnnApi& api, cudnnStatus_t s, const std::string& what, int32_t dtype);

// Whether v fits cuDNN's int.
inline bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// A "<what>: <field> = <value>: <why>" FLX_ERR_INVALID_ARGUMENT.
int dnn_invalid(const char* what, const std::string& field, int64_t value, const std::string& why);

// Memory of a dnn call's operand: n elements of elem_bytes at m, on device
// dev; a NULL buf is refused ("<what>: <name> is not set") unless n is 0.
int dnn_operand(int dev, flx_mem m, int64_t n, size_t elem_bytes, const char* what, const char* name);

// Device buffers of `count` elements of param dtype, kept per device,
// dtype, kind and size for the life of the process (a few: one per
// BatchNorm width): kind ONES and ZEROS hold 1 and 0, the scale and bias
// cuDNN's batch norm needs when the layer has none; kind SINK takes the
// gradients of scale and bias the caller does not want (written by any
// stream, never read). Allocated synchronously once (cudaMalloc, a copy),
// with dev current.
enum class DnnConstant { ONES, ZEROS, SINK };
int dnn_constant_buffer(int dev, int32_t param_dtype, int64_t count, DnnConstant kind, void** out);

// Bytes rounded up to 256, the alignment cuDNN's workspaces and the padded
// copies keep.
inline uint64_t dnn_align(uint64_t b) { return (b + 255) / 256 * 256; }

}  // namespace flx_cuda

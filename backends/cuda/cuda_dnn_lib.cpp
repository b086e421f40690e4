// Opens cuDNN on first use (see cuda_dnn_lib.hpp), as cuda_nccl_lib.cpp
// opens NCCL.
#include "cuda_dnn_lib.hpp"

#include <cuda_runtime_api.h>

#include "backend_common/vendor_library.hpp"
#include "cuda_common.hpp"

#define FLX_CUDA_STR2(x) #x
#define FLX_CUDA_STR(x) FLX_CUDA_STR2(x)

namespace flx_cuda {
namespace {

constexpr const char* kSoname = "libcudnn.so." FLX_CUDA_STR(CUDNN_MAJOR);
// What to do when cuDNN cannot be used; the wheel's name carries the CUDA
// major version the plugin was built for.
const std::string& fix() {
  static const std::string f = "install cuDNN " FLX_CUDA_STR(CUDNN_MAJOR) ".x for CUDA " +
                               std::to_string(CUDART_VERSION / 1000) + " (pip install nvidia-cudnn-cu" +
                               std::to_string(CUDART_VERSION / 1000) +
                               ", or NVIDIA's libcudnn" FLX_CUDA_STR(CUDNN_MAJOR) "-cuda-" +
                               std::to_string(CUDART_VERSION / 1000) + " package), or put the directory holding " +
                               kSoname + " (and its libcudnn_*.so." FLX_CUDA_STR(CUDNN_MAJOR) " sub-libraries) on LD_LIBRARY_PATH";
  return f;
}

using flx::vendor::LoadedApi;
using flx::vendor::VendorLibrary;

const LoadedApi<CudnnApi>& loaded_cudnn() {
  return flx::vendor::load_once<CudnnApi>(
      [] {
        const std::string runtime_dir =
            flx::vendor::directory_of(reinterpret_cast<const void*>(&cudaGetDeviceCount));
        return flx::vendor::open_vendor_library("cuDNN", cudnn_candidates(runtime_dir), fix().c_str());
      },
      [](VendorLibrary& lib, CudnnApi& a) {
        lib.resolve("cudnnGetVersion", a.get_version);
        lib.resolve("cudnnGetErrorString", a.error_string);
        lib.resolve("cudnnGetLastErrorString", a.last_error_string);
        lib.resolve("cudnnCreate", a.create);
        lib.resolve("cudnnDestroy", a.destroy);
        lib.resolve("cudnnSetStream", a.set_stream);
        lib.resolve("cudnnCreateTensorDescriptor", a.create_tensor);
        lib.resolve("cudnnSetTensorNdDescriptor", a.set_tensor_nd);
        lib.resolve("cudnnDestroyTensorDescriptor", a.destroy_tensor);
        lib.resolve("cudnnCreateFilterDescriptor", a.create_filter);
        lib.resolve("cudnnSetFilterNdDescriptor", a.set_filter_nd);
        lib.resolve("cudnnDestroyFilterDescriptor", a.destroy_filter);
        lib.resolve("cudnnCreateConvolutionDescriptor", a.create_conv);
        lib.resolve("cudnnSetConvolutionNdDescriptor", a.set_conv_nd);
        lib.resolve("cudnnSetConvolutionGroupCount", a.set_conv_groups);
        lib.resolve("cudnnSetConvolutionMathType", a.set_conv_math);
        lib.resolve("cudnnDestroyConvolutionDescriptor", a.destroy_conv);
        lib.resolve("cudnnGetConvolutionNdForwardOutputDim", a.conv_output_dim);
        lib.resolve("cudnnGetConvolutionForwardAlgorithmMaxCount", a.fwd_algo_count);
        lib.resolve("cudnnGetConvolutionForwardAlgorithm_v7", a.fwd_algos);
        lib.resolve("cudnnGetConvolutionForwardWorkspaceSize", a.fwd_workspace);
        lib.resolve("cudnnConvolutionForward", a.conv_forward);
        lib.resolve("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", a.bwd_data_algo_count);
        lib.resolve("cudnnGetConvolutionBackwardDataAlgorithm_v7", a.bwd_data_algos);
        lib.resolve("cudnnGetConvolutionBackwardDataWorkspaceSize", a.bwd_data_workspace);
        lib.resolve("cudnnConvolutionBackwardData", a.conv_backward_data);
        lib.resolve("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", a.bwd_filter_algo_count);
        lib.resolve("cudnnGetConvolutionBackwardFilterAlgorithm_v7", a.bwd_filter_algos);
        lib.resolve("cudnnGetConvolutionBackwardFilterWorkspaceSize", a.bwd_filter_workspace);
        lib.resolve("cudnnConvolutionBackwardFilter", a.conv_backward_filter);
        lib.resolve("cudnnConvolutionBackwardBias", a.conv_backward_bias);
        lib.resolve("cudnnAddTensor", a.add_tensor);
        lib.resolve("cudnnCreatePoolingDescriptor", a.create_pool);
        lib.resolve("cudnnSetPoolingNdDescriptor", a.set_pool_nd);
        lib.resolve("cudnnDestroyPoolingDescriptor", a.destroy_pool);
        lib.resolve("cudnnGetPoolingNdForwardOutputDim", a.pool_output_dim);
        lib.resolve("cudnnPoolingForward", a.pool_forward);
        lib.resolve("cudnnPoolingBackward", a.pool_backward);
        lib.resolve("cudnnDeriveBNTensorDescriptor", a.derive_bn);
        lib.resolve("cudnnBatchNormalizationForwardTraining", a.bn_forward_training);
        lib.resolve("cudnnBatchNormalizationForwardInference", a.bn_forward_inference);
        lib.resolve("cudnnBatchNormalizationBackward", a.bn_backward);
        lib.resolve("cudnnCreateDropoutDescriptor", a.create_dropout);
        lib.resolve("cudnnSetDropoutDescriptor", a.set_dropout);
        lib.resolve("cudnnDestroyDropoutDescriptor", a.destroy_dropout);
        lib.resolve("cudnnCreateRNNDescriptor", a.create_rnn);
        lib.resolve("cudnnSetRNNDescriptor_v8", a.set_rnn);
        lib.resolve("cudnnDestroyRNNDescriptor", a.destroy_rnn);
        lib.resolve("cudnnCreateRNNDataDescriptor", a.create_rnn_data);
        lib.resolve("cudnnSetRNNDataDescriptor", a.set_rnn_data);
        lib.resolve("cudnnDestroyRNNDataDescriptor", a.destroy_rnn_data);
        lib.resolve("cudnnGetRNNWeightSpaceSize", a.rnn_weight_space);
        lib.resolve("cudnnGetRNNTempSpaceSizes", a.rnn_temp_space);
        lib.resolve("cudnnGetRNNWeightParams", a.rnn_weight_params);
        lib.resolve("cudnnRNNForward", a.rnn_forward);
        lib.resolve("cudnnRNNBackwardData_v8", a.rnn_backward_data);
        lib.resolve("cudnnRNNBackwardWeights_v8", a.rnn_backward_weights);
        // cudnnGetVersion needs no GPU. An 8.x found first by the soname
        // search cannot happen (its soname is libcudnn.so.8), but a 9.x
        // older than the headers can: refused only below 9.0, whose API
        // every call here has.
        if (lib.ok() && (a.version = a.get_version()) < kMinCudnnVersion)
          lib.error = "cuDNN " + cudnn_version_string(a.version) + " was loaded, but flx needs 9.0 or later\nTo fix: " +
                      fix();
      });
}

}  // namespace

std::vector<std::string> cudnn_candidates(const std::string& runtime_dir) {
  std::vector<std::string> c{kSoname};
  if (!runtime_dir.empty()) {
    c.push_back(runtime_dir + "/" + kSoname);
    c.push_back(runtime_dir + "/../../cudnn/lib/" + kSoname);
  }
  return c;
}

std::string cudnn_version_string(size_t code) {
  // CUDNN_VERSION: major * 10000 + minor * 100 + patch since 9.0.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

int cudnn_api(const CudnnApi** out, int status, const char* what) {
  const LoadedApi<CudnnApi>& l = loaded_cudnn();
  if (!l.error.empty()) return fail(status, std::string(what) + ": " + l.error);
  *out = &l.api;
  return FLX_OK;
}

int cudnn_fail(const CudnnApi& api, cudnnStatus_t s, const std::string& what) {
  std::string msg = what + " failed: " + api.error_string(s);
  char last[512] = {};
  api.last_error_string(last, sizeof last);  // cuDNN's detail for this thread's last error, if any
  if (last[0]) msg += std::string(" (") + last + ")";
  return fail(s == CUDNN_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE, msg);
}

}  // namespace flx_cuda

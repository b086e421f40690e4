// cuDNN 9, opened by the first call of the dnn table that needs it, not
// linked, as cuBLAS (cuda_blas_libs.cpp) and NCCL (cuda_nccl_lib.cpp) are:
// probing the plugin maps no cuDNN, and a process that never convolves
// never pays its several hundred MB. libcudnn.so.9 is cuDNN 9's shim: it
// exports the whole legacy and graph API and loads the sub-libraries
// (libcudnn_graph, _ops, _cnn, _engines_*) from its own directory when a
// call first needs them, so the shim alone is opened and resolved here.
// The entry points keep the types of the cudnn.h the plugin was built with.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <string>
#include <vector>

// The dnn table runs on cuDNN's legacy API (cuda_dnn.cpp says why), which
// cuDNN 9 marks deprecated but still ships in full; its types and
// functions are used on purpose, so their warnings are silenced for the
// files that include this header.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace flx_cuda {

struct CudnnApi {
  decltype(&cudnnGetVersion) get_version;
  decltype(&cudnnGetErrorString) error_string;
  decltype(&cudnnGetLastErrorString) last_error_string;
  decltype(&cudnnCreate) create;
  decltype(&cudnnDestroy) destroy;
  decltype(&cudnnSetStream) set_stream;
  decltype(&cudnnCreateTensorDescriptor) create_tensor;
  decltype(&cudnnSetTensorNdDescriptor) set_tensor_nd;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor;
  decltype(&cudnnCreateFilterDescriptor) create_filter;
  decltype(&cudnnSetFilterNdDescriptor) set_filter_nd;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv;
  decltype(&cudnnSetConvolutionNdDescriptor) set_conv_nd;
  decltype(&cudnnSetConvolutionGroupCount) set_conv_groups;
  decltype(&cudnnSetConvolutionMathType) set_conv_math;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_conv;
  decltype(&cudnnGetConvolutionNdForwardOutputDim) conv_output_dim;
  decltype(&cudnnGetConvolutionForwardAlgorithmMaxCount) fwd_algo_count;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) fwd_algos;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) fwd_workspace;
  decltype(&cudnnConvolutionForward) conv_forward;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithmMaxCount) bwd_data_algo_count;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) bwd_data_algos;
  decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) bwd_data_workspace;
  decltype(&cudnnConvolutionBackwardData) conv_backward_data;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) bwd_filter_algo_count;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) bwd_filter_algos;
  decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) bwd_filter_workspace;
  decltype(&cudnnConvolutionBackwardFilter) conv_backward_filter;
  decltype(&cudnnConvolutionBackwardBias) conv_backward_bias;
  decltype(&cudnnAddTensor) add_tensor;
  decltype(&cudnnCreatePoolingDescriptor) create_pool;
  decltype(&cudnnSetPoolingNdDescriptor) set_pool_nd;
  decltype(&cudnnDestroyPoolingDescriptor) destroy_pool;
  decltype(&cudnnGetPoolingNdForwardOutputDim) pool_output_dim;
  decltype(&cudnnPoolingForward) pool_forward;
  decltype(&cudnnPoolingBackward) pool_backward;
  decltype(&cudnnDeriveBNTensorDescriptor) derive_bn;
  decltype(&cudnnBatchNormalizationForwardTraining) bn_forward_training;
  decltype(&cudnnBatchNormalizationForwardInference) bn_forward_inference;
  decltype(&cudnnBatchNormalizationBackward) bn_backward;
  decltype(&cudnnCreateDropoutDescriptor) create_dropout;
  decltype(&cudnnSetDropoutDescriptor) set_dropout;
  decltype(&cudnnDestroyDropoutDescriptor) destroy_dropout;
  decltype(&cudnnCreateRNNDescriptor) create_rnn;
  decltype(&cudnnSetRNNDescriptor_v8) set_rnn;
  decltype(&cudnnDestroyRNNDescriptor) destroy_rnn;
  decltype(&cudnnCreateRNNDataDescriptor) create_rnn_data;
  decltype(&cudnnSetRNNDataDescriptor) set_rnn_data;
  decltype(&cudnnDestroyRNNDataDescriptor) destroy_rnn_data;
  decltype(&cudnnGetRNNWeightSpaceSize) rnn_weight_space;
  decltype(&cudnnGetRNNTempSpaceSizes) rnn_temp_space;
  decltype(&cudnnGetRNNWeightParams) rnn_weight_params;
  decltype(&cudnnRNNForward) rnn_forward;
  decltype(&cudnnRNNBackwardData_v8) rnn_backward_data;
  decltype(&cudnnRNNBackwardWeights_v8) rnn_backward_weights;
  size_t version = 0;  // cudnnGetVersion(): 91900 for 9.19.0
};

// The oldest cuDNN the plugin takes: 9.0 (the headers' major; the shim's
// soname is libcudnn.so.9).
inline constexpr size_t kMinCudnnVersion = 90000;

// The library's entry points in *out: FLX_OK, or `status` with last_error()
// saying what `what` needed, every path tried (or the version found) and
// what to do. Loaded once per process (a failure is not retried);
// thread-safe.
int cudnn_api(const CudnnApi** out, int status, const char* what);

// The paths tried, in order: the soname (LD_LIBRARY_PATH, the plugin's
// RUNPATH, the system's), then beside the CUDA runtime the plugin uses (a
// toolkit's lib64), then the lib directory of pip's nvidia-cudnn wheel
// beside that runtime's wheel (nvidia/cu13/lib -> nvidia/cudnn/lib).
std::vector<std::string> cudnn_candidates(const std::string& runtime_dir);

// "9.19.0" from 91900.
std::string cudnn_version_string(size_t code);

// "<what> failed: <cudnnGetErrorString(s)> (<cudnnGetLastErrorString>)" as
// an flx_status: FLX_ERR_OUT_OF_MEMORY for CUDNN_STATUS_ALLOC_FAILED,
// FLX_ERR_DEVICE otherwise (NOT_SUPPORTED too: the table's calls refuse
// what they do not support before reaching cuDNN, so cuDNN refusing a
// validated call is a failure of the library or its installation, e.g. a
// missing sub-library or too old a driver); last_error() set.
int cudnn_fail(const CudnnApi& api, cudnnStatus_t s, const std::string& what);

}  // namespace flx_cuda

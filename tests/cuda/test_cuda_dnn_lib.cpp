// cuDNN opened on first use (backends/cuda/cuda_dnn_lib.cpp), and the CUDA
// plugin's dnn table, without a GPU: before the first request cuDNN is not
// mapped; a request maps libcudnn.so.9 (the shim, which exports the whole
// API), resolves every entry point the table calls with cudnn.h's type and
// checks the version (9 or later). The plugin, loaded as libflx loads it
// and wrapped in flx::detail::Backend, serves the "dnn" table, and with no
// GPU its calls fail with a device error saying so, without opening cuDNN.
// With a GPU, a workspace query goes through cuDNN's heuristics instead
// (the computations are the plugin harness's cases, compared with
// tests/dnn_reference.hpp). The plugin's fail() is replaced here by one
// that keeps the message.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "backend/backend.hpp"
#include "cuda/cuda_dnn_lib.hpp"
#include "flx/backend.h"
#include "vendor_library_test.hpp"

using flx_cuda_test::mapped;

namespace {

// A valid 2-D convolution: x (5, 4, 3 channels, 2), w (2, 3, 3 / 1, 4), y
// (4+1+0-2+1 = 4? see out below), asymmetric padding in dim 0 (SamePad of an
// even kernel), stride 1, no memory set.
flx_conv_desc small_conv() {
  flx_conv_desc d{};
  d.struct_size = sizeof d;
  d.dtype = FLX_F32;
  d.nspatial = 2;
  d.groups = 1;
  d.batch = 2, d.in_channels = 3, d.out_channels = 4;
  const int64_t in[3] = {5, 4, 1}, k[3] = {2, 3, 1}, lo[3] = {0, 1, 0}, hi[3] = {1, 1, 0};
  for (int i = 0; i < 3; ++i) {
    d.in_size[i] = in[i], d.kernel[i] = k[i], d.stride[i] = 1, d.dilation[i] = 1, d.pad_lo[i] = lo[i];
    d.pad_hi[i] = hi[i];
    d.out_size[i] = (in[i] + lo[i] + hi[i] - (k[i] - 1) - 1) / 1 + 1;  // backend.h's rule: 5, 4
  }
  return d;
}

struct Plugin {
  void* handle = nullptr;
  const flx_backend* core = nullptr;
  std::string error;
  Plugin() {
    handle = dlopen(FLX_TEST_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error = std::string("dlopen(" FLX_TEST_PLUGIN_PATH "): ") + dlerror();
      return;
    }
    auto entry = reinterpret_cast<flx_backend_entry_fn>(dlsym(handle, FLX_BACKEND_ENTRY_SYMBOL));
    core = entry ? entry(FLX_BACKEND_ABI_MAJOR, FLX_BACKEND_ABI_MINOR) : nullptr;
    if (!core) error = "the plugin exports no usable " FLX_BACKEND_ENTRY_SYMBOL;
  }
};

}  // namespace

// First: the plugin's table, and (without a GPU) its failures, which must
// not open cuDNN either.
TEST(CudaDnnTable, ServedAndFailsClearlyWithoutAGpu) {
  ASSERT_FALSE(mapped("libcudnn.so")) << "linked, not opened on demand";
  Plugin p;
  ASSERT_TRUE(p.core) << p.error;
  ASSERT_GE(p.core->abi_minor, 5u);
  const auto* t = static_cast<const flx_dnn_table*>(p.core->get_table(p.core->ctx, FLX_TABLE_DNN, FLX_TABLE_DNN_VERSION));
  ASSERT_NE(t, nullptr) << "the CUDA plugin was built with cudnn.h but serves no dnn table";
  EXPECT_EQ(t->struct_size, sizeof(flx_dnn_table));
  EXPECT_EQ(t->version, FLX_TABLE_DNN_VERSION);
  EXPECT_TRUE(FLX_HAS_FN(t, flx_dnn_table, conv_workspace));
  for (const void* f : {(const void*)t->conv_forward, (const void*)t->conv_backward_data,
                        (const void*)t->conv_backward_filter, (const void*)t->pool_forward,
                        (const void*)t->pool_backward, (const void*)t->batchnorm_forward,
                        (const void*)t->batchnorm_backward})
    EXPECT_NE(f, nullptr);
  EXPECT_EQ(t->pool_reserve_size, nullptr) << "pooling keeps no reserve (cuDNN's backward takes x, y and dy)";
  // libflx's view: flx::detail::Backend finds the table.
  const flx::detail::Backend be(flx::BackendId::CUDA, p.core, FLX_TEST_PLUGIN_PATH);
  EXPECT_TRUE(be.has_dnn());

  flx_conv_desc d = small_conv();
  uint64_t bytes = 0;
  if (p.core->device_count(p.core->ctx) > 0) {
    // A GPU: the heuristics answer; the padded copy of x (2*3*6*6 floats) is
    // part of the workspace.
    ASSERT_EQ(t->conv_workspace(p.core->ctx, 0, &d, FLX_CONV_FORWARD, &bytes), FLX_OK)
        << p.core->last_error(p.core->ctx);
    EXPECT_GE(bytes, uint64_t(2 * 3 * 6 * 6 * 4));
    EXPECT_TRUE(mapped("libcudnn.so"));
    GTEST_SKIP() << "a CUDA device is present: the dnn table's computations are the plugin harness's cases";
  }
  EXPECT_EQ(t->conv_workspace(p.core->ctx, 0, &d, FLX_CONV_FORWARD, &bytes), FLX_ERR_DEVICE);
  std::string e = p.core->last_error(p.core->ctx);
  EXPECT_NE(e.find("has no device"), std::string::npos) << e;
  EXPECT_EQ(t->conv_forward(p.core->ctx, 0, &d, nullptr), FLX_ERR_DEVICE);
  e = p.core->last_error(p.core->ctx);
  EXPECT_NE(e.find("conv: the CUDA backend has no device"), std::string::npos) << e;
  flx_pool_desc pd{};
  pd.struct_size = sizeof pd;
  pd.dtype = FLX_F64, pd.mode = FLX_POOL_MAX, pd.nspatial = 1, pd.batch = 1, pd.channels = 1;
  pd.in_size[0] = 4, pd.out_size[0] = 2, pd.window[0] = 2, pd.stride[0] = 2;
  EXPECT_EQ(t->pool_forward(p.core->ctx, 0, &pd, nullptr), FLX_ERR_DEVICE);
  flx_batchnorm_desc bd{};
  bd.struct_size = sizeof bd;
  bd.dtype = bd.param_dtype = FLX_F32, bd.training = 1, bd.spatial = 4, bd.channels = 2, bd.batch = 3;
  bd.epsilon = 1e-5, bd.momentum = 0.1;
  EXPECT_EQ(t->batchnorm_forward(p.core->ctx, 0, &bd, nullptr), FLX_ERR_DEVICE);
  EXPECT_EQ(t->batchnorm_backward(p.core->ctx, 0, &bd, nullptr), FLX_ERR_DEVICE);
  // Through libflx: a typed error naming the op, not a crash.
  try {
    be.conv(0, d, FLX_CONV_FORWARD);
    ADD_FAILURE() << "conv ran without a device";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("no device"), std::string::npos) << ex.what();
  }
  // An invalid descriptor is refused as such, before the device is asked.
  d.out_size[0] = 7;
  EXPECT_EQ(t->conv_forward(p.core->ctx, 0, &d, nullptr), FLX_ERR_INVALID_ARGUMENT);
  e = p.core->last_error(p.core->ctx);
  EXPECT_NE(e.find("out_size[0] = 7: expected (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) / stride + 1 = 5"),
            std::string::npos)
      << e;
  d = small_conv();
  d.in_channels = 3, d.groups = 2;
  EXPECT_EQ(t->conv_forward(p.core->ctx, 0, &d, nullptr), FLX_ERR_INVALID_ARGUMENT);
  d = small_conv();
  d.dtype = FLX_I32;
  EXPECT_EQ(t->conv_forward(p.core->ctx, 0, &d, nullptr), FLX_ERR_UNSUPPORTED);
  EXPECT_FALSE(mapped("libcudnn.so")) << "a call that cannot run opened cuDNN";
}

// Then the library itself, opened by the plugin's loader.
TEST(CudaDnnLib, OpenedOnFirstRequestWithEveryEntryPoint) {
  ASSERT_FALSE(mapped("libcudnn.so")) << "linked, not opened on demand";
  const flx_cuda::CudnnApi* api = nullptr;
  ASSERT_EQ(flx_cuda::cudnn_api(&api, FLX_ERR_DEVICE, "test"), FLX_OK) << flx_cuda::g_last_error;
  EXPECT_TRUE(mapped("libcudnn.so"));
  // Every member is an entry point but `version`, the last: all resolved.
  const auto* fns = reinterpret_cast<const void* const*>(api);
  const size_t nfns = offsetof(flx_cuda::CudnnApi, version) / sizeof(void*);
  EXPECT_GE(nfns, 40u);
  for (size_t i = 0; i < nfns; ++i) EXPECT_NE(fns[i], nullptr) << "entry point " << i;
  // The version: asked for, 9 or later, of the header's major.
  const size_t v = api->get_version();
  EXPECT_EQ(api->version, v);
  EXPECT_GE(v, size_t(90000));
  EXPECT_EQ(v / 10000, size_t(CUDNN_MAJOR));
  // Host-only calls through the pointers.
  EXPECT_NE(std::string(api->error_string(CUDNN_STATUS_NOT_SUPPORTED)).find("NOT_SUPPORTED"), std::string::npos)
      << api->error_string(CUDNN_STATUS_NOT_SUPPORTED);
  cudnnTensorDescriptor_t t = nullptr;
  ASSERT_EQ(api->create_tensor(&t), CUDNN_STATUS_SUCCESS);
  const int dims[4] = {2, 3, 4, 5}, strides[4] = {60, 20, 5, 1};
  EXPECT_EQ(api->set_tensor_nd(t, CUDNN_DATA_DOUBLE, 4, dims, strides), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(api->destroy_tensor(t), CUDNN_STATUS_SUCCESS);
  // cudnn_fail: the status's name, and an allocation failure as out of memory.
  EXPECT_EQ(flx_cuda::cudnn_fail(*api, CUDNN_STATUS_ALLOC_FAILED, "x"), FLX_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(flx_cuda::g_last_error.rfind(std::string("x failed: ") + api->error_string(CUDNN_STATUS_ALLOC_FAILED), 0),
            0u)
      << flx_cuda::g_last_error;
  EXPECT_EQ(flx_cuda::cudnn_fail(*api, CUDNN_STATUS_NOT_SUPPORTED, "x"), FLX_ERR_DEVICE);
  // A second request answers the same table.
  const flx_cuda::CudnnApi* again = nullptr;
  ASSERT_EQ(flx_cuda::cudnn_api(&again, FLX_ERR_DEVICE, "test"), FLX_OK);
  EXPECT_EQ(again, api);
}

// Where cuDNN is looked for: the soname first (LD_LIBRARY_PATH, RUNPATH, the
// system's paths), then beside the CUDA runtime (a toolkit), then in pip's
// nvidia-cudnn wheel beside the runtime's wheel.
TEST(CudaDnnLib, CandidatesAreTheSonameThenBesideTheRuntimeThenTheWheel) {
  const std::string so = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  EXPECT_EQ(flx_cuda::cudnn_candidates(""), (std::vector<std::string>{so}));
  EXPECT_EQ(flx_cuda::cudnn_candidates("/site-packages/nvidia/cu13/lib"),
            (std::vector<std::string>{so, "/site-packages/nvidia/cu13/lib/" + so,
                                      "/site-packages/nvidia/cu13/lib/../../cudnn/lib/" + so}));
}

TEST(CudaDnnLib, VersionStrings) {
  EXPECT_EQ(flx_cuda::cudnn_version_string(91900), "9.19.0");
  EXPECT_EQ(flx_cuda::cudnn_version_string(90102), "9.1.2");
  EXPECT_EQ(flx_cuda::cudnn_version_string(CUDNN_VERSION),
            std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." + std::to_string(CUDNN_PATCHLEVEL));
}

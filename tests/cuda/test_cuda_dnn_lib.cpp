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

// A valid 2-D convolution, no memory set: x (5, 4, 3 channels, batch 2),
// w (2, 3, 3, 4), padding 0/1 in dim 0 (SamePad of an even kernel) and 1/1
// in dim 1, so y is (5, 4, 4, 2).
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

// The message of the exception f throws ("" when none).
template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// First: the plugin's table as libflx sees it (flx::detail::Backend, the
// dispatch layer every op goes through), and (without a GPU) its failures,
// which must not open cuDNN either.
TEST(CudaDnnTable, ServedAndFailsClearlyWithoutAGpu) {
  ASSERT_FALSE(mapped("libcudnn.so")) << "linked, not opened on demand";
  Plugin p;
  ASSERT_TRUE(p.core) << p.error;
  const flx::detail::Backend be(flx::BackendId::CUDA, p.core, FLX_TEST_PLUGIN_PATH);
  ASSERT_GE(be.abi_minor(), 5u);
  ASSERT_TRUE(be.has_dnn()) << "the CUDA plugin was built with cudnn.h but serves no dnn table";
  const auto& t = be.table<flx_dnn_table>();
  EXPECT_EQ(t.calls.struct_size, sizeof(flx_dnn_table));
  EXPECT_EQ(t.calls.version, FLX_TABLE_DNN_VERSION);
  EXPECT_NE(t.calls.conv_workspace, nullptr);
  EXPECT_EQ(t.calls.pool_reserve_size, nullptr) << "pooling keeps no reserve (cuDNN's backward takes x, y and dy)";
  for (const auto& info : be.tables())
    if (info.name == FLX_TABLE_DNN) EXPECT_TRUE(info.missing.empty()) << "the dnn table lacks " << info.missing[0];

  flx_conv_desc d = small_conv();
  if (be.device_count() > 0)
    GTEST_SKIP() << "a CUDA device is present: the dnn table's computations are the plugin harness's cases "
                    "(tests/plugins), compared with tests/dnn_reference.hpp";
  // Without a device every pass fails as a device error naming the op.
  for (flx_conv_pass pass : {FLX_CONV_FORWARD, FLX_CONV_BACKWARD_DATA, FLX_CONV_BACKWARD_FILTER}) {
    const std::string e = thrown([&] { be.conv(0, d, pass); });
    EXPECT_TRUE(has(e, "failed (device error)") && has(e, "the CUDA backend has no device")) << e;
  }
  flx_pool_desc pd{};
  pd.dtype = FLX_F64, pd.mode = FLX_POOL_MAX, pd.nspatial = 1, pd.batch = 1, pd.channels = 1;
  pd.in_size[0] = 4, pd.out_size[0] = 2, pd.window[0] = 2, pd.stride[0] = 2;
  std::string e = thrown([&] { be.pool_forward(0, pd); });
  EXPECT_TRUE(has(e, "maxpool") && has(e, "the CUDA backend has no device")) << e;
  e = thrown([&] { be.pool_backward(0, pd); });
  EXPECT_TRUE(has(e, "the CUDA backend has no device")) << e;
  EXPECT_EQ(be.pool_reserve(0, pd).bytes(), 0u);
  flx_batchnorm_desc bd{};
  bd.dtype = bd.param_dtype = FLX_F32, bd.training = 1, bd.spatial = 4, bd.channels = 2, bd.batch = 3;
  bd.epsilon = 1e-5, bd.momentum = 0.1;
  e = thrown([&] { be.batchnorm_forward(0, bd); });
  EXPECT_TRUE(has(e, "batchnorm") && has(e, "the CUDA backend has no device")) << e;
  e = thrown([&] { be.batchnorm_backward(0, bd); });
  EXPECT_TRUE(has(e, "the CUDA backend has no device")) << e;
  // An invalid descriptor is refused as such, saying what was expected,
  // before the device is asked.
  d.out_size[0] = 7;
  e = thrown([&] { be.conv(0, d, FLX_CONV_FORWARD); });
  EXPECT_TRUE(has(e, "invalid argument") &&
              has(e, "out_size[0] = 7: expected (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) / stride + 1 = 5"))
      << e;
  d = small_conv();
  d.groups = 2;  // 3 input channels
  e = thrown([&] { be.conv(0, d, FLX_CONV_FORWARD); });
  EXPECT_TRUE(has(e, "in_channels = 3: expected a positive multiple of groups (2)")) << e;
  d = small_conv();
  d.dtype = FLX_I32;
  e = thrown([&] { be.conv(0, d, FLX_CONV_FORWARD); });
  EXPECT_TRUE(has(e, "answered unsupported") && has(e, "not Int32")) << e;
  bd.param_dtype = FLX_F64;
  e = thrown([&] { be.batchnorm_forward(0, bd); });
  EXPECT_TRUE(has(e, "param_dtype is Float64, expected Float32")) << e;
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

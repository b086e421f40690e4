// The CUDA plugin's host-only pieces, without a GPU or libcudart: the
// reason functional() gives and the CUDA_VISIBLE_DEVICES parser.
#include <gtest/gtest.h>

#include "cuda/cuda_reason.hpp"

using flx_cuda::parse_visible_devices;
using flx_cuda::ProbeResult;
using flx_cuda::unusable_reason;

TEST(CudaReason, UsableWhenDevicesAndNoError) {
  ProbeResult p;
  p.device_count = 2;
  p.driver_version = 13000;
  p.runtime_version = 13000;
  EXPECT_EQ(unusable_reason(p), "");
}

TEST(CudaReason, NoDriver) {
  ProbeResult p;
  p.error = flx_cuda::kErrInsufficientDriver;
  p.error_string = "CUDA driver version is insufficient for CUDA runtime version";
  p.runtime_version = 13000;
  EXPECT_EQ(unusable_reason(p),
            "no NVIDIA driver (cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version)");
}

TEST(CudaReason, DriverOlderThanRuntime) {
  ProbeResult p;
  p.error = flx_cuda::kErrInsufficientDriver;
  p.error_string = "CUDA driver version is insufficient for CUDA runtime version";
  p.driver_version = 12040;
  p.runtime_version = 13000;
  EXPECT_EQ(unusable_reason(p), "the driver (CUDA 12.4) is older than the runtime (CUDA 13.0); update the driver");
}

TEST(CudaReason, NoDevice) {
  ProbeResult p;
  p.error = flx_cuda::kErrNoDevice;
  p.error_string = "no CUDA-capable device is detected";
  p.driver_version = 13000;
  p.runtime_version = 13000;
  EXPECT_EQ(unusable_reason(p), "no CUDA device");
  p.error = 0;  // success with a count of 0
  EXPECT_EQ(unusable_reason(p), "no CUDA device");
}

TEST(CudaReason, VisibleDevicesHidesEveryGpu) {
  ProbeResult p;
  p.error = flx_cuda::kErrNoDevice;
  p.error_string = "no CUDA-capable device is detected";
  p.driver_version = 13000;
  p.runtime_version = 13000;
  p.visible = "-1";
  EXPECT_EQ(unusable_reason(p), "CUDA_VISIBLE_DEVICES=-1 hides every GPU");
  p.visible = "";
  EXPECT_EQ(unusable_reason(p), "CUDA_VISIBLE_DEVICES= hides every GPU");
  p.visible = "0";  // selects a device that is not there
  EXPECT_EQ(unusable_reason(p), "no CUDA device");
}

TEST(CudaReason, OtherRuntimeError) {
  ProbeResult p;
  p.error = 999;
  p.error_string = "unknown error";
  p.driver_version = 13000;
  p.runtime_version = 13000;
  EXPECT_EQ(unusable_reason(p), "the CUDA runtime cannot be used (cudaGetDeviceCount: unknown error)");
}

TEST(CudaVisibleDevices, Parse) {
  EXPECT_FALSE(parse_visible_devices(nullptr).has_value());
  EXPECT_EQ(*parse_visible_devices(""), std::vector<int>{});
  EXPECT_EQ(*parse_visible_devices("-1"), std::vector<int>{});
  EXPECT_EQ(*parse_visible_devices("0"), std::vector<int>{0});
  EXPECT_EQ(*parse_visible_devices("1,0"), (std::vector<int>{1, 0}));
  EXPECT_EQ(*parse_visible_devices(" 2 , 3"), (std::vector<int>{2, 3}));
  // cut at the first invalid entry, as the runtime does
  EXPECT_EQ(*parse_visible_devices("0,-1,1"), std::vector<int>{0});
  EXPECT_EQ(*parse_visible_devices("0,x"), std::vector<int>{0});
  EXPECT_EQ(*parse_visible_devices("0,,1"), std::vector<int>{0});
  EXPECT_EQ(*parse_visible_devices("GPU-8e6d-44"), std::vector<int>{-1});
  EXPECT_EQ(*parse_visible_devices("MIG-abc,1"), (std::vector<int>{-1, 1}));
}

TEST(CudaVersion, String) {
  EXPECT_EQ(flx_cuda::cuda_version_string(13000), "13.0");
  EXPECT_EQ(flx_cuda::cuda_version_string(12040), "12.4");
  EXPECT_EQ(flx_cuda::cuda_version_string(11080), "11.8");
}

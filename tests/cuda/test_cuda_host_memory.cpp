// The device the CUDA plugin's pinned host memory is allocated with
// (backends/cuda/cuda_host_memory.hpp), on the host: the first device
// already set up, so that no other device gets a context for it.
#include <gtest/gtest.h>

#include "cuda/cuda_host_memory.hpp"

using flx_cuda::first_ready_device;

TEST(CudaHostMemory, TheFirstDeviceInUse) {
  EXPECT_EQ(first_ready_device({false, false, true, true}), 2) << "a process on GPUs 2 and 3 leaves GPU 0 alone";
  EXPECT_EQ(first_ready_device({true, false, true}), 0);
  EXPECT_EQ(first_ready_device({false, true}), 1);
}

TEST(CudaHostMemory, DeviceZeroBeforeAnyIsInUse) {
  EXPECT_EQ(first_ready_device({false, false}), 0);
  EXPECT_EQ(first_ready_device({}), 0);
}

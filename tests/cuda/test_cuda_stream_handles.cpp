// A thread's cuBLAS handles, one per (device, stream)
// (backends/cuda/cuda_stream_handles.hpp), on the host with fake handles:
// no handle ever serves two streams or two devices.
#include <gtest/gtest.h>

#include <set>

#include "cuda/cuda_stream_handles.hpp"

using flx_cuda::StreamHandles;

namespace {
const void* stream(int i) { return reinterpret_cast<const void*>(uintptr_t(0x1000 * i)); }
}  // namespace

TEST(CudaStreamHandles, OneHandlePerDeviceAndStream) {
  StreamHandles<int> hs;
  int made = 0;
  auto make = [&](int* h) {
    *h = ++made;
    return 0;
  };
  std::set<int> seen;
  for (int round = 0; round < 3; ++round)
    for (int dev : {0, 1})
      for (int s : {0, 1, 2}) {  // 0: the device's default stream
        int h = 0;
        ASSERT_EQ(hs.get(dev, stream(s), make, &h), 0);
        if (round == 0) EXPECT_TRUE(seen.insert(h).second) << "a handle reused for dev " << dev << " stream " << s;
        else EXPECT_TRUE(seen.count(h)) << "the same (device, stream) gets its own handle again";
      }
  EXPECT_EQ(made, 6) << "made once per (device, stream)";
  EXPECT_EQ(hs.size(), 6u);
  int h0 = 0, h1 = 0;
  hs.get(0, stream(1), make, &h0);
  hs.get(1, stream(1), make, &h1);
  EXPECT_NE(h0, h1) << "one stream value on two devices: two handles";
}

TEST(CudaStreamHandles, AFailedMakeKeepsNothing) {
  StreamHandles<int> hs;
  int h = 7;
  EXPECT_EQ(hs.get(0, stream(1), [](int*) { return 3; }, &h), 3);
  EXPECT_EQ(h, 7) << "untouched";
  EXPECT_EQ(hs.size(), 0u);
  EXPECT_EQ(hs.get(0, stream(1), [](int* x) { return *x = 42, 0; }, &h), 0);
  EXPECT_EQ(h, 42) << "made on the next call";
}

TEST(CudaStreamHandles, DestroyAllOncePerHandle) {
  StreamHandles<int> hs;
  int n = 0, h = 0;
  for (int s = 0; s < 4; ++s) hs.get(s % 2, stream(s), [&](int* x) { return *x = ++n, 0; }, &h);
  std::multiset<std::pair<int, int>> destroyed;
  hs.destroy_all([&](int dev, int handle) { destroyed.insert({dev, handle}); });
  EXPECT_EQ(destroyed, (std::multiset<std::pair<int, int>>{{0, 1}, {1, 2}, {0, 3}, {1, 4}}));
  EXPECT_EQ(hs.size(), 0u);
}

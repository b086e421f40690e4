// The CUDA plugin's table of live allocations (backends/cuda/cuda_allocations.hpp),
// on the host: what it lets through and what it refuses, with the message
// the OpenCL plugin gives for a copy past a buffer's end.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cuda/cuda_allocations.hpp"

using flx_cuda::AllocationTable;

namespace {
// Fake device addresses: the table never dereferences them.
const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }
}  // namespace

TEST(CudaAllocations, WithinABufferPasses) {
  AllocationTable t;
  t.add(at(0x1000), 0, 64);
  EXPECT_EQ(t.check(at(0x1000), 0, 64, 0, "copy_h2d"), "");
  EXPECT_EQ(t.check(at(0x1000), 60, 4, 0, "copy_h2d"), "");
  EXPECT_EQ(t.check(at(0x1000), 64, 0, 0, "copy_h2d"), "");  // nothing, at the end
  EXPECT_EQ(t.live(), 1u);
}

TEST(CudaAllocations, PastTheEndIsRefusedAsOnTheOtherBackends) {
  AllocationTable t;
  t.add(at(0x1000), 0, 64);
  EXPECT_EQ(t.check(at(0x1000), 60, 8, 0, "copy_h2d"), "copy_h2d: 8 bytes at offset 60 run past the buffer's 64 bytes");
  EXPECT_EQ(t.check(at(0x1000), 0, 65, 0, "fill"), "fill: 65 bytes at offset 0 run past the buffer's 64 bytes");
  EXPECT_EQ(t.check(at(0x1000), 65, 0, 0, "copy_d2h"), "copy_d2h: 0 bytes at offset 65 run past the buffer's 64 bytes");
  // offset + bytes wrapping around is past the end, not within
  EXPECT_NE(t.check(at(0x1000), 8, SIZE_MAX - 4, 0, "copy_d2d"), "");
  EXPECT_NE(t.check(at(0x1000), UINT64_MAX, 2, 0, "copy_d2d"), "");
  // A zero-byte allocation holds nothing.
  t.add(at(0x2000), 0, 0);
  EXPECT_EQ(t.check(at(0x2000), 0, 1, 0, "cast"), "cast: 1 bytes at offset 0 run past the buffer's 0 bytes");
}

TEST(CudaAllocations, UnknownNullAndForeignBuffersAreRefused) {
  AllocationTable t;
  t.add(at(0x1000), 1, 64);
  EXPECT_EQ(t.check(nullptr, 0, 4, 1, "copy_h2d"), "copy_h2d: NULL buffer");
  const std::string unknown = t.check(at(0x1008), 0, 4, 1, "copy_d2d");  // inside, but not a base address
  EXPECT_NE(unknown.find("copy_d2d: the buffer 0x1008 is not a live allocation of the CUDA backend"), std::string::npos)
      << unknown;
  const std::string other = t.check(at(0x1000), 0, 4, 0, "fill");
  EXPECT_NE(other.find("fill: the buffer belongs to CUDA device 1, not device 0"), std::string::npos) << other;
  // Freed: no longer live, and forgetting it twice says so.
  EXPECT_TRUE(t.remove(at(0x1000)));
  EXPECT_FALSE(t.remove(at(0x1000)));
  EXPECT_NE(t.check(at(0x1000), 0, 4, 1, "copy_d2h").find("not a live allocation"), std::string::npos);
  EXPECT_EQ(t.live(), 0u);
  // An address reused by a new allocation takes the new size.
  t.add(at(0x1000), 1, 16);
  EXPECT_NE(t.check(at(0x1000), 0, 32, 1, "fill"), "");
  EXPECT_EQ(t.check(at(0x1000), 0, 16, 1, "fill"), "");
}

// Allocations and frees on several threads while others check: each
// thread's own buffers stay exactly as it recorded them.
TEST(CudaAllocations, ThreadsAddCheckAndRemoveConcurrently) {
  AllocationTable t;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < 2000; ++i) {
        const void* p = at(0x100000 * uintptr_t(th + 1) + 64 * uintptr_t(i % 50));
        t.add(p, th, size_t(i % 50) + 1);
        if (!t.check(p, 0, size_t(i % 50) + 1, th, "x").empty()) ++wrong;
        if (t.check(p, 0, size_t(i % 50) + 2, th, "x").empty()) ++wrong;
        if (!t.remove(p)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(t.live(), 0u);
}

TEST(CudaAllocations, ThePluginsTableIsOneObject) {
  EXPECT_EQ(&flx_cuda::allocations(), &flx_cuda::allocations());
}

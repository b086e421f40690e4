// The CUDA plugin's comm table, its host-only half
// (backends/cuda/cuda_comm_host.cpp): the live communicators behind the
// flx_comm handles, and the checks of a collective's descriptor that come
// before NCCL sees it. No GPU, no CUDA, no NCCL.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "cuda/cuda_comm_host.hpp"

namespace {

using flx_cuda::CommEntry;
using flx_cuda::CommRegistry;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

flx_collective_desc desc(int32_t kind, int32_t dtype, int32_t op = FLX_COMM_SUM, uint64_t count = 4) {
  flx_collective_desc d{};
  d.struct_size = sizeof d;
  d.kind = kind;
  d.dtype = dtype;
  d.op = op;
  d.count = count;
  return d;
}

CommEntry entry(int32_t nranks, int32_t rank) {
  CommEntry e;
  e.nranks = nranks;
  e.rank = rank;
  return e;
}

}  // namespace

TEST(CudaCommRegistry, HandlesAreNeverReusedAndAStaleOneIsUnknown) {
  CommRegistry r;
  CommEntry e = entry(2, 1);
  e.nccl = &r;
  e.dev = 3;
  const flx_comm a = r.add(e);
  const flx_comm b = r.add(entry(1, 0));
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(r.live(), 2u);
  CommEntry got;
  ASSERT_TRUE(r.find(a, &got));
  EXPECT_EQ(got.nccl, &r);
  EXPECT_EQ(got.dev, 3);
  EXPECT_EQ(got.nranks, 2);
  EXPECT_EQ(got.rank, 1);
  EXPECT_FALSE(got.ready);
  r.set_ready(a);
  ASSERT_TRUE(r.find(a, &got));
  EXPECT_TRUE(got.ready);
  // Taken once: then unknown to every call, and its number is not handed out again.
  ASSERT_TRUE(r.take(a, &got));
  EXPECT_EQ(got.nccl, &r);
  EXPECT_FALSE(r.find(a, &got));
  EXPECT_FALSE(r.take(a, &got));
  r.set_ready(a);  // no effect, no crash
  std::set<flx_comm> seen{a, b};
  for (int i = 0; i < 100; ++i) {
    const flx_comm c = r.add(entry(1, 0));
    EXPECT_TRUE(seen.insert(c).second) << "handle reused";
    ASSERT_TRUE(r.take(c, &got));
  }
  EXPECT_EQ(r.live(), 1u);
  // Made-up handles.
  EXPECT_FALSE(r.find(nullptr, &got));
  EXPECT_FALSE(r.find(reinterpret_cast<flx_comm>(&got), &got));
}

TEST(CudaCommRegistry, TheMessageForAnUnknownHandleSaysWhy) {
  const std::string m = flx_cuda::unknown_comm(reinterpret_cast<flx_comm>(uintptr_t(0x1234)), "comm_poll");
  EXPECT_TRUE(has(m, "comm_poll: 0x1234 is not a live communicator of the CUDA backend")) << m;
  EXPECT_TRUE(has(m, "never made by comm_init, or aborted or destroyed already")) << m;
  // The plugin's registry is one object.
  EXPECT_EQ(&flx_cuda::comms(), &flx_cuda::comms());
}

TEST(CudaCommChecks, ElementSizes) {
  const std::pair<int32_t, size_t> sizes[] = {{FLX_F32, 4}, {FLX_F64, 8}, {FLX_F16, 2}, {FLX_BF16, 2},
                                              {FLX_I32, 4}, {FLX_I64, 8}, {FLX_U8, 1},  {FLX_BOOL, 1}};
  for (auto [t, n] : sizes) EXPECT_EQ(flx_cuda::collective_elem_bytes(t), n) << t;
  EXPECT_EQ(flx_cuda::collective_elem_bytes(8), 0u);
  EXPECT_EQ(flx_cuda::collective_elem_bytes(-1), 0u);
}

// Every dtype with every op of ALLREDUCE and REDUCE passes, except SUM and
// AVG of Bool, which are unsupported; BROADCAST takes every dtype whatever
// its op field holds.
TEST(CudaCommChecks, DtypesAndOps) {
  for (int32_t t = FLX_F32; t <= FLX_BOOL; ++t)
    for (int32_t kind : {FLX_COLLECTIVE_ALLREDUCE, FLX_COLLECTIVE_REDUCE})
      for (int32_t op = FLX_COMM_SUM; op <= FLX_COMM_AVG; ++op) {
        flx_collective_desc d = desc(kind, t, op);
        int status = -1;
        const std::string why = flx_cuda::check_collective_desc(&d, &status);
        const bool bool_sum = t == FLX_BOOL && (op == FLX_COMM_SUM || op == FLX_COMM_AVG);
        EXPECT_EQ(status, bool_sum ? FLX_ERR_UNSUPPORTED : FLX_OK) << "dtype " << t << " op " << op << ": " << why;
        EXPECT_EQ(why.empty(), !bool_sum) << why;
        if (bool_sum) EXPECT_TRUE(has(why, "of Bool is not defined")) << why;
      }
  for (int32_t t = FLX_F32; t <= FLX_BOOL; ++t)
    for (int32_t op : {int32_t(FLX_COMM_SUM), int32_t(FLX_COMM_AVG), 99}) {
      flx_collective_desc d = desc(FLX_COLLECTIVE_BROADCAST, t, op);
      int status = -1;
      EXPECT_EQ(flx_cuda::check_collective_desc(&d, &status), "");
      EXPECT_EQ(status, FLX_OK);
    }
  flx_collective_desc d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_BOOL, FLX_COMM_AVG);
  int status = -1;
  EXPECT_TRUE(has(flx_cuda::check_collective_desc(&d, &status), "AVG of Bool")) << "names the op";
}

TEST(CudaCommChecks, MalformedDescriptorsAreInvalidArguments) {
  auto refused = [](const flx_collective_desc* d, const std::string& part) {
    int status = -1;
    const std::string why = flx_cuda::check_collective_desc(d, &status);
    EXPECT_EQ(status, FLX_ERR_INVALID_ARGUMENT) << why;
    EXPECT_TRUE(has(why, part)) << why << "\nlacks: " << part;
  };
  refused(nullptr, "null pointer");
  flx_collective_desc d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_F32);
  d.struct_size = offsetof(flx_collective_desc, recv);  // one field short
  refused(&d, "struct_size is " + std::to_string(offsetof(flx_collective_desc, recv)) +
                  " bytes; version 1 of the comm table needs at least " + std::to_string(sizeof(flx_collective_desc)));
  d.struct_size = 0;
  refused(&d, "struct_size is 0 bytes");
  d = desc(3, FLX_F32);
  refused(&d, "unknown kind 3");
  d = desc(-1, FLX_F32);
  refused(&d, "unknown kind -1");
  d = desc(FLX_COLLECTIVE_ALLREDUCE, 8);
  refused(&d, "unknown dtype 8");
  d = desc(FLX_COLLECTIVE_REDUCE, FLX_F32, 4);
  refused(&d, "unknown op 4");
  d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_I32, -1);
  refused(&d, "unknown op -1");
  // A descriptor from a newer caller (longer) is read as far as it goes.
  d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_F32);
  d.struct_size = sizeof d + 16;
  int status = -1;
  EXPECT_EQ(flx_cuda::check_collective_desc(&d, &status), "");
  EXPECT_EQ(status, FLX_OK);
}

TEST(CudaCommChecks, WhichBuffersEachRankUses) {
  flx_collective_desc d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_F32);
  EXPECT_TRUE(flx_cuda::collective_reads_send(d, 1));
  EXPECT_TRUE(flx_cuda::collective_writes_recv(d, 1));
  d = desc(FLX_COLLECTIVE_BROADCAST, FLX_F32);
  d.root = 1;
  EXPECT_TRUE(flx_cuda::collective_reads_send(d, 1));
  EXPECT_FALSE(flx_cuda::collective_reads_send(d, 0));
  EXPECT_TRUE(flx_cuda::collective_writes_recv(d, 0));
  EXPECT_TRUE(flx_cuda::collective_writes_recv(d, 1));
  d = desc(FLX_COLLECTIVE_REDUCE, FLX_F32);
  d.root = 1;
  EXPECT_TRUE(flx_cuda::collective_reads_send(d, 0));
  EXPECT_TRUE(flx_cuda::collective_reads_send(d, 1));
  EXPECT_FALSE(flx_cuda::collective_writes_recv(d, 0));
  EXPECT_TRUE(flx_cuda::collective_writes_recv(d, 1));
}

TEST(CudaCommChecks, RootsAndOverlaps) {
  flx_collective_desc d = desc(FLX_COLLECTIVE_BROADCAST, FLX_F32);
  d.root = 2;
  EXPECT_TRUE(has(flx_cuda::check_collective_ranks(d, entry(2, 0)), "root 2 is not a rank of the communicator (0 to 1)"));
  d.root = -1;
  EXPECT_FALSE(flx_cuda::check_collective_ranks(d, entry(2, 0)).empty());
  d.root = 1;
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(2, 0)), "");
  d = desc(FLX_COLLECTIVE_REDUCE, FLX_F32);
  d.root = 5;
  EXPECT_FALSE(flx_cuda::check_collective_ranks(d, entry(4, 0)).empty());
  d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_F32);
  d.root = 7;  // ALLREDUCE has no root
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(2, 0)), "");

  // Same buffer: the same offset is in place; ranges that overlap otherwise are refused.
  auto buf = reinterpret_cast<flx_buffer>(uintptr_t(0x1000));
  d = desc(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, FLX_COMM_SUM, 4);  // 16 bytes
  d.send = {buf, 64};
  d.recv = {buf, 64};
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(1, 0)), "");
  d.recv = {buf, 72};
  EXPECT_TRUE(has(flx_cuda::check_collective_ranks(d, entry(1, 0)), "overlap in the same buffer")) << "send 64-80, recv 72-88";
  d.recv = {buf, 52};
  EXPECT_FALSE(flx_cuda::check_collective_ranks(d, entry(1, 0)).empty()) << "send 64-80, recv 52-68";
  d.recv = {buf, 48};
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(1, 0)), "") << "adjacent ranges, recv below";
  d.recv = {buf, 80};
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(1, 0)), "") << "adjacent ranges, recv above";
  d.recv = {reinterpret_cast<flx_buffer>(uintptr_t(0x2000)), 72};
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(1, 0)), "") << "another buffer";
  // Off root, a broadcast reads no send, so an overlap there harms nothing.
  d = desc(FLX_COLLECTIVE_BROADCAST, FLX_F32, FLX_COMM_SUM, 4);
  d.root = 0;
  d.send = {buf, 64};
  d.recv = {buf, 72};
  EXPECT_EQ(flx_cuda::check_collective_ranks(d, entry(2, 1)), "");
  EXPECT_FALSE(flx_cuda::check_collective_ranks(d, entry(2, 0)).empty());
}

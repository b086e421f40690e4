// A backend plugin's calls of ABI minor 4 through libflx's dispatch layer:
// the "comm" table (communicators and collectives; the CUDA plugin's, on
// NCCL, where the build found nccl.h: FLX_TEST_PLUGIN_COMM) and the optional
// core calls event_query and device_address. Its own executable, apart from
// the plugin suite: which libraries a process has mapped is checked here,
// and compute-sanitizer runs the plugin suite without NCCL.
//
// Without a device, what needs none still runs: the tables as served, NCCL
// not mapped by loading the plugin and looking its tables up (nor by a
// comm_id that cannot run), bad handles and descriptors refused. The rest
// skips, saying why. With one GPU the collectives run on a communicator of
// one rank (every result is its input, exactly), with two on two ranks.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "not_implemented.hpp"
#include "plugin_harness.hpp"

using namespace plugintest;

#ifndef FLX_TEST_PLUGIN_COMM
#define FLX_TEST_PLUGIN_COMM 0
#endif

namespace {

const bool kIsCuda = std::string(FLX_TEST_PLUGIN_NAME) == "CUDA";

bool nccl_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libnccl.so") != std::string::npos) return true;
  return false;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

using flx::testing::not_implemented;

const flx_comm kBogus = reinterpret_cast<flx_comm>(uintptr_t(0x5eed));

flx_collective_desc collective(int32_t kind, int32_t dtype, int32_t op, uint64_t count, flx_mem send, flx_mem recv,
                               int32_t root = 0) {
  flx_collective_desc d{};
  d.kind = kind;
  d.dtype = dtype;
  d.op = op;
  d.root = root;
  d.count = count;
  d.send = send;
  d.recv = recv;
  return d;  // struct_size: the dispatch layer sets it
}

// A communicator of one rank on device 0, ready (polled for up to a minute).
flx_comm one_rank(const Backend& be) {
  const flx_comm_id id = be.comm_id();
  const flx_comm c = be.comm_init(0, 1, 0, id);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!be.comm_poll(c)) {
    if (std::chrono::steady_clock::now() > deadline) {
      be.comm_abort(c);
      ADD_FAILURE() << "a communicator of one rank was not ready after 60 s";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return c;
}

}  // namespace

// ---- without a device ---------------------------------------------------------------

TEST(PluginComm, TheCommTableIsServedWhereTheBuildHasIt) {
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  const Backend& be = *p.be;
  EXPECT_EQ(be.has_comm(), bool(FLX_TEST_PLUGIN_COMM));
  bool listed = false;
  for (const auto& t : be.tables())
    if (t.name == FLX_TABLE_COMM) {
      listed = true;
      EXPECT_EQ(t.version, FLX_TABLE_COMM_VERSION);
      EXPECT_TRUE(t.known);
      EXPECT_TRUE(t.listed) << "list_tables names it";
      EXPECT_TRUE(t.missing.empty()) << "comm calls left NULL: " << t.missing.size();
    }
  EXPECT_EQ(listed, bool(FLX_TEST_PLUGIN_COMM));
  if (FLX_TEST_PLUGIN_COMM) return;
  // Without the table every call of it is NotImplemented, naming the table.
  std::string m = not_implemented([&] { be.comm_id(); });
  EXPECT_TRUE(has(m, "comm_id cannot run on " FLX_TEST_PLUGIN_NAME ": its backend (")) << m;
  EXPECT_TRUE(has(m, "provides no \"comm\" table version 1")) << m;
  EXPECT_EQ(has(m, "(the table came with ABI 2.4)"), FLX_TEST_PLUGIN_MINOR < 4) << m;
  m = not_implemented([&] { be.comm_poll(kBogus); });
  EXPECT_TRUE(has(m, "provides no \"comm\" table")) << m;
  be.comm_abort(kBogus);  // nothing to free, nothing thrown
  be.comm_destroy(kBogus);
}

// Loading the plugin, asking whether it works and looking its tables up
// map no NCCL; nor does a comm_id that cannot run (no device).
TEST(PluginComm, NcclIsOpenedOnlyWhenACommunicatorIsMade) {
  if (!FLX_TEST_PLUGIN_COMM) GTEST_SKIP() << FLX_TEST_PLUGIN_NAME " serves no comm table";
  if (nccl_mapped()) GTEST_SKIP() << "an earlier test of this process opened NCCL; run this test alone (ctest does)";
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  const Backend& be = *p.be;
  std::string reason;
  (void)be.functional(&reason);
  (void)be.tables();
  EXPECT_TRUE(be.has_comm());
  EXPECT_FALSE(nccl_mapped()) << "loading the plugin or its tables mapped NCCL";
  if (!p.skip_reason.empty()) {
    EXPECT_BACKEND_ERROR(be.comm_id(), "comm_id failed (device error)", "the CUDA backend cannot run here: ");
    EXPECT_FALSE(nccl_mapped()) << "comm_id without a device opened NCCL";
    return;
  }
  (void)be.comm_id();
  EXPECT_TRUE(nccl_mapped()) << "comm_id runs NCCL's ncclGetUniqueId";
}

// Handles that are not live communicators, and descriptors that can be
// refused without one, never reach NCCL (nor need a device).
TEST(PluginComm, BadHandlesAndDescriptorsAreRefused) {
  if (!FLX_TEST_PLUGIN_COMM) GTEST_SKIP() << FLX_TEST_PLUGIN_NAME " serves no comm table";
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  const Backend& be = *p.be;
  const char* unknown = "is not a live communicator of the CUDA backend";
  EXPECT_BACKEND_ERROR(be.comm_poll(kBogus), "comm_poll failed (invalid argument)", unknown);
  EXPECT_BACKEND_ERROR(be.comm_poll(nullptr), "invalid argument", unknown);
  const flx_mem none{};
  EXPECT_BACKEND_ERROR(be.collective(0, kBogus, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, FLX_COMM_SUM, 4, none,
                                                           none)),
                       "allreduce (sum) failed (invalid argument)", unknown);
  // The descriptor's checks come first: SUM and AVG of Bool are unsupported.
  std::string m = not_implemented([&] {
    be.collective(0, kBogus, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_BOOL, FLX_COMM_SUM, 4, none, none));
  });
  EXPECT_TRUE(has(m, "allreduce (sum) of Bool cannot run on CUDA")) << m;
  EXPECT_TRUE(has(m, "answered unsupported: collective: SUM of Bool is not defined")) << m;
  m = not_implemented([&] {
    be.collective(0, kBogus, collective(FLX_COLLECTIVE_REDUCE, FLX_BOOL, FLX_COMM_AVG, 4, none, none));
  });
  EXPECT_TRUE(has(m, "reduce (avg) of Bool cannot run on CUDA")) << m;
  EXPECT_BACKEND_ERROR(be.collective(0, kBogus, collective(7, FLX_F32, FLX_COMM_SUM, 4, none, none)),
                       "invalid argument", "unknown kind 7");
  EXPECT_BACKEND_ERROR(be.collective(0, kBogus, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 9, 4, none, none)),
                       "invalid argument", "unknown op 9");
  EXPECT_BACKEND_ERROR(be.comm_init(0, 2, 2, flx_comm_id{}), "comm_init failed (invalid argument)", "rank 2 of 2");
  EXPECT_BACKEND_ERROR(be.comm_init(0, 0, 0, flx_comm_id{}), "invalid argument", "rank 0 of 0");
  if (!p.skip_reason.empty())  // a well-formed init that needs the device
    EXPECT_BACKEND_ERROR(be.comm_init(0, 1, 0, flx_comm_id{}), "comm_init failed (device error)",
                         "the CUDA backend has no device");
  // Freeing a handle that is not one: refused inside, nothing thrown.
  be.comm_abort(kBogus);
  be.comm_destroy(kBogus);
}

// ---- with a device -------------------------------------------------------------------

class PluginCommTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!be->has_comm()) GTEST_SKIP() << FLX_TEST_PLUGIN_NAME " serves no comm table";
  }
};

// One rank: every collective gives back its input, for every dtype, op and
// kind, in place and out of place; refused cases write nothing.
TEST_F(PluginCommTest, OneRankCollectivesOfEveryDtypeOpAndKind) {
  const flx_comm c = one_rank(*be);
  ASSERT_NE(c, nullptr);
  const size_t n = 37;
  const Bytes fill(n * 8, 0xAB);
  for (int32_t t : all_dtypes()) {
    const Bytes input = make(t, values_for(t, n, 11 + uint32_t(t)));
    const Bytes sentinel(fill.begin(), fill.begin() + long(input.size()));
    struct Case {
      int32_t kind, op;
    };
    std::vector<Case> cases;
    for (int32_t op = FLX_COMM_SUM; op <= FLX_COMM_AVG; ++op)
      cases.push_back({FLX_COLLECTIVE_ALLREDUCE, op}), cases.push_back({FLX_COLLECTIVE_REDUCE, op});
    cases.push_back({FLX_COLLECTIVE_BROADCAST, FLX_COMM_SUM});
    for (const Case& k : cases) {
      const bool refused = t == FLX_BOOL && k.kind != FLX_COLLECTIVE_BROADCAST &&
                           (k.op == FLX_COMM_SUM || k.op == FLX_COMM_AVG);
      const std::string what = std::string(dname(t)) + " kind " + std::to_string(k.kind) + " op " + std::to_string(k.op);
      {  // out of place
        DevBuf send(*be, 0, input), recv(*be, 0, sentinel);
        const Result r = attempt([&] {
          be->collective(0, c, collective(k.kind, t, k.op, n, send.mem(), recv.mem()));
          be->synchronize(0);
        });
        EXPECT_EQ(r.ok, !refused) << what << ": " << r.err;
        if (refused) EXPECT_TRUE(has(r.err, "of Bool is not defined")) << what << ": " << r.err;
        EXPECT_EQ(recv.read(), refused ? sentinel : input) << what << " out of place";
        EXPECT_EQ(send.read(), input) << what << ": send changed";
      }
      {  // in place, at an offset into the buffer
        const size_t off = 2 * dsize(t);
        Bytes padded(off, 0x5A);
        padded.insert(padded.end(), input.begin(), input.end());
        DevBuf buf(*be, 0, padded);
        const Result r = attempt([&] {
          be->collective(0, c, collective(k.kind, t, k.op, n, buf.mem(off), buf.mem(off)));
          be->synchronize(0);
        });
        EXPECT_EQ(r.ok, !refused) << what << ": " << r.err;
        EXPECT_EQ(buf.read(), padded) << what << " in place";
      }
    }
  }
  be->comm_destroy(c);
  EXPECT_BACKEND_ERROR(be->comm_poll(c), "invalid argument", "is not a live communicator");
}

// What the plugin refuses before queuing anything, on a live communicator.
TEST_F(PluginCommTest, ArgumentsAreCheckedBeforeAnythingIsQueued) {
  const flx_comm c = one_rank(*be);
  ASSERT_NE(c, nullptr);
  const Bytes input = make(FLX_F32, {1, 2, 3, 4});
  DevBuf a(*be, 0, input), b(*be, 0, Bytes(16, 0xAB));
  EXPECT_BACKEND_ERROR(be->collective(0, c, collective(FLX_COLLECTIVE_BROADCAST, FLX_F32, 0, 4, a.mem(), b.mem(), 1)),
                       "broadcast failed (invalid argument)", "root 1 is not a rank of the communicator (0 to 0)");
  EXPECT_BACKEND_ERROR(be->collective(0, c, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 0, 5, a.mem(), b.mem())),
                       "invalid argument", "collective (send): 20 bytes at offset 0 run past the buffer's 16 bytes");
  EXPECT_BACKEND_ERROR(be->collective(0, c, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 0, 4, a.mem(), {})),
                       "invalid argument", "collective (recv): NULL buffer");
  EXPECT_BACKEND_ERROR(be->collective(0, c, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 0, 2, a.mem(0), a.mem(4))),
                       "invalid argument", "overlap in the same buffer");
  if (be->device_count() > 1)
    EXPECT_BACKEND_ERROR(be->collective(1, c, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 0, 4, a.mem(), b.mem())),
                         "invalid argument", "is not on CUDA device 1");
  EXPECT_EQ(b.read(), Bytes(16, 0xAB)) << "a refused collective wrote";
  // Zero elements queue nothing, and succeed.
  be->collective(0, c, collective(FLX_COLLECTIVE_ALLREDUCE, FLX_F32, 0, 0, a.mem(), b.mem()));
  be->comm_destroy(c);
}

// A rank that never joins: the communicator never gets ready, and
// comm_abort ends it at once without waiting for that rank.
TEST_F(PluginCommTest, AbortDoesNotWaitForARankThatNeverJoins) {
  const flx_comm_id id = be->comm_id();
  const flx_comm c = be->comm_init(0, 2, 0, id);  // rank 1 never comes
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(be->comm_poll(c)) << "ready without its second rank";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto t0 = std::chrono::steady_clock::now();
  be->comm_abort(c);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0) << "comm_abort waited for the missing rank";
  EXPECT_BACKEND_ERROR(be->comm_poll(c), "invalid argument", "is not a live communicator");
  // The same for comm_destroy: a communicator still setting up is aborted.
  const flx_comm d = be->comm_init(0, 2, 0, be->comm_id());
  be->comm_destroy(d);
  EXPECT_BACKEND_ERROR(be->comm_poll(d), "invalid argument", "is not a live communicator");
}

// Two ranks, one thread and one device each (two GPUs): the reductions
// combine both ranks' values.
TEST_F(PluginCommTest, TwoRanksOnTwoDevices) {
  if (be->device_count() < 2) GTEST_SKIP() << "needs two " FLX_TEST_PLUGIN_NAME " devices";
  const flx_comm_id id = be->comm_id();
  const size_t n = 8;
  std::vector<std::vector<float>> got(8);  // per rank: sum, avg, max, min, broadcast from 1, reduce to 1
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    const Result r = attempt([&] {
      const flx_comm c = be->comm_init(rank, 2, rank, id);
      while (!be->comm_poll(c)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<double> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = double(i) + 10.0 * rank;  // rank 0: i, rank 1: i + 10
      const Bytes input = make(FLX_F32, v);
      std::vector<float> out;
      auto run = [&](int32_t kind, int32_t op, int32_t root) {
        DevBuf send(*be, rank, input), recv(*be, rank, Bytes(n * 4, 0));
        be->collective(rank, c, collective(kind, FLX_F32, op, n, send.mem(), recv.mem(), root));
        const Bytes b = recv.read();
        for (size_t i = 0; i < n; ++i) out.push_back(float(value_at(FLX_F32, b, i)));
      };
      for (int32_t op = FLX_COMM_SUM; op <= FLX_COMM_AVG; ++op) run(FLX_COLLECTIVE_ALLREDUCE, op, 0);
      run(FLX_COLLECTIVE_BROADCAST, 0, 1);
      run(FLX_COLLECTIVE_REDUCE, FLX_COMM_SUM, 1);
      got[size_t(rank)] = out;
      be->comm_destroy(c);
    });
    errors[size_t(rank)] = r.err;
  };
  std::thread r1(rank_main, 1);
  rank_main(0);
  r1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<float>& o = got[size_t(rank)];
    ASSERT_EQ(o.size(), 6 * n);
    for (size_t i = 0; i < n; ++i) {
      const float x = float(i);
      EXPECT_EQ(o[0 * n + i], 2 * x + 10) << "sum, rank " << rank;
      EXPECT_EQ(o[1 * n + i], x + 5) << "avg, rank " << rank;
      EXPECT_EQ(o[2 * n + i], x + 10) << "max, rank " << rank;
      EXPECT_EQ(o[3 * n + i], x) << "min, rank " << rank;
      EXPECT_EQ(o[4 * n + i], x + 10) << "broadcast from rank 1, rank " << rank;
      EXPECT_EQ(o[5 * n + i], rank == 1 ? 2 * x + 10 : 0.0f) << "reduce to rank 1, rank " << rank;
    }
  }
}

// ---- the optional core calls of minor 4 -----------------------------------------------

TEST_F(PluginTest, EventQuery) {
  if (kIsCuda) EXPECT_TRUE(be->has_event_query()) << "the CUDA plugin has event_query";
  flx_event e = be->event_create(0);
  if (!be->has_event_query()) {
    const std::string m = not_implemented([&] { be->event_query(0, e); });
    EXPECT_TRUE(has(m, "event_query cannot run on " FLX_TEST_PLUGIN_NAME)) << m;
    EXPECT_TRUE(has(m, FLX_TEST_PLUGIN_MINOR < 4 ? "predates the core call `event_query`, which came with ABI 2.4"
                                                 : "has no core call `event_query` (optional, from ABI 2.4)"))
        << m;
    be->event_destroy(0, e);
    return;
  }
  EXPECT_TRUE(be->event_query(0, e)) << "never recorded: done";
  // Work enough to take a while, then poll: done before long, and done after a synchronize.
  const size_t n = 1 << 24;
  DevBuf x(*be, 0, Bytes(n * 4, 0));
  flx_map_desc d = unary_map(FLX_OP_EXP, FLX_F32, int64_t(n), x.mem(), x.mem());
  for (int i = 0; i < 20; ++i) be->map(0, d);
  be->event_record(0, e);
  bool seen_pending = false, done = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(done = be->event_query(0, e)) && std::chrono::steady_clock::now() < deadline) seen_pending = true;
  EXPECT_TRUE(done) << "the work before the record was not done after 60 s";
  be->event_synchronize(0, e);
  EXPECT_TRUE(be->event_query(0, e));
  // A later launch check does not see the query's "not ready".
  be->map(0, d);
  be->synchronize(0);
  RecordProperty("event_query_saw_pending", seen_pending ? "yes" : "no");
  be->event_destroy(0, e);
}

TEST_F(PluginTest, DeviceAddress) {
  DevBuf x(*be, 0, Bytes(64));
  void* base = be->device_address(0, x.mem());
  if (!kIsCuda) {
    EXPECT_EQ(base, nullptr) << FLX_TEST_PLUGIN_NAME " buffers are not device pointers";
    return;
  }
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(be->device_address(0, x.mem(24)), static_cast<char*>(base) + 24);
  EXPECT_EQ(be->device_address(0, flx_mem{}), nullptr) << "no buffer, no address";
  EXPECT_BACKEND_ERROR(be->device_address(0, x.mem(65)), "invalid argument", "run past the buffer's 64 bytes");
  if (be->device_count() > 1)
    EXPECT_BACKEND_ERROR(be->device_address(1, x.mem()), "invalid argument", "belongs to CUDA device 0");
}

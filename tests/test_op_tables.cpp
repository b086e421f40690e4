// A table beyond compute, end to end, against two throwaway plugins built
// from tests/plugins/host_plugin.c and loaded from FLX_BACKEND_PATH:
//   Metal   built at this ABI minor; serves the "probe" table
//           (plugins/probe_table.h), which no libflx knows, and no compute
//   AMDGPU  built against the headers of ABI 2.2 as they were
//           (plugins/abi_2_2): a compute table with fill and map (Float32
//           negation), and no probe table
// The test declares the probe table as libflx declares its own
// (backends/backend_common/backend_tables.hpp) and runs an op through it with the
// dispatch layer's generic calls, workspace included. flx-info's listing of
// both is checked by ctest (flx_info_op_tables).
#include <dlfcn.h>

#include <string>

#include "backend/backend.hpp"
#include "backend/streams.hpp"
#include "cpu/cpu_backend.hpp"
#include "not_implemented.hpp"
#include "probe_table.h"
#include "tensor_impl.hpp"
#include "test_util.hpp"

// The probe table's declaration: what makes it usable from libflx's
// dispatch layer.
// clang-format off
#define FLX_PROBE_CALLS(X, ...) \
  X(scale, 3, required, __VA_ARGS__) X(scale_workspace, 3, optional, __VA_ARGS__)
// clang-format on
FLX_DECLARE_TABLE(flx_probe_table, FLX_TABLE_PROBE, FLX_TABLE_PROBE_VERSION, 3, FLX_PROBE_CALLS)

using namespace flx;
using flx::testing::has;

namespace {

// The test op: factor * x through the probe table of x's backend, with the
// workspace its scale_workspace asks for (x contiguous).
Tensor probe_scale(const Tensor& x, double factor) {
  const detail::Backend& be = detail::be(x);
  const int dev = detail::dev(x);
  Tensor y = empty(x.dtype(), x.shape(), x.device());
  flx_probe_desc d{};
  d.struct_size = sizeof d;
  d.dtype = int32_t(x.dtype());
  d.n = x.numel();
  d.factor = factor;
  d.x = detail::mem(x);
  d.y = detail::mem(y);
  const auto table = be.look_up<flx_probe_table>();
  const detail::OpRef op{"probe_scale", x.dtype()};
  const detail::Scratch workspace = be.scratch<&flx_probe_table::scale_workspace>(table, op, dev, &d);
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  be.run<&flx_probe_table::scale>(table, op, dev, &d);
  return y;
}

const Device kProbe(BackendId::Metal, 0), kOld(BackendId::AMDGPU, 0);


using flx::testing::not_implemented;

// The Metal plugin's log of allocations, frees and probe calls.
struct ProbeLog {
  const char* (*log)() = nullptr;
  void (*clear)() = nullptr;
  ProbeLog() {
    void* h = dlopen(backend_status("Metal").plugin_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    log = reinterpret_cast<const char* (*)()>(dlsym(h, "flx_test_probe_log"));
    clear = reinterpret_cast<void (*)()>(dlsym(h, "flx_test_probe_log_clear"));
  }
};

}  // namespace

TEST(OpTables, BothPluginsLoadWithTheirTablesAndVersions) {
  BackendStatus probe = backend_status("Metal"), old = backend_status("AMDGPU");
  ASSERT_TRUE(probe.functional) << probe.reason;
  ASSERT_TRUE(old.functional) << old.reason;
  EXPECT_EQ(probe.abi, "2." + std::to_string(FLX_BACKEND_ABI_MINOR));
  EXPECT_EQ(probe.tables, std::vector<std::string>{"probe v1 (unknown to this libflx)"});
  EXPECT_EQ(old.abi, "2.2");
  EXPECT_EQ(old.tables, std::vector<std::string>{"compute v1 (lacks random, cast, reduce, gemm, gather, scatter_add, "
                                                 "permute, softmax, softmax_backward, optim_step)"});
}

TEST(OpTables, AnExtraTableServesItsOp) {
  const std::vector<float> v{1, -2, 3.5f, 0.25f, 8};
  Tensor y = probe_scale(tensor(v, {5}).to(kProbe), 2.5);
  EXPECT_EQ(y.device(), kProbe);
  EXPECT_EQ(y.to(Device::cpu()).to_vector<float>(), (std::vector<float>{2.5f, -5, 8.75f, 0.625f, 20}));
  // The table as the dispatch layer finds it: served, both calls set.
  const auto t = detail::backend_of(kProbe).look_up<flx_probe_table>();
  EXPECT_TRUE(t.served);
  EXPECT_NE(t.calls.scale, nullptr);
  EXPECT_NE(t.calls.scale_workspace, nullptr);
}

TEST(OpTables, APluginOfAnOlderMinorRaisesNotImplementedNamingTheTable) {
  Tensor x = tensor(std::vector<float>{1, -2, 3}, {3}).to(kOld);
  const std::string m = not_implemented([&] { probe_scale(x, 2.5); });
  EXPECT_TRUE(has(m, "probe_scale of Float32 cannot run on AMDGPU: its backend (plugin ")) << m;
  EXPECT_TRUE(has(m, "libflx_backend_amdgpu.so, ABI 2.2) provides no \"probe\" table version 1 (the table came "
                     "with ABI 2.3)"))
      << m;
  EXPECT_TRUE(has(m, "Update the plugin")) << m;
  // What it has works: memory, copies, and its map's one op.
  flx::testing::expect_values(-x, {-1, 2, -3});
}

// Every "cannot" is a NotImplemented naming the op, the dtype and the
// backend: an op the backend answers FLX_ERR_UNSUPPORTED for, and an op
// code newer than its minor, which libflx refuses without calling it (its
// map would answer "negates ... and does nothing else").
TEST(OpTables, UnsupportedAnswersAndNewerOpCodesAreNotImplemented) {
  Tensor x = tensor(std::vector<float>{1, -2, 3}, {3}).to(kOld);
  std::string m = not_implemented([&] { exp(x); });
  EXPECT_TRUE(has(m, "exp of Float32 cannot run on AMDGPU: its backend (plugin ")) << m;
  EXPECT_TRUE(has(m, "ABI 2.2) answered unsupported: this test backend negates contiguous Float32 "
                     "vectors, and does nothing else"))
      << m;
  m = not_implemented([&] { softsign(x); });
  EXPECT_TRUE(has(m, "softsign of Float32 cannot run on AMDGPU: its backend (plugin ")) << m;
  EXPECT_TRUE(has(m, "ABI 2.2) predates op code 21 (softsign), which came with ABI 2.3")) << m;
  EXPECT_FALSE(has(m, "negates")) << m;
  m = not_implemented([&] { flx::sin(x); });
  EXPECT_TRUE(has(m, "predates op code 22 (sin), which came with ABI 2.8")) << m;
  // The same for a call of the new table: the probe plugin takes Float32 only.
  m = not_implemented([&] { probe_scale(tensor(std::vector<double>{1, 2}, {2}).to(kProbe), 2); });
  EXPECT_TRUE(has(m, "probe_scale of Float64 cannot run on Metal: its backend (plugin ")) << m;
  EXPECT_TRUE(has(m, "answered unsupported: probe scale takes Float32 only")) << m;
  // A table the probe plugin lacks (compute), and one of its calls it has.
  m = not_implemented([&] { (tensor(std::vector<float>{1, 2}, {2}).to(kProbe)) * 2.0; });
  EXPECT_TRUE(has(m, "mul of Float32 cannot run on Metal")) << m;
  EXPECT_TRUE(has(m, "provides no \"compute\" table version 1")) << m;
}

// The workspace protocol (scratch.hpp) on a table other than compute:
// allocated on the call's stream for the bytes the backend asked for, then
// freed on that stream right after the call (so after the stream passed it).
TEST(OpTables, TheWorkspaceIsAllocatedAndFreedOnTheCallsStream) {
  const ProbeLog probe;
  ASSERT_TRUE(probe.log && probe.clear) << "the Metal plugin exports its log";
  const detail::Backend& be = detail::backend_of(kProbe);
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {4}).to(kProbe);
  flx_stream s = be.stream_create(0);
  {
    detail::StreamGuard on_s(BackendId::Metal, 0, s);
    probe.clear();
    Tensor y = probe_scale(x, -1);
    EXPECT_EQ(std::string(probe.log()), "alloc 16 s1; alloc 16 s1; probe scale workspace 16 s1; free 16 s1");
    EXPECT_EQ(y.to(Device::cpu()).to_vector<float>(), (std::vector<float>{-1, -2, -3, -4}));
  }
  be.stream_destroy(0, s);
}

// A required call is required from the minor that brought it: a plugin of
// ABI 2.3 without list_tables is incomplete (not functional, saying why); one
// of 2.2 is not asked for it.
TEST(OpTables, RequiredCoreCallsAreRequiredFromTheirMinorOn) {
  flx_backend core = *cpu_backend::core();
  core.list_tables = nullptr;
  std::string reason;
  EXPECT_EQ(detail::Backend(BackendId::Metal, &core, "a test table").functional(&reason), 0);
  EXPECT_TRUE(has(reason, "lacks the core call `list_tables`, which every backend of ABI 2.3 or later must provide; "
                          "the plugin is incomplete"))
      << reason;
  core.abi_minor = 2;
  core.struct_size = uint32_t(offsetof(flx_backend, list_tables));
  EXPECT_GT(detail::Backend(BackendId::Metal, &core, "a test table").functional(&reason), 0) << reason;
}

// The comm table (minor 4) through the dispatch layer, on backends that do
// not serve it: the CPU (flx::distributed uses MPI there), which implements
// minor 4, and the plugin of ABI 2.2, before the table came. Every call of
// it is NotImplemented naming the table; comm_abort and comm_destroy have
// nothing to free and throw nothing. event_query (minor 4, optional): the
// CPU's events are always done; the 2.2 plugin predates the call.
TEST(OpTables, TheCommTableAndTheCoreCallsOfMinor4) {
  const detail::Backend& cpu = detail::backend_of(Device::cpu());
  const detail::Backend& old = detail::backend_of(kOld);
  EXPECT_FALSE(cpu.has_comm());
  EXPECT_FALSE(old.has_comm());
  std::string m = not_implemented([&] { cpu.comm_id(); });
  EXPECT_TRUE(has(m, "comm_id cannot run on CPU: its backend (built in, ABI 2." + std::to_string(FLX_BACKEND_ABI_MINOR) +
                        ") provides no \"comm\" table version 1. "))
      << m;
  m = not_implemented([&] { old.comm_init(0, 1, 0, flx_comm_id{}); });
  EXPECT_TRUE(has(m, "comm_init cannot run on AMDGPU: its backend (plugin ")) << m;
  EXPECT_TRUE(has(m, "ABI 2.2) provides no \"comm\" table version 1 (the table came with ABI 2.4)")) << m;
  flx_collective_desc d{};
  d.kind = FLX_COLLECTIVE_ALLREDUCE;
  d.dtype = FLX_F32;
  m = not_implemented([&] { cpu.collective(0, nullptr, d); });
  EXPECT_TRUE(has(m, "allreduce (sum) of Float32 cannot run on CPU")) << m;
  m = not_implemented([&] { cpu.comm_poll(nullptr); });
  EXPECT_TRUE(has(m, "comm_poll cannot run on CPU")) << m;
  cpu.comm_abort(nullptr);
  cpu.comm_destroy(nullptr);

  EXPECT_TRUE(cpu.has_event_query());
  flx_event e = cpu.event_create(0);
  cpu.event_record(0, e);
  EXPECT_TRUE(cpu.event_query(0, e));
  cpu.event_destroy(0, e);
  EXPECT_EQ(cpu.device_address(0, flx_mem{}), nullptr) << "the CPU has no device_address";
  EXPECT_FALSE(old.has_event_query());
  m = not_implemented([&] { old.event_query(0, nullptr); });
  EXPECT_TRUE(has(m, "event_query cannot run on AMDGPU")) << m;
  EXPECT_TRUE(has(m, "predates the core call `event_query`, which came with ABI 2.4")) << m;
}

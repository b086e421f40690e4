// A backend plugin through libflx's dispatch layer, as libflx loads it: the
// entry point and tables, devices, memory and copies, streams and events,
// fill, random and cast, each compared with the CPU backend. The compute
// primitives are in test_plugin_ops.cpp. Without a device every test but
// the first skips, saying why.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "plugin_harness.hpp"

using namespace plugintest;

#ifndef FLX_TEST_PLUGIN_COMM
#define FLX_TEST_PLUGIN_COMM 0  // the plugin serves the comm table (set by the build)
#endif
#ifndef FLX_TEST_PLUGIN_DNN
#define FLX_TEST_PLUGIN_DNN 0  // the plugin serves the dnn table (set by the build)
#endif

namespace {
// Reads function pointer `offset` of a table (no call: the tests call
// only through Backend).
bool entry_set(const void* table, size_t offset) {
  void* p;
  std::memcpy(&p, static_cast<const char*>(table) + offset, sizeof p);
  return p != nullptr;
}
}  // namespace

TEST(Plugin, EntryPointServesItsMajorVersionOnly) {
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  EXPECT_EQ(p.entry(FLX_BACKEND_ABI_MAJOR + 1, 0), nullptr);
  EXPECT_EQ(p.entry(FLX_BACKEND_ABI_MAJOR - 1, 0), nullptr);
  EXPECT_EQ(p.entry(0, 0), nullptr);
  // any minor version of its major, the same table
  EXPECT_EQ(p.entry(FLX_BACKEND_ABI_MAJOR, 0), p.core);
  EXPECT_EQ(p.entry(FLX_BACKEND_ABI_MAJOR, FLX_BACKEND_ABI_MINOR + 7), p.core);
  const flx_backend* f = p.core;
  EXPECT_EQ(f->abi_major, FLX_BACKEND_ABI_MAJOR);
  EXPECT_EQ(f->abi_minor, uint32_t(FLX_TEST_PLUGIN_MINOR));
  // The core table as long as its minor's layout: up to its last call.
  size_t size = 0;
  for (const flx::abi::CallDecl& c : flx::abi::Decl<flx_backend>::calls)
    if (c.name && c.since <= uint32_t(FLX_TEST_PLUGIN_MINOR)) size = c.offset + sizeof(void*);
  EXPECT_EQ(f->struct_size, size);
  EXPECT_EQ(f->reserved, 0u);
  EXPECT_STREQ(f->name, FLX_TEST_PLUGIN_NAME);
  EXPECT_STREQ(p.be->name(), FLX_TEST_PLUGIN_NAME);
  EXPECT_EQ(p.be->abi_version(), std::to_string(FLX_BACKEND_ABI_MAJOR) + "." + std::to_string(FLX_TEST_PLUGIN_MINOR));
  std::string reason = "x";
  int score = p.be->functional(&reason);
  if (score > 0) {
    EXPECT_EQ(reason, "");
    EXPECT_GE(p.be->device_count(), 1);
  } else {
    EXPECT_FALSE(reason.empty()) << "not functional, so a reason is due";
    EXPECT_EQ(p.be->device_count(), 0);
  }
}

TEST(Plugin, EveryCoreAndComputeEntryIsSet) {
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  // Every required core call of its minor (the optional ones, such as
  // release_cached for a plugin without a cache, may be NULL).
  for (const flx::abi::CallDecl& c : flx::abi::Decl<flx_backend>::calls)
    if (c.name && c.need == flx::abi::Need::required && c.since <= uint32_t(FLX_TEST_PLUGIN_MINOR))
      EXPECT_TRUE(entry_set(p.core, c.offset)) << "core call " << c.name;
  // The compute table, with every required function (the optional ones,
  // such as reduce_workspace, are checked by what they do), then the comm
  // table where the plugin has one (test_plugin_comm.cpp checks it), the dnn
  // table where it has one, the fused table from minor 14 (FusedTable.*
  // checks what it runs), and no other table: as the plugin lists them
  // (minor 3), and as libflx finds them.
  auto tables = p.be->tables();
  ASSERT_EQ(tables.size(), 1u + (FLX_TEST_PLUGIN_COMM ? 1u : 0u) + (FLX_TEST_PLUGIN_DNN ? 1u : 0u) +
                               (FLX_TEST_PLUGIN_MINOR >= 14 ? 1u : 0u));
  EXPECT_EQ(tables[0].name, FLX_TABLE_COMPUTE);
  EXPECT_EQ(tables[0].version, FLX_TABLE_COMPUTE_VERSION);
  EXPECT_TRUE(tables[0].known);
  std::string missing;
  for (const std::string& f : tables[0].missing) missing += " " + f;
  EXPECT_TRUE(tables[0].missing.empty()) << "compute functions left NULL:" << missing;
  EXPECT_EQ(tables[0].listed, FLX_TEST_PLUGIN_MINOR >= 3) << "list_tables (minor 3) names the compute table";
}

TEST_F(PluginTest, DevicesAreListedWithProperties) {
  int n = be->device_count();
  ASSERT_GE(n, 1);
  EXPECT_GE(n, min_devices()) << "FLX_TEST_PLUGIN_MIN_DEVICES asks for more devices";
  for (int i = 0; i < n; ++i) {
    flx_device_props p = be->device_props(i);
    EXPECT_GT(std::strlen(p.name), 0u);
    EXPECT_TRUE(p.kind == FLX_DEVICE_CPU || p.kind == FLX_DEVICE_GPU || p.kind == FLX_DEVICE_ACCELERATOR);
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_LE(p.free_memory, p.total_memory);
  }
  const std::string ordinal = std::to_string(n);
  EXPECT_BACKEND_ERROR(be->device_props(n), "invalid argument", ordinal.c_str());
  EXPECT_BACKEND_ERROR(be->alloc(-1, 16), "invalid argument");
}

TEST_F(PluginTest, CopiesHonourOffsets) {
  Bytes data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 1);
  DevBuf a(*be, 0, Bytes(64, 0)), b(*be, 0, Bytes(64, 0xee));
  // Not host memory, or host memory that holds the buffer's bytes.
  if (void* h = be->host_address(0, a.b)) {
    be->copy_h2d(0, a.mem(), data.data(), 64);
    be->synchronize(0);
    EXPECT_EQ(std::memcmp(h, data.data(), 64), 0);
    be->fill(0, a.mem(), flx::UInt8, 64, 0);
  }
  // h2d at an offset, d2d between offsets, d2h from an offset
  be->copy_h2d(0, a.mem(8), data.data(), 40);
  be->copy_d2d(0, b.mem(16), a.mem(12), 20);
  Bytes out(10);
  be->copy_d2h(0, out.data(), b.mem(20), 10);
  be->synchronize(0);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i], data[8 + i]) << i;  // b[20+i] = a[16+i] = data[8+i]
  Bytes bb = b.read();
  EXPECT_EQ(bb[15], 0xee);
  EXPECT_EQ(bb[36], 0xee);
  // overlapping d2d within one buffer behaves as memmove
  be->copy_d2d(0, a.mem(12), a.mem(8), 30);
  Bytes aa = a.read();
  for (size_t i = 0; i < 30; ++i) EXPECT_EQ(aa[12 + i], data[i]) << i;
  // zero bytes is a no-op; past the end is an error with a message, the
  // same on every backend (a CUDA pool allocation lies inside a larger
  // mapped segment, so the driver would not refuse it)
  be->copy_h2d(0, a.mem(64), data.data(), 0);
  const char* past = "run past the buffer's 64 bytes";
  EXPECT_BACKEND_ERROR(be->copy_h2d(0, a.mem(60), data.data(), 8), "invalid argument", "8 bytes at offset 60", past);
  EXPECT_BACKEND_ERROR(be->copy_d2h(0, out.data(), a.mem(56), 10), "invalid argument", past);
  EXPECT_BACKEND_ERROR(be->copy_d2d(0, b.mem(0), a.mem(32), 33), "invalid argument", past);
  EXPECT_BACKEND_ERROR(be->copy_d2d(0, b.mem(40), a.mem(0), 25), "invalid argument", past);
  EXPECT_BACKEND_ERROR(be->copy_peer(0, b.mem(40), 0, a.mem(0), 25), "invalid argument", past);
  EXPECT_BACKEND_ERROR(be->fill(0, a.mem(8), flx::Float32, 15, 1.0), "invalid argument", past);
  EXPECT_BACKEND_ERROR(be->copy_h2d(0, a.mem(65), data.data(), 1), "invalid argument", past);
  EXPECT_EQ(b.read(), bb) << "a refused copy writes nothing";
  // a null host pointer with bytes to copy is refused, here and on the CPU
  EXPECT_BACKEND_ERROR(be->copy_h2d(0, a.mem(0), nullptr, 8), "invalid argument", "null pointer");
  EXPECT_BACKEND_ERROR(be->copy_d2h(0, nullptr, a.mem(0), 8), "invalid argument", "null pointer");
  DevBuf host_side(cpu(), 0, Bytes(8));
  EXPECT_BACKEND_ERROR(cpu().copy_h2d(0, host_side.mem(), nullptr, 8), "invalid argument", "null pointer");
  EXPECT_BACKEND_ERROR(cpu().copy_d2h(0, nullptr, host_side.mem(), 8), "invalid argument", "null pointer");
  be->copy_h2d(0, a.mem(0), nullptr, 0);  // nothing to read: a no-op
  // same-device copy_peer
  be->copy_peer(0, b.mem(0), 0, a.mem(8), 4);
  EXPECT_EQ(b.read()[0], data[0]);
}

TEST_F(PluginTest, AnAllocationTooLargeIsOutOfMemory) {
  try {
    flx_buffer b = be->alloc(0, size_t(1) << 62);
    be->free(0, b);
    ADD_FAILURE() << "a 4 EiB allocation succeeded";
  } catch (const flx::OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find(FLX_TEST_PLUGIN_NAME), std::string::npos) << e.what();
  }
  DevBuf ok(*be, 0, Bytes(16, 1));  // and the device still allocates
  EXPECT_EQ(ok.read(), Bytes(16, 1));
}

// alloc and free are stream-ordered: freeing a buffer that enqueued work
// still reads must not disturb that work.
TEST_F(PluginTest, FreeWhileWorkIsEnqueuedIsSafe) {
  const int64_t n = 1 << 20;
  std::vector<double> v = grid_values(size_t(n), -4, 4, 0.5, 12);
  DevBuf y(*be, 0, Bytes(size_t(n) * 4));
  for (int round = 0; round < 3; ++round) {
    flx_buffer x = be->alloc(0, size_t(n) * 4);
    be->copy_h2d(0, {x, 0}, make(FLX_F32, v).data(), size_t(n) * 4);
    flx_map_desc d = unary_map(FLX_OP_SQUARE, FLX_F32, n, {x, 0}, y.mem());
    for (int i = 0; i < 4; ++i) be->map(0, d);
    be->free(0, x);  // before the maps have run
    // new allocations may take its place at once
    DevBuf z(*be, 0, Bytes(size_t(n) * 4, 0xff));
    Bytes out = y.read();
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(value_at(FLX_F32, out, size_t(i)), v[size_t(i)] * v[size_t(i)]) << i;
  }
}

TEST_F(PluginTest, PinnedMemoryStreamsAndEvents) {
  const size_t n = 1000;
  void* h = be->host_alloc(n * 4);
  ASSERT_NE(h, nullptr);
  float* hp = static_cast<float*>(h);
  for (size_t i = 0; i < n; ++i) hp[i] = float(i) * 0.5f;
  flx_stream s = be->stream_create(0);
  flx_event e = be->event_create(0);
  be->event_synchronize(0, e);  // never recorded: complete
  DevBuf x(*be, 0, Bytes(n * 4)), y(*be, 0, Bytes(n * 4));
  {  // async upload on the side stream, then the default stream waits for it
    StreamGuard g(id, 0, s);
    be->copy_h2d(0, x.mem(), h, n * 4);
    be->event_record(0, e);
  }
  be->stream_wait_event(0, e);
  flx_map_desc d = unary_map(FLX_OP_NEG, FLX_F32, int64_t(n), x.mem(), y.mem());
  be->map(0, d);
  be->event_record(0, e);
  {
    StreamGuard g(id, 0, s);
    be->stream_wait_event(0, e);
    be->copy_d2h(0, h, y.mem(), n * 4);
    be->event_record(0, e);
  }
  be->event_synchronize(0, e);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hp[i], -float(i) * 0.5f) << i;
  {
    StreamGuard g(id, 0, s);
    be->synchronize(0);
  }
  be->event_destroy(0, e);
  be->stream_destroy(0, s);
  be->host_free(h);
}

TEST_F(PluginTest, PeerCopyBetweenTwoDevices) {
  if (be->device_count() < 2) GTEST_SKIP() << "needs two " FLX_TEST_PLUGIN_NAME " devices";
  std::vector<double> v = grid_values(50, -5, 5, 0.125, 3);
  Bytes data = make(FLX_F32, v);
  DevBuf a(*be, 0, data), b(*be, 1, Bytes(data.size() + 16, 0)), c(*be, 0, Bytes(data.size(), 0));
  be->copy_peer(1, b.mem(16), 0, a.mem(8), data.size() - 8);
  // compute on device 1, then bring the result back to device 0
  flx_map_desc d = unary_map(FLX_OP_SQUARE, FLX_F32, int64_t(v.size() - 2), b.mem(16), b.mem(16));
  be->map(1, d);
  be->copy_peer(0, c.mem(0), 1, b.mem(16), data.size() - 8);
  be->synchronize(1);
  Bytes out = c.read();
  for (size_t i = 0; i + 2 < v.size(); ++i) EXPECT_EQ(value_at(FLX_F32, out, i), v[i + 2] * v[i + 2]) << i;
  // On a side stream of the source device: ordered after the work on it.
  flx_stream s = be->stream_create(0);
  {
    StreamGuard g(id, 0, s);
    be->fill(0, a.mem(), flx::Float32, v.size(), 2.5);
    be->copy_peer(1, b.mem(0), 0, a.mem(), data.size());
    be->synchronize(0);
  }
  be->synchronize(1);
  Bytes bb = b.read();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(value_at(FLX_F32, bb, i), 2.5) << i;
  be->stream_destroy(0, s);
}

// Several host threads launching at once (on every device, each on its own
// stream): kernel arguments and lazy program builds must not race.
TEST_F(PluginTest, ConcurrentLaunchesFromSeveralThreads) {
  const int ndev = be->device_count();
  const int64_t n = 257;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      int dev = th % ndev;
      Result r = attempt([&] {
        flx_stream s = be->stream_create(dev);
        StreamGuard g(id, dev, s);  // the current stream is per thread
        flx_buffer b = be->alloc(dev, size_t(n) * 4);
        be->fill(dev, {b, 0}, flx::Int32, size_t(n), th);
        flx_map_desc d{};
        d.op = FLX_OP_ADD;
        d.ndim = 1;
        d.shape[0] = n;
        d.ninputs = 2;
        d.in_dtype = d.out_dtype = FLX_I32;
        d.in[0].mem = {b, 0};
        d.in[0].strides[0] = 1;
        d.in[1].is_scalar = 1;
        d.in[1].scalar = 1;
        d.out = {b, 0};
        for (int i = 0; i < 40; ++i) {
          flx_map_desc di = d;
          be->map(dev, di);
        }
        std::vector<int32_t> out(static_cast<size_t>(n));
        be->copy_d2h(dev, out.data(), {b, 0}, size_t(n) * 4);
        be->synchronize(dev);
        for (int32_t v : out)
          if (v != th + 40) throw flx::BackendError("thread " + std::to_string(th) + " read " + std::to_string(v));
        be->free(dev, b);
        be->stream_destroy(dev, s);
      });
      failures[size_t(th)] = r.err;
    });
  for (auto& t : threads) t.join();
  for (int th = 0; th < 4; ++th) EXPECT_EQ(failures[size_t(th)], "") << "thread " << th;
}

TEST_F(PluginTest, FillMatchesTheCpuForEveryDtype) {
  for (int32_t t : all_dtypes()) {
    // NaN, either sign, into floating dtypes: the CPU's bits (0x7E00 / 0x7FC0 with the sign in the halves)
    for (double value : {2.75, 0.0, 1.0, -3.25, std::nan(""), -std::nan("")}) {
      if (value < 0 && (t == FLX_U8)) continue;  // out of range for UInt8
      if (std::isnan(value) && !dfloat(t)) continue;
      SCOPED_TRACE(std::string(dname(t)) + " value " + std::to_string(value));
      size_t es = dsize(t);
      Bytes init = make(t, values_for(t, 16, 1));
      Outcome o = run_both(*be, {init}, [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
        flx_mem dst = m[0];
        dst.offset = 3 * es;  // elements 3..12; the rest keeps its values
        b.fill(dev, dst, dt(t), 10, value);
      });
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      EXPECT_TRUE(bitwise(o.cpu_out[0], o.dev_out[0]));
    }
  }
}

TEST_F(PluginTest, RandomIsTheCpuSequence) {
  const size_t n = 1000;
  for (int32_t t : float_dtypes()) {
    for (int dist : {FLX_RANDOM_UNIFORM, FLX_RANDOM_NORMAL}) {
      SCOPED_TRACE(std::string(dname(t)) + (dist ? " normal" : " uniform"));
      double a = dist ? 0.5 : -2.0, b = dist ? 2.0 : 3.0;
      Outcome o = run_both(*be, {Bytes((n + 4) * dsize(t))},
                           [&](const Backend& bk, int dev, const std::vector<flx_mem>& m) {
                             flx_mem dst = m[0];
                             dst.offset = 4 * dsize(t);
                             bk.random(dev, dst, dt(t), n, dist, 0x1234abcdULL, 77, a, b);
                           });
      ASSERT_TRUE(o.cpu.ok) << o.cpu.err;
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      // Without fp64 the plugin may draw in float arithmetic: in range, not the CPU's bits.
      if (dist == FLX_RANDOM_UNIFORM) {
        // the same bits: Philox with the same (seed, offset, i), the same double arithmetic
        if (fp64) {
          EXPECT_TRUE(bitwise(o.cpu_out[0], o.dev_out[0]));
        }
        for (size_t i = 4; i < n + 4; ++i) {
          double v = value_at(t, o.dev_out[0], i);
          ASSERT_TRUE(v >= a && v < b) << i << ": " << v;
        }
      } else if (fp64) {
        EXPECT_TRUE(close(t, o.cpu_out[0], o.dev_out[0]));
      }
    }
  }
  // a different offset gives different numbers; integers are refused as on the CPU
  DevBuf x(*be, 0, Bytes(64 * 4)), y(*be, 0, Bytes(64 * 4));
  be->random(0, x.mem(), flx::Float32, 64, 0, 9, 1, 0, 1);
  be->random(0, y.mem(), flx::Float32, 64, 0, 9, 2, 0, 1);
  EXPECT_NE(x.read(), y.read());
  EXPECT_BACKEND_ERROR(be->random(0, x.mem(), flx::Int32, 64, 0, 9, 1, 0, 1), "unsupported", "Int32");
  EXPECT_FALSE(attempt([&] { cpu().random(0, x.mem(), flx::Int32, 64, 0, 9, 1, 0, 1); }).ok);
}

// NaN parameters make NaN numbers; in Float16 and BFloat16 they are stored
// with the CPU's bits (the arithmetic is in double, +NaN stays positive).
TEST_F(PluginTest, RandomWithANanParameterStoresTheCpusNan) {
  const size_t n = 40;
  for (int32_t t : float_dtypes())
    for (int dist : {FLX_RANDOM_UNIFORM, FLX_RANDOM_NORMAL}) {
      SCOPED_TRACE(std::string(dname(t)) + (dist ? " normal" : " uniform"));
      const double a = dist ? 0.0 : std::nan(""), b = dist ? std::nan("") : 1.0;
      Outcome o = run_both(*be, {Bytes(n * dsize(t))}, [&](const Backend& bk, int dev, const std::vector<flx_mem>& m) {
        bk.random(dev, m[0], dt(t), n, dist, 7, 1, a, b);
      });
      ASSERT_TRUE(o.cpu.ok) << o.cpu.err;
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(value_at(t, o.dev_out[0], i))) << i;
      if (t == FLX_F16 || t == FLX_BF16) {
        EXPECT_TRUE(bitwise(o.cpu_out[0], o.dev_out[0]));
        EXPECT_TRUE(is_stored_half_nan(t, half_bits(o.dev_out[0], 0))) << std::hex << half_bits(o.dev_out[0], 0);
      }
    }
}

// Uniform draws rounded to a half type can round up to the excluded bound:
// about 1 in 4000 for Float16, 1 in 500 for BFloat16. 10^6 draws on the
// device (factories fill on the CPU; this is the device's generator) must
// all stay below it, and reach the largest value below it.
TEST_F(PluginTest, UniformDrawsInHalfTypesStayBelowTheirBound) {
  constexpr size_t n = 1'000'000;
  for (int32_t t : {FLX_F16, FLX_BF16}) {
    SCOPED_TRACE(dname(t));
    DevBuf x(*be, 0, Bytes(n * 2));
    be->random(0, x.mem(), dt(t), n, FLX_RANDOM_UNIFORM, 0x5eed, 3, 0.0, 1.0);
    const Bytes out = x.read();
    double hi = 0;
    size_t at_bound = 0;
    for (size_t i = 0; i < n; ++i) {
      const double v = value_at(t, out, i);
      hi = std::max(hi, v);
      at_bound += v >= 1.0;
    }
    EXPECT_EQ(at_bound, 0u) << "draws equal to the excluded bound 1.0";
    EXPECT_EQ(hi, t == FLX_F16 ? 1.0 - 0x1p-11 : 1.0 - 0x1p-8);
  }
}

// Values every target can hold, so each conversion is defined in C++.
static std::vector<double> cast_values(int32_t src, int32_t dst) {
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back((i % 23) * 4.25 + (i % 3) * 0.5);
  bool src_signed = src != FLX_U8 && src != FLX_BOOL, dst_signed = dst != FLX_U8;
  if (src_signed && dst_signed)
    for (double x : {-1.0, -2.5, -7.75, -0.0, -97.0}) v.push_back(x);
  if (dfloat(src) && dfloat(dst))  // rounding, subnormal halves, overflow, NaN
    for (double x : {1.0 / 3, 1e-6, 6e-8, 3e-5, 70000.0, 65519.0, 1e300, -1e-300, std::nan(""), 2049.0, 1.00390625})
      v.push_back(x);
  if (src == FLX_I64 && dfloat(dst))
    for (double x : {1099511627777.0, -1125899906842627.0, 16777217.0}) v.push_back(x);
  if (src == FLX_I32 && dfloat(dst)) v.push_back(16777217.0);
  if (src == FLX_BOOL) for (double& x : v) x = x != 0;
  return v;
}

TEST_F(PluginTest, CastMatchesTheCpuForEveryPairOfDtypes) {
  for (int32_t s : all_dtypes())
    for (int32_t d : all_dtypes()) {
      SCOPED_TRACE(std::string(dname(s)) + " -> " + dname(d));
      std::vector<double> v = cast_values(s, d);
      Bytes src = make(s, v);
      Outcome o = run_both(*be, {src, Bytes(v.size() * dsize(d), 0)},
                           [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
                             b.cast(dev, m[1], dt(d), m[0], dt(s), v.size());
                           });
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      EXPECT_TRUE(bitwise(o.cpu_out[1], o.dev_out[1])) << close(d, o.cpu_out[1], o.dev_out[1]).message();
    }
}

// NaNs of every kind (nan_patterns: signalling, payloads, either sign)
// between the floating dtypes: the CPU's bits, NaN and not. Into the halves
// a NaN is quiet without payload, its sign kept.
TEST_F(PluginTest, CastGivesNanTheCpusBits) {
  FLX_SKIP_BEFORE_NAN_BITS_RULE();
  for (int32_t s : float_dtypes())
    for (int32_t d : float_dtypes()) {
      SCOPED_TRACE(std::string(dname(s)) + " -> " + dname(d));
      const Bytes src = nan_patterns(s);
      const size_t n = src.size() / dsize(s);
      Outcome o = run_both(*be, {src, Bytes(n * dsize(d), 0)},
                           [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
                             b.cast(dev, m[1], dt(d), m[0], dt(s), n);
                           });
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      EXPECT_TRUE(bitwise(o.cpu_out[1], o.dev_out[1]));
      if (d == FLX_F16 || d == FLX_BF16)
        for (size_t i = 0; i < 7; ++i) {  // the NaNs
          EXPECT_TRUE(is_stored_half_nan(d, half_bits(o.dev_out[1], i))) << i << ": " << std::hex << half_bits(o.dev_out[1], i);
          EXPECT_EQ(half_bits(o.dev_out[1], i) & 0x8000, i % 2 ? 0x8000 : 0) << i << ": the sign is kept";
        }
    }
}

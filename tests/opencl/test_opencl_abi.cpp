// The OpenCL plugin through its C ABI, as libflx loads it: the table, devices,
// memory and copies, streams and events, fill, random and cast, each compared
// with the CPU backend. The compute primitives are in test_opencl_ops.cpp.
// Without an OpenCL device every test skips, saying why.
#include <cstdlib>
#include <string>
#include <thread>

#include "opencl_harness.hpp"

using namespace ocltest;

TEST(OpenCLPlugin, EntryPointChecksTheAbiVersion) {
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  EXPECT_EQ(p.entry(FLX_BACKEND_API_VERSION + 1), nullptr);
  EXPECT_EQ(p.entry(0), nullptr);
  const flx_backend_iface* f = p.entry(FLX_BACKEND_API_VERSION);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->api_version, FLX_BACKEND_API_VERSION);
  EXPECT_EQ(f->struct_size, sizeof(flx_backend_iface));
  EXPECT_STREQ(f->name, "OpenCL");
  // Every entry of the table is implemented.
  const void* fns[] = {
      (void*)f->functional,  (void*)f->device_count,     (void*)f->device_props,    (void*)f->last_error,
      (void*)f->alloc,       (void*)f->free,             (void*)f->host_address,    (void*)f->host_alloc,
      (void*)f->host_free,   (void*)f->stream_create,    (void*)f->stream_destroy,  (void*)f->stream_synchronize,
      (void*)f->event_create, (void*)f->event_destroy,   (void*)f->event_record,    (void*)f->stream_wait_event,
      (void*)f->event_synchronize, (void*)f->copy_h2d,   (void*)f->copy_d2h,        (void*)f->copy_d2d,
      (void*)f->copy_peer,   (void*)f->fill,             (void*)f->random,          (void*)f->cast,
      (void*)f->map,         (void*)f->reduce,           (void*)f->gemm,            (void*)f->gather,
      (void*)f->scatter_add, (void*)f->permute,          (void*)f->softmax,         (void*)f->softmax_backward,
      (void*)f->optim_step};
  static_assert(sizeof fns / sizeof fns[0] == (sizeof(flx_backend_iface) - offsetof(flx_backend_iface, functional)) /
                                                  sizeof(void*));
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) EXPECT_NE(fns[i], nullptr) << "entry " << i;
  char reason[256] = "x";
  int score = f->functional(f->ctx, reason, sizeof reason);
  if (score > 0) {
    EXPECT_STREQ(reason, "");
    EXPECT_GE(f->device_count(f->ctx), 1);
  } else {
    EXPECT_GT(std::strlen(reason), 0u) << "not functional, so a reason is due";
    EXPECT_EQ(f->device_count(f->ctx), 0);
  }
}

TEST_F(OpenCL, DevicesAreListedWithProperties) {
  int n = ocl->device_count(ocl->ctx);
  ASSERT_GE(n, 1);
  const char* env = std::getenv("POCL_DEVICES");
  if (env && std::string(env) == "pthread pthread") EXPECT_GE(n, 2) << "POCL_DEVICES asks for two PoCL devices";
  for (int i = 0; i < n; ++i) {
    flx_device_props p;
    ASSERT_EQ(ocl->device_props(ocl->ctx, i, &p), FLX_OK) << err();
    EXPECT_GT(std::strlen(p.name), 0u);
    EXPECT_TRUE(p.kind == FLX_DEVICE_CPU || p.kind == FLX_DEVICE_GPU || p.kind == FLX_DEVICE_ACCELERATOR);
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_LE(p.free_memory, p.total_memory);
  }
  flx_device_props p;
  EXPECT_EQ(ocl->device_props(ocl->ctx, n, &p), FLX_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("no OpenCL device"), std::string::npos) << err();
  flx_buffer b = nullptr;
  EXPECT_EQ(ocl->alloc(ocl->ctx, -1, 16, &b), FLX_ERR_INVALID_ARGUMENT);
}

TEST_F(OpenCL, BuffersAreNotHostAddressableAndCopiesHonourOffsets) {
  Bytes data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 1);
  DevBuf a(ocl, 0, Bytes(64, 0)), b(ocl, 0, Bytes(64, 0xee));
  EXPECT_EQ(ocl->host_address(ocl->ctx, 0, a.b), nullptr);
  // h2d at an offset, d2d between offsets, d2h from an offset
  ASSERT_EQ(ocl->copy_h2d(ocl->ctx, 0, a.mem(8), data.data(), 40, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->copy_d2d(ocl->ctx, 0, b.mem(16), a.mem(12), 20, nullptr), FLX_OK) << err();
  Bytes out(10);
  ASSERT_EQ(ocl->copy_d2h(ocl->ctx, 0, out.data(), b.mem(20), 10, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->stream_synchronize(ocl->ctx, 0, nullptr), FLX_OK);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i], data[8 + i]) << i;  // b[20+i] = a[16+i] = data[8+i]
  Bytes bb = b.read();
  EXPECT_EQ(bb[15], 0xee);
  EXPECT_EQ(bb[36], 0xee);
  // overlapping d2d within one buffer behaves as memmove
  ASSERT_EQ(ocl->copy_d2d(ocl->ctx, 0, a.mem(12), a.mem(8), 30, nullptr), FLX_OK) << err();
  Bytes aa = a.read();
  for (size_t i = 0; i < 30; ++i) EXPECT_EQ(aa[12 + i], data[i]) << i;
  // zero bytes is a no-op; past the end is an error with a message
  EXPECT_EQ(ocl->copy_h2d(ocl->ctx, 0, a.mem(64), data.data(), 0, nullptr), FLX_OK);
  EXPECT_EQ(ocl->copy_h2d(ocl->ctx, 0, a.mem(60), data.data(), 8, nullptr), FLX_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("past the buffer"), std::string::npos) << err();
  // same-device copy_peer
  ASSERT_EQ(ocl->copy_peer(ocl->ctx, 0, b.mem(0), 0, a.mem(8), 4, nullptr), FLX_OK) << err();
  EXPECT_EQ(b.read()[0], data[0]);
}

TEST_F(OpenCL, PinnedMemoryStreamsAndEvents) {
  const size_t n = 1000;
  void* h = nullptr;
  ASSERT_EQ(ocl->host_alloc(ocl->ctx, n * 4, &h), FLX_OK) << err();
  ASSERT_NE(h, nullptr);
  float* hp = static_cast<float*>(h);
  for (size_t i = 0; i < n; ++i) hp[i] = float(i) * 0.5f;
  flx_stream s = nullptr;
  ASSERT_EQ(ocl->stream_create(ocl->ctx, 0, &s), FLX_OK) << err();
  flx_event e = nullptr;
  ASSERT_EQ(ocl->event_create(ocl->ctx, 0, &e), FLX_OK) << err();
  EXPECT_EQ(ocl->event_synchronize(ocl->ctx, 0, e), FLX_OK);  // never recorded: complete
  DevBuf x(ocl, 0, Bytes(n * 4)), y(ocl, 0, Bytes(n * 4));
  // async upload on the side stream, then the default stream waits for it
  ASSERT_EQ(ocl->copy_h2d(ocl->ctx, 0, x.mem(), h, n * 4, s), FLX_OK) << err();
  ASSERT_EQ(ocl->event_record(ocl->ctx, 0, e, s), FLX_OK) << err();
  ASSERT_EQ(ocl->stream_wait_event(ocl->ctx, 0, nullptr, e), FLX_OK) << err();
  flx_map_desc d{};
  d.op = FLX_OP_NEG;
  d.ndim = 1;
  d.shape[0] = int64_t(n);
  d.ninputs = 1;
  d.in_dtype = d.out_dtype = FLX_F32;
  d.in[0].mem = x.mem();
  d.in[0].strides[0] = 1;
  d.out = y.mem();
  ASSERT_EQ(ocl->map(ocl->ctx, 0, &d, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->event_record(ocl->ctx, 0, e, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->stream_wait_event(ocl->ctx, 0, s, e), FLX_OK) << err();
  ASSERT_EQ(ocl->copy_d2h(ocl->ctx, 0, h, y.mem(), n * 4, s), FLX_OK) << err();
  ASSERT_EQ(ocl->event_record(ocl->ctx, 0, e, s), FLX_OK) << err();
  ASSERT_EQ(ocl->event_synchronize(ocl->ctx, 0, e), FLX_OK) << err();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hp[i], -float(i) * 0.5f) << i;
  ASSERT_EQ(ocl->stream_synchronize(ocl->ctx, 0, s), FLX_OK);
  ocl->event_destroy(ocl->ctx, 0, e);
  ocl->stream_destroy(ocl->ctx, 0, s);
  ocl->host_free(ocl->ctx, h);
}

TEST_F(OpenCL, PeerCopyBetweenTwoDevices) {
  if (ocl->device_count(ocl->ctx) < 2)
    GTEST_SKIP() << "needs two OpenCL devices; run with POCL_DEVICES=\"pthread pthread\"";
  std::vector<double> v = grid_values(50, -5, 5, 0.125, 3);
  Bytes data = make(FLX_F32, v);
  DevBuf a(ocl, 0, data), b(ocl, 1, Bytes(data.size() + 16, 0)), c(ocl, 0, Bytes(data.size(), 0));
  ASSERT_EQ(ocl->copy_peer(ocl->ctx, 1, b.mem(16), 0, a.mem(8), data.size() - 8, nullptr), FLX_OK) << err();
  // compute on device 1, then bring the result back to device 0
  flx_map_desc d{};
  d.op = FLX_OP_SQUARE;
  d.ndim = 1;
  d.shape[0] = int64_t(v.size() - 2);
  d.ninputs = 1;
  d.in_dtype = d.out_dtype = FLX_F32;
  d.in[0].mem = b.mem(16);
  d.in[0].strides[0] = 1;
  d.out = b.mem(16);
  ASSERT_EQ(ocl->map(ocl->ctx, 1, &d, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->copy_peer(ocl->ctx, 0, c.mem(0), 1, b.mem(16), data.size() - 8, nullptr), FLX_OK) << err();
  ASSERT_EQ(ocl->stream_synchronize(ocl->ctx, 1, nullptr), FLX_OK);
  Bytes out = c.read();
  for (size_t i = 0; i + 2 < v.size(); ++i) EXPECT_EQ(value_at(FLX_F32, out, i), v[i + 2] * v[i + 2]) << i;
}

// Several host threads launching at once (on every device, each on its own
// stream): kernel arguments and lazy program builds must not race.
TEST_F(OpenCL, ConcurrentLaunchesFromSeveralThreads) {
  const int ndev = ocl->device_count(ocl->ctx);
  const int64_t n = 257;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      int dev = th % ndev;
      flx_stream s = nullptr;
      if (ocl->stream_create(ocl->ctx, dev, &s) != FLX_OK) { ++failures[size_t(th)]; return; }
      flx_buffer b = nullptr;
      if (ocl->alloc(ocl->ctx, dev, size_t(n) * 4, &b) != FLX_OK) { ++failures[size_t(th)]; return; }
      ocl->fill(ocl->ctx, dev, {b, 0}, FLX_I32, size_t(n), th, s);
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
      for (int i = 0; i < 40; ++i)
        if (ocl->map(ocl->ctx, dev, &d, s) != FLX_OK) ++failures[size_t(th)];
      std::vector<int32_t> out(static_cast<size_t>(n));
      ocl->copy_d2h(ocl->ctx, dev, out.data(), {b, 0}, size_t(n) * 4, s);
      ocl->stream_synchronize(ocl->ctx, dev, s);
      for (int32_t v : out)
        if (v != th + 40) ++failures[size_t(th)];
      ocl->free(ocl->ctx, dev, b);
      ocl->stream_destroy(ocl->ctx, dev, s);
    });
  for (auto& t : threads) t.join();
  for (int th = 0; th < 4; ++th) EXPECT_EQ(failures[size_t(th)], 0) << "thread " << th;
}

TEST_F(OpenCL, FillMatchesTheCpuForEveryDtype) {
  for (int32_t t : all_dtypes()) {
    for (double value : {2.75, 0.0, 1.0, -3.25}) {
      if (value < 0 && (t == FLX_U8)) continue;  // out of range for UInt8
      SCOPED_TRACE(std::string(dname(t)) + " value " + std::to_string(value));
      size_t es = dsize(t);
      Bytes init = make(t, values_for(t, 16, 1));
      Outcome o = run_both(ocl, {init}, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
        flx_mem dst = m[0];
        dst.offset = 3 * es;  // elements 3..12; the rest keeps its values
        return f->fill(f->ctx, dev, dst, t, 10, value, nullptr);
      });
      ASSERT_EQ(o.ocl_rc, FLX_OK) << o.ocl_err;
      EXPECT_TRUE(bitwise(o.cpu[0], o.ocl[0]));
    }
  }
}

TEST_F(OpenCL, RandomIsTheCpuSequence) {
  const size_t n = 1000;
  for (int32_t t : float_dtypes()) {
    for (int dist : {FLX_RANDOM_UNIFORM, FLX_RANDOM_NORMAL}) {
      SCOPED_TRACE(std::string(dname(t)) + (dist ? " normal" : " uniform"));
      double a = dist ? 0.5 : -2.0, b = dist ? 2.0 : 3.0;
      Outcome o = run_both(ocl, {Bytes((n + 4) * dsize(t))},
                           [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                             flx_mem dst = m[0];
                             dst.offset = 4 * dsize(t);
                             return f->random(f->ctx, dev, dst, t, n, dist, 0x1234abcdULL, 77, a, b, nullptr);
                           });
      ASSERT_EQ(o.cpu_rc, FLX_OK) << o.cpu_err;
      ASSERT_EQ(o.ocl_rc, FLX_OK) << o.ocl_err;
      // Without fp64 the plugin draws in float arithmetic: in range, not the CPU's bits.
      if (dist == FLX_RANDOM_UNIFORM) {
        // the same bits: Philox with the same (seed, offset, i), the same double arithmetic
        if (fp64) EXPECT_TRUE(bitwise(o.cpu[0], o.ocl[0]));
        for (size_t i = 4; i < n + 4; ++i) {
          double v = value_at(t, o.ocl[0], i);
          ASSERT_TRUE(v >= a && v < b) << i << ": " << v;
        }
      } else if (fp64) {
        EXPECT_TRUE(close(t, o.cpu[0], o.ocl[0]));
      }
    }
  }
  // a different offset gives different numbers; integers are refused as on the CPU
  DevBuf x(ocl, 0, Bytes(64 * 4)), y(ocl, 0, Bytes(64 * 4));
  ASSERT_EQ(ocl->random(ocl->ctx, 0, x.mem(), FLX_F32, 64, 0, 9, 1, 0, 1, nullptr), FLX_OK);
  ASSERT_EQ(ocl->random(ocl->ctx, 0, y.mem(), FLX_F32, 64, 0, 9, 2, 0, 1, nullptr), FLX_OK);
  EXPECT_NE(x.read(), y.read());
  EXPECT_EQ(ocl->random(ocl->ctx, 0, x.mem(), FLX_I32, 64, 0, 9, 1, 0, 1, nullptr), FLX_ERR_UNSUPPORTED);
  EXPECT_FALSE(err().empty());
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

TEST_F(OpenCL, CastMatchesTheCpuForEveryPairOfDtypes) {
  for (int32_t s : all_dtypes())
    for (int32_t d : all_dtypes()) {
      SCOPED_TRACE(std::string(dname(s)) + " -> " + dname(d));
      std::vector<double> v = cast_values(s, d);
      Bytes src = make(s, v);
      Outcome o = run_both(ocl, {src, Bytes(v.size() * dsize(d), 0)},
                           [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                             return f->cast(f->ctx, dev, m[1], d, m[0], s, v.size(), nullptr);
                           });
      ASSERT_EQ(o.ocl_rc, FLX_OK) << o.ocl_err;
      EXPECT_TRUE(bitwise(o.cpu[1], o.ocl[1])) << close(d, o.cpu[1], o.ocl[1]).message();
    }
}

// Test harness for the OpenCL plugin: dlopen it as libflx does, run the same
// primitive through the OpenCL and the CPU function tables on the same bytes,
// and compare the results element by element.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "flx/backend.h"
#include "flx/dtype.hpp"

namespace ocltest {

using Bytes = std::vector<uint8_t>;
constexpr int32_t kAllDtypes[] = {FLX_F32, FLX_F64, FLX_F16, FLX_BF16, FLX_I32, FLX_I64, FLX_U8, FLX_BOOL};
constexpr int32_t kFloatDtypes[] = {FLX_F32, FLX_F64, FLX_F16, FLX_BF16};

inline const char* dname(int32_t t) {
  static const char* n[] = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8", "Bool"};
  return t >= 0 && t < 8 ? n[t] : "?";
}
inline size_t dsize(int32_t t) {
  static const size_t s[] = {4, 8, 2, 2, 4, 8, 1, 1};
  return s[t];
}
inline bool dfloat(int32_t t) { return t <= FLX_BF16; }

// ---- the plugin, loaded once per process ------------------------------------
struct Plugin {
  void* handle = nullptr;
  flx_backend_entry_fn entry = nullptr;
  const flx_backend_iface* f = nullptr;
  std::string load_error;   // the built plugin could not be loaded: a failure
  std::string skip_reason;  // loaded, but no OpenCL device here: a skip
};
inline const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin p;
    p.handle = dlopen(FLX_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!p.handle) {
      p.load_error = std::string("dlopen(" FLX_OPENCL_PLUGIN "): ") + dlerror();
      return p;
    }
    p.entry = reinterpret_cast<flx_backend_entry_fn>(dlsym(p.handle, FLX_BACKEND_ENTRY_SYMBOL));
    if (!p.entry) {
      p.load_error = "the plugin does not export " FLX_BACKEND_ENTRY_SYMBOL;
      return p;
    }
    p.f = p.entry(FLX_BACKEND_API_VERSION);
    if (!p.f) {
      p.load_error = "the entry point returned NULL for the current ABI version";
      return p;
    }
    char reason[512] = {};
    if (p.f->functional(p.f->ctx, reason, sizeof reason) <= 0)
      p.skip_reason = reason[0] ? reason : "functional() returned 0 without a reason";
    return p;
  }();
  return p;
}

class OpenCL : public ::testing::Test {
 protected:
  const flx_backend_iface* ocl = nullptr;
  const flx_backend_iface* cpu = flx::cpu_backend::backend_iface();
  void SetUp() override {
    const Plugin& p = plugin();
    ASSERT_TRUE(p.load_error.empty()) << p.load_error;
    if (!p.skip_reason.empty()) GTEST_SKIP() << "no usable OpenCL device: " << p.skip_reason;
    ocl = p.f;
    fp64 = device_has_fp64(ocl);
  }
  std::string err() const { return ocl->last_error(ocl->ctx); }
  // Float64 needs cl_khr_fp64: on a device without it the plugin refuses F64
  // (FLX_ERR_UNSUPPORTED), so the comparisons leave F64 out there.
  bool fp64 = true;
  std::vector<int32_t> all_dtypes() const { return without_f64(kAllDtypes); }
  std::vector<int32_t> float_dtypes() const { return without_f64(kFloatDtypes); }

 private:
  template <size_t N>
  std::vector<int32_t> without_f64(const int32_t (&ts)[N]) const {
    std::vector<int32_t> v;
    for (int32_t t : ts)
      if (t != FLX_F64 || fp64) v.push_back(t);
    return v;
  }
  static bool device_has_fp64(const flx_backend_iface* f) {
    flx_buffer b = nullptr;
    if (f->alloc(f->ctx, 0, 8, &b) != FLX_OK) return true;
    flx_map_desc d{};
    d.op = FLX_OP_COPY;
    d.ndim = 1;
    d.shape[0] = 1;
    d.ninputs = 1;
    d.in_dtype = d.out_dtype = FLX_F64;
    d.in[0].mem = {b, 0};
    d.in[0].strides[0] = 1;
    d.out = {b, 0};
    int rc = f->map(f->ctx, 0, &d, nullptr);
    f->stream_synchronize(f->ctx, 0, nullptr);
    f->free(f->ctx, 0, b);
    return rc != FLX_ERR_UNSUPPORTED;
  }
};

// ---- device buffers ------------------------------------------------------------
struct DevBuf {
  const flx_backend_iface* f;
  int dev;
  flx_buffer b = nullptr;
  size_t n;
  DevBuf(const flx_backend_iface* f_, int dev_, const Bytes& init) : f(f_), dev(dev_), n(init.size()) {
    EXPECT_EQ(f->alloc(f->ctx, dev, n ? n : 1, &b), FLX_OK) << f->last_error(f->ctx);
    if (n) EXPECT_EQ(f->copy_h2d(f->ctx, dev, {b, 0}, init.data(), n, nullptr), FLX_OK) << f->last_error(f->ctx);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { f->free(f->ctx, dev, b); }
  flx_mem mem(uint64_t off = 0) const { return {b, off}; }
  Bytes read() const {
    Bytes out(n);
    if (n) EXPECT_EQ(f->copy_d2h(f->ctx, dev, out.data(), {b, 0}, n, nullptr), FLX_OK) << f->last_error(f->ctx);
    EXPECT_EQ(f->stream_synchronize(f->ctx, dev, nullptr), FLX_OK);
    return out;
  }
};

// One primitive run on both backends over copies of the same buffers.
struct Outcome {
  int cpu_rc = -1, ocl_rc = -1;
  std::string cpu_err, ocl_err;
  std::vector<Bytes> cpu, ocl;
};
using OpFn = std::function<int(const flx_backend_iface*, int dev, const std::vector<flx_mem>& mems)>;

inline Outcome run_both(const flx_backend_iface* ocl, const std::vector<Bytes>& init, const OpFn& op, int dev = 0) {
  Outcome o;
  auto side = [&](const flx_backend_iface* f, int d, int& rc, std::string& e, std::vector<Bytes>& out) {
    std::vector<std::unique_ptr<DevBuf>> bufs;
    std::vector<flx_mem> mems;
    for (const Bytes& b : init) {
      bufs.push_back(std::make_unique<DevBuf>(f, d, b));
      mems.push_back(bufs.back()->mem());
    }
    rc = op(f, d, mems);
    if (rc != FLX_OK) e = f->last_error(f->ctx);
    EXPECT_EQ(f->stream_synchronize(f->ctx, d, nullptr), FLX_OK);
    for (auto& b : bufs) out.push_back(b->read());
  };
  side(flx::cpu_backend::backend_iface(), 0, o.cpu_rc, o.cpu_err, o.cpu);
  side(ocl, dev, o.ocl_rc, o.ocl_err, o.ocl);
  return o;
}

// ---- values <-> bytes -------------------------------------------------------------
inline double value_at(int32_t t, const Bytes& b, size_t i) {
  const uint8_t* p = b.data() + i * dsize(t);
  switch (t) {
    case FLX_F32: { float v; std::memcpy(&v, p, 4); return v; }
    case FLX_F64: { double v; std::memcpy(&v, p, 8); return v; }
    case FLX_F16: { uint16_t v; std::memcpy(&v, p, 2); return flx::half_to_float(v); }
    case FLX_BF16: { uint16_t v; std::memcpy(&v, p, 2); return flx::bf16_to_float(v); }
    case FLX_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case FLX_I64: { int64_t v; std::memcpy(&v, p, 8); return double(v); }
    default: return p[0];
  }
}
// Elements stored as the CPU backend stores them (halves rounded to nearest even).
inline Bytes make(int32_t t, const std::vector<double>& v) {
  Bytes b(v.size() * dsize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = b.data() + i * dsize(t);
    switch (t) {
      case FLX_F32: { float x = float(v[i]); std::memcpy(p, &x, 4); break; }
      case FLX_F64: std::memcpy(p, &v[i], 8); break;
      case FLX_F16: { uint16_t x = flx::float_to_half(float(v[i])); std::memcpy(p, &x, 2); break; }
      case FLX_BF16: { uint16_t x = flx::float_to_bf16(float(v[i])); std::memcpy(p, &x, 2); break; }
      case FLX_I32: { int32_t x = int32_t(v[i]); std::memcpy(p, &x, 4); break; }
      case FLX_I64: { int64_t x = int64_t(v[i]); std::memcpy(p, &x, 8); break; }
      case FLX_U8: p[0] = uint8_t(int(v[i])); break;
      default: p[0] = v[i] != 0;
    }
  }
  return b;
}
// n values in [lo, hi] on a grid of `step` (ties and exact zeros on purpose).
inline std::vector<double> grid_values(size_t n, double lo, double hi, double step, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = std::min(hi, std::max(lo, std::round(u(rng) / step) * step));
  return v;
}
// Typical operand values for a dtype.
inline std::vector<double> values_for(int32_t t, size_t n, uint32_t seed) {
  if (t == FLX_BOOL) return grid_values(n, 0, 1, 1, seed);
  if (t == FLX_U8) return grid_values(n, 0, 12, 1, seed);
  if (!dfloat(t)) return grid_values(n, -6, 6, 1, seed);
  return grid_values(n, -3, 3, 0.25, seed);
}

// Per-dtype tolerance: |ocl - cpu| <= atol + rtol * |cpu|; integers exact.
inline ::testing::AssertionResult close(int32_t t, const Bytes& cpu, const Bytes& ocl, double scale = 1) {
  if (cpu.size() != ocl.size()) return ::testing::AssertionFailure() << "sizes differ";
  double rtol = 0, atol = 0;
  switch (t) {
    case FLX_F32: rtol = 2e-5; atol = 2e-5; break;
    case FLX_F64: rtol = 1e-12; atol = 1e-12; break;
    case FLX_F16: rtol = 2e-3; atol = 2e-3; break;
    case FLX_BF16: rtol = 1.6e-2; atol = 1.6e-2; break;
    default: break;
  }
  rtol *= scale;
  atol *= scale;
  size_t n = cpu.size() / dsize(t), bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < n; ++i) {
    double a = value_at(t, cpu, i), b = value_at(t, ocl, i);
    bool ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= atol + rtol * std::fabs(a);
    if (!ok && bad++ < 5) msg << "\n  [" << i << "] cpu " << a << " opencl " << b;
  }
  if (bad) return ::testing::AssertionFailure() << dname(t) << ": " << bad << " of " << n << " differ" << msg.str();
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult bitwise(const Bytes& a, const Bytes& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return ::testing::AssertionFailure() << "first differing byte " << i;
  return ::testing::AssertionSuccess();
}

}  // namespace ocltest

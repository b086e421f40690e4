// Test harness for a backend plugin: dlopen it as libflx does, wrap its core
// table in libflx's dispatch layer (flx::detail::Backend), run the same
// primitive through it and through the CPU backend's Backend on the same
// bytes, and compare the results element by element.
//
// Generic in the plugin: the build names it with two compile definitions,
//   FLX_TEST_PLUGIN_PATH  the plugin's file
//   FLX_TEST_PLUGIN_NAME  the backend's name as flx knows it ("OpenCL", "CUDA")
// (and FLX_TEST_PLUGIN_MINOR, the ABI minor the plugin implements, when it
// was built for an older one than this libflx's: the OpenCL plugin built
// before ABI 2.3, run under this libflx),
// and the environment may ask for a minimum device count
// (FLX_TEST_PLUGIN_MIN_DEVICES, e.g. 2 under POCL_DEVICES="pthread pthread").
// Tests never call a table function themselves: every call goes through
// Backend, which supplies the current stream (set with StreamGuard), makes
// descriptors canonical and allocates workspaces, as in libflx.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/descriptors.hpp"
#include "backend/streams.hpp"
#include "cpu/cpu_backend.hpp"
#include "flx/backend.h"
#include "flx/dtype.hpp"
#include "flx/error.hpp"

#ifndef FLX_TEST_PLUGIN_PATH
#error "define FLX_TEST_PLUGIN_PATH (the plugin file) and FLX_TEST_PLUGIN_NAME (its backend name)"
#endif
#ifndef FLX_TEST_PLUGIN_MINOR
#define FLX_TEST_PLUGIN_MINOR FLX_BACKEND_ABI_MINOR
#endif

namespace plugintest {

using flx::detail::Backend;
using flx::detail::StreamGuard;
using Bytes = std::vector<uint8_t>;
// Every dtype, and the floating ones, of the list of element types.
#define FLX_HARNESS_CODE_(code, sfx, name, bytes, kind, rank) FLX_##sfx,
constexpr int32_t kAllDtypes[] = {FLX_DTYPES(FLX_HARNESS_CODE_)};
#undef FLX_HARNESS_CODE_
#define FLX_HARNESS_FLOAT_CODE_(code, sfx, name, bytes, kind, rank) FLX_DTYPE_IF_FLOAT_##kind(FLX_##sfx, )
constexpr int32_t kFloatDtypes[] = {FLX_DTYPES(FLX_HARNESS_FLOAT_CODE_)};
#undef FLX_HARNESS_FLOAT_CODE_

inline flx::DType dt(int32_t t) { return flx::DType(t); }
inline const char* dname(int32_t t) { return flx::dtype_name(dt(t)).data(); }
inline size_t dsize(int32_t t) { return flx::dtype_size(dt(t)); }
inline bool dfloat(int32_t t) { return flx::is_floating(dt(t)); }

// ---- the plugin, loaded once per process ------------------------------------
struct Plugin {
  void* handle = nullptr;
  flx_backend_entry_fn entry = nullptr;
  const flx_backend* core = nullptr;
  flx::BackendId id = flx::BackendId::CPU;
  std::unique_ptr<Backend> be;
  std::string load_error;   // the built plugin could not be loaded: a failure
  std::string skip_reason;  // loaded, but no device here: a skip
};
inline const Plugin& plugin() {
  static const Plugin& p = *[] {
    auto* p = new Plugin;  // kept to the end: the plugin stays loaded
    p->id = flx::backend_id_from_name(FLX_TEST_PLUGIN_NAME);
    p->handle = dlopen(FLX_TEST_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
      p->load_error = std::string("dlopen(" FLX_TEST_PLUGIN_PATH "): ") + dlerror();
      return p;
    }
    p->entry = reinterpret_cast<flx_backend_entry_fn>(dlsym(p->handle, FLX_BACKEND_ENTRY_SYMBOL));
    if (!p->entry) {
      p->load_error = "the plugin does not export " FLX_BACKEND_ENTRY_SYMBOL;
      return p;
    }
    p->core = p->entry(FLX_BACKEND_ABI_MAJOR, FLX_BACKEND_ABI_MINOR);
    if (!p->core) {
      p->load_error = "the entry point returned NULL for this ABI version";
      return p;
    }
    try {
      p->be = std::make_unique<Backend>(p->id, p->core, FLX_TEST_PLUGIN_PATH);
    } catch (const flx::Error& e) {
      p->load_error = std::string("the dispatch layer refuses the plugin: ") + e.what();
      return p;
    }
    std::string reason;
    if (p->be->functional(&reason) <= 0)
      p->skip_reason = reason.empty() ? "functional() returned 0 without a reason" : reason;
    return p;
  }();
  return p;
}
inline const Backend& cpu() {
  static const Backend b(flx::BackendId::CPU, flx::cpu_backend::core(), "built in");
  return b;
}

// What a call through Backend did: nothing thrown, or the flx::Error's message.
struct Result {
  bool ok = true;
  std::string err;
};
template <class F>
Result attempt(F&& f) {
  try {
    f();
    return {};
  } catch (const flx::Error& e) {
    return {false, e.what()};
  }
}
// The call fails with a BackendError whose message contains every part.
// NaN stored into Float16/BFloat16 as sign|0x7E00 / sign|0x7FC0 on every
// path is a rule of ABI 2.3 (backend.h); a plugin built before it (the 2.2
// OpenCL plugin run under this libflx) kept BFloat16 NaN payloads.
#define FLX_SKIP_BEFORE_NAN_BITS_RULE()                                                                    \
  do {                                                                                                     \
    if (FLX_TEST_PLUGIN_MINOR < 3)                                                                         \
      GTEST_SKIP() << "the plugin implements ABI 2." << FLX_TEST_PLUGIN_MINOR                              \
                   << ", older than the rule for NaN bits in half types (ABI 2.3)";                        \
  } while (0)

#define EXPECT_BACKEND_ERROR(call, ...)                                                              \
  do {                                                                                               \
    bool thrown_ = false;                                                                            \
    try {                                                                                            \
      call;                                                                                          \
    } catch (const flx::BackendError& e_) {                                                         \
      thrown_ = true;                                                                                \
      for (const char* part_ : {__VA_ARGS__})                                                        \
        EXPECT_NE(std::string(e_.what()).find(part_), std::string::npos) << e_.what() << "\nlacks: " << part_; \
    }                                                                                                \
    EXPECT_TRUE(thrown_) << #call " did not throw a BackendError";                                  \
  } while (0)

// A contiguous elementwise map of one input: out[i] = op(in[i]), i < n.
inline flx_map_desc unary_map(int32_t op, int32_t dtype, int64_t n, flx_mem in, flx_mem out) {
  flx_map_desc d{};
  d.op = op;
  d.ndim = 1;
  d.shape[0] = n;
  d.ninputs = 1;
  d.in_dtype = d.out_dtype = dtype;
  d.in[0].mem = in;
  d.in[0].strides[0] = 1;
  d.out = out;
  return d;
}

// ---- device buffers ------------------------------------------------------------
struct DevBuf {
  const Backend* be;
  int dev;
  flx_buffer b = nullptr;
  size_t n;
  DevBuf(const Backend& be_, int dev_, const Bytes& init) : be(&be_), dev(dev_), n(init.size()) {
    b = be->alloc(dev, n ? n : 1);
    if (n) be->copy_h2d(dev, {b, 0}, init.data(), n);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { be->free(dev, b); }
  flx_mem mem(uint64_t off = 0) const { return {b, off}; }
  Bytes read() const {
    Bytes out(n);
    if (n) be->copy_d2h(dev, out.data(), {b, 0}, n);
    be->synchronize(dev);
    return out;
  }
};

class PluginTest : public ::testing::Test {
 protected:
  const Backend* be = nullptr;  // the plugin's
  flx::BackendId id = flx::BackendId::CPU;
  void SetUp() override {
    const Plugin& p = plugin();
    ASSERT_TRUE(p.load_error.empty()) << p.load_error;
    if (!p.skip_reason.empty()) GTEST_SKIP() << "no usable " FLX_TEST_PLUGIN_NAME " device: " << p.skip_reason;
    be = p.be.get();
    id = p.id;
    fp64 = device_has_fp64(*be);
  }
  // Float64 may be missing (OpenCL without cl_khr_fp64): the plugin then
  // refuses F64 as unsupported, and the comparisons leave F64 out.
  bool fp64 = true;
  std::vector<int32_t> all_dtypes() const { return without_f64(kAllDtypes); }
  std::vector<int32_t> float_dtypes() const { return without_f64(kFloatDtypes); }
  int min_devices() const {
    const char* e = std::getenv("FLX_TEST_PLUGIN_MIN_DEVICES");
    return e && *e ? std::atoi(e) : 1;
  }

 private:
  template <size_t N>
  std::vector<int32_t> without_f64(const int32_t (&ts)[N]) const {
    std::vector<int32_t> v;
    for (int32_t t : ts)
      if (t != FLX_F64 || fp64) v.push_back(t);
    return v;
  }
  static bool device_has_fp64(const Backend& b) {
    Result r = attempt([&] {
      DevBuf x(b, 0, Bytes(8));
      flx_map_desc d = unary_map(FLX_OP_COPY, FLX_F64, 1, x.mem(), x.mem());
      b.map(0, d);
      b.synchronize(0);
    });
    return r.ok || r.err.find("unsupported") == std::string::npos;
  }
};

// One primitive run through both backends over copies of the same buffers.
struct Outcome {
  Result cpu, dev;
  std::vector<Bytes> cpu_out, dev_out;
};
using OpFn = std::function<void(const Backend&, int dev, const std::vector<flx_mem>& mems)>;

inline Outcome run_both(const Backend& be, const std::vector<Bytes>& init, const OpFn& op, int dev = 0) {
  Outcome o;
  auto side = [&](const Backend& b, int d, Result& r, std::vector<Bytes>& out) {
    std::vector<std::unique_ptr<DevBuf>> bufs;
    std::vector<flx_mem> mems;
    for (const Bytes& x : init) {
      bufs.push_back(std::make_unique<DevBuf>(b, d, x));
      mems.push_back(bufs.back()->mem());
    }
    r = attempt([&] { op(b, d, mems); });
    b.synchronize(d);
    for (auto& x : bufs) out.push_back(x->read());
  };
  side(cpu(), 0, o.cpu, o.cpu_out);
  side(be, dev, o.dev, o.dev_out);
  return o;
}
// Both succeeded, or both refused (then the plugin said why).
#define EXPECT_SAME_OUTCOME(o)                                                                         \
  do {                                                                                                 \
    EXPECT_EQ((o).dev.ok, (o).cpu.ok) << "cpu: " << (o).cpu.err << "\n" FLX_TEST_PLUGIN_NAME ": " << (o).dev.err; \
    if (!(o).dev.ok) {                                                                                 \
      EXPECT_FALSE((o).dev.err.empty());                                                               \
    }                                                                                                  \
  } while (0)

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

// Per-dtype tolerance: |dev - cpu| <= atol + rtol * |cpu|; integers exact.
inline ::testing::AssertionResult close(int32_t t, const Bytes& cpu, const Bytes& dev, double scale = 1) {
  if (cpu.size() != dev.size()) return ::testing::AssertionFailure() << "sizes differ";
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
    double a = value_at(t, cpu, i), b = value_at(t, dev, i);
    bool ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= atol + rtol * std::fabs(a);
    if (!ok && bad++ < 5) msg << "\n  [" << i << "] cpu " << a << " " FLX_TEST_PLUGIN_NAME " " << b;
  }
  if (bad) return ::testing::AssertionFailure() << dname(t) << ": " << bad << " of " << n << " differ" << msg.str();
  return ::testing::AssertionSuccess();
}
// ---- NaN bits -----------------------------------------------------------------------
// NaNs of floating dtype t as raw bits (no conversion makes most of them):
// seven NaNs, positive and negative in turn, quiet and signalling, with and
// without payloads, a GPU's canonical NaN (all ones) among them; then an
// ordinary value, an infinity and -0.
inline Bytes nan_patterns(int32_t t) {
  auto pack = [](const auto& v) {
    Bytes b(v.size() * sizeof(v[0]));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  switch (t) {
    case FLX_F32:
      return pack(std::vector<uint32_t>{0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fffffffu, 0xffe00001u,
                                        0x7fa00000u, 0x3fc00000u, 0xff800000u, 0x80000000u});
    case FLX_F64:
      return pack(std::vector<uint64_t>{0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                                        0xfff4000012345678ull, 0x7fffffffffffffffull, 0xfff0000020000000ull,
                                        0x7ff8000020000000ull, 0x3ff8000000000000ull, 0xfff0000000000000ull,
                                        0x8000000000000000ull});
    case FLX_F16:
      return pack(std::vector<uint16_t>{0x7e00, 0xfe00, 0x7c01, 0xfd55, 0x7fff, 0xfe01, 0x7d00, 0x3e00, 0xfc00, 0x8000});
    default:  // BFloat16
      return pack(std::vector<uint16_t>{0x7fc0, 0xffc0, 0x7f81, 0xffa5, 0x7fff, 0xffc1, 0x7fa0, 0x3fc0, 0xff80, 0x8000});
  }
}
// The bits element i of b (Float16 or BFloat16) has: NaN is stored quiet,
// without payload, as 0x7E00 / 0x7FC0 with its sign on every backend.
inline uint16_t half_bits(const Bytes& b, size_t i) {
  uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return h;
}
inline bool is_stored_half_nan(int32_t t, uint16_t h) { return (h & 0x7fffu) == (t == FLX_F16 ? 0x7e00u : 0x7fc0u); }

inline ::testing::AssertionResult bitwise(const Bytes& a, const Bytes& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return ::testing::AssertionFailure() << "first differing byte " << i;
  return ::testing::AssertionSuccess();
}

}  // namespace plugintest

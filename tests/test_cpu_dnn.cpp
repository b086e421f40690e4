// The CPU backend's dnn table (convolution, pooling, batch normalisation:
// oneDNN for Float32, direct loops for Float64), through the dispatch layer
// (flx::detail::Backend), against the direct loops in double of
// dnn_reference.hpp: every pass, 1-D to 3-D, with stride, dilation,
// asymmetric padding, groups (depthwise too) and batches; then the errors
// a bad descriptor gets.
#include <limits>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "dnn_reference.hpp"
#include "flx/autodiff.hpp"
#include "flx/dnn.hpp"
#include "flx/error.hpp"
#include "flx/ops.hpp"
#include "flx/tensor.hpp"
#include "flx/threads.hpp"
#include "tensor_impl.hpp"

using namespace flx;
namespace ref = flx::testing::dnn_ref;

namespace {

const detail::Backend& cpu() { return detail::backend_of(Device::cpu()); }

// Values in [-1, 1) from a fixed sequence; `levels` > 0 rounds them to that
// many steps, so that windows hold ties (max pooling's first maximum).
std::vector<double> values(size_t n, uint64_t seed, int levels = 0) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = double(s >> 11) / double(1ull << 53) * 2 - 1;
    if (levels > 0) x = std::floor((x + 1) / 2 * levels) / levels;
  }
  return v;
}

// A CPU tensor of dtype T holding v (or n zeros), read back as double.
template <class T>
struct Buf {
  Tensor t;
  explicit Buf(const std::vector<double>& v)
      : t(tensor(std::vector<T>(v.begin(), v.end()), Shape{int64_t(v.size())})) {}
  explicit Buf(size_t n) : Buf(std::vector<double>(n, 0.0)) {}
  flx_mem mem() const { return detail::mem(t); }
  std::vector<double> read() const {
    const auto v = t.to_vector<T>();
    return std::vector<double>(v.begin(), v.end());
  }
};

template <class T>
constexpr int32_t dtype_of_v = std::is_same_v<T, float> ? FLX_F32 : FLX_F64;
template <class T>
constexpr double tol_v = std::is_same_v<T, float> ? 1e-4 : 1e-12;

// got == want within tol relative to the larger of 1 and the largest |want|
// (sums of products lose relative accuracy where they cancel).
void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double w : want) scale = std::isfinite(w) ? std::max(scale, std::abs(w)) : scale;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same =
        (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i] || std::abs(got[i] - want[i]) <= tol * scale;
    if (!same && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " elements differ";
}

// ---- convolution ------------------------------------------------------------------

struct ConvCase {
  const char* name;
  int nspatial;
  ref::Dims in, kernel, stride, dilation, pad_lo, pad_hi;
  int64_t batch, cin, cout, groups;
};

const ConvCase kConvCases[] = {
    {"1-D, stride 2, dilation 2, pads (1, 2), groups 2",
     1,
     {11, 1, 1},
     {3, 1, 1},
     {2, 1, 1},
     {2, 1, 1},
     {1, 0, 0},
     {2, 0, 0},
     2,
     4,
     6,
     2},
    {"2-D, strides (2, 1), dilations (1, 2), asymmetric pads",
     2,
     {7, 6, 1},
     {3, 2, 1},
     {2, 1, 1},
     {1, 2, 1},
     {1, 0, 0},
     {2, 1, 0},
     2,
     3,
     4,
     1},
    {"2-D depthwise (groups = cin = cout)",
     2,
     {6, 5, 1},
     {3, 3, 1},
     {1, 1, 1},
     {1, 1, 1},
     {1, 1, 0},
     {1, 1, 0},
     3,
     4,
     4,
     4},
    {"2-D, groups 3, two outputs per group, stride 2",
     2,
     {8, 7, 1},
     {3, 3, 1},
     {2, 2, 1},
     {1, 1, 1},
     {0, 1, 0},
     {1, 0, 0},
     2,
     6,
     6,
     3},
    {"2-D, 16 channels (blocked layouts)",
     2,
     {9, 9, 1},
     {3, 3, 1},
     {1, 1, 1},
     {1, 1, 1},
     {1, 1, 0},
     {1, 1, 0},
     2,
     16,
     32,
     1},
    // 32 => 32 channels of 16x16 over 9 images: 4 pieces of the batch, of 3
    // and 2 images (cpu_dnn_conv.cpp's conv_pieces)
    {"2-D, 32 channels over 9 images (pieces of the batch, of two sizes)",
     2,
     {16, 16, 1},
     {3, 3, 1},
     {1, 1, 1},
     {1, 1, 1},
     {1, 1, 0},
     {1, 1, 0},
     9,
     32,
     32,
     1},
    {"3-D, strides (1, 2, 1), dilation 2 in W, asymmetric pads",
     3,
     {5, 4, 4},
     {2, 3, 2},
     {1, 2, 1},
     {2, 1, 1},
     {1, 1, 0},
     {0, 1, 1},
     2,
     2,
     3,
     1},
};

ref::ConvShape shape_of(const ConvCase& c) {
  ref::ConvShape s;
  s.win.nspatial = c.nspatial;
  s.win.in = c.in;
  s.win.kernel = c.kernel;
  s.win.stride = c.stride;
  s.win.dilation = c.dilation;
  s.win.pad_lo = c.pad_lo;
  s.win.pad_hi = c.pad_hi;
  s.win.fill_out();
  s.batch = c.batch;
  s.cin = c.cin;
  s.cout = c.cout;
  s.groups = c.groups;
  return s;
}

flx_conv_desc conv_desc(const ref::ConvShape& s, int32_t dtype) {
  flx_conv_desc d{};
  d.dtype = dtype;
  d.nspatial = s.win.nspatial;
  d.groups = int32_t(s.groups);
  d.batch = s.batch;
  d.in_channels = s.cin;
  d.out_channels = s.cout;
  for (int i = 0; i < s.win.nspatial; ++i) {
    const size_t k = size_t(i);
    d.in_size[i] = s.win.in[k];
    d.out_size[i] = s.win.out[k];
    d.kernel[i] = s.win.kernel[k];
    d.stride[i] = s.win.stride[k];
    d.dilation[i] = s.win.dilation[k];
    d.pad_lo[i] = s.win.pad_lo[k];
    d.pad_hi[i] = s.win.pad_hi[k];
  }
  return d;
}

template <class T>
void check_conv(const ConvCase& c, bool bias, bool deterministic = false) {
  SCOPED_TRACE(std::string(c.name) + (bias ? ", with bias" : ", no bias") +
               (std::is_same_v<T, float> ? ", Float32" : ", Float64"));
  const ref::ConvShape s = shape_of(c);
  const auto xv = values(s.x_size(), 1), wv = values(s.w_size(), 2), dyv = values(s.y_size(), 3);
  const auto bv = bias ? values(size_t(s.cout), 4) : std::vector<double>{};
  Buf<T> x(xv), w(wv), dy(dyv), b(bias ? bv : std::vector<double>(1)), y(s.y_size()), dx(s.x_size()), dw(s.w_size()),
      db(size_t(s.cout));
  flx_conv_desc d = conv_desc(s, dtype_of_v<T>);
  d.deterministic = deterministic;
  d.x = x.mem();
  d.w = w.mem();
  d.y = y.mem();
  d.dy = dy.mem();
  d.dx = dx.mem();
  d.dw = dw.mem();
  if (bias) {
    d.b = b.mem();
    d.db = db.mem();
  }
  cpu().conv(0, d, FLX_CONV_FORWARD);
  expect_near(y.read(), ref::conv_forward(s, xv, wv, bv), tol_v<T>, "y");
  cpu().conv(0, d, FLX_CONV_BACKWARD_DATA);
  expect_near(dx.read(), ref::conv_backward_data(s, dyv, wv), tol_v<T>, "dx");
  std::vector<double> want_db;
  const auto want_dw = ref::conv_backward_filter(s, xv, dyv, &want_db);
  cpu().conv(0, d, FLX_CONV_BACKWARD_FILTER);
  expect_near(dw.read(), want_dw, tol_v<T>, "dw");
  if (bias) expect_near(db.read(), want_db, tol_v<T>, "db");
  // Both gradients in one call (minor 13; each piece's dy reordered once
  // for both primitives): the same bits as the two calls, into outputs
  // that start as NaN.
  ASSERT_TRUE(cpu().has_conv_backward());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Buf<T> dx2(std::vector<double>(s.x_size(), nan)), dw2(std::vector<double>(s.w_size(), nan)),
      db2(std::vector<double>(size_t(s.cout), nan));
  d.dx = dx2.mem();
  d.dw = dw2.mem();
  d.db = bias ? db2.mem() : flx_mem{};
  cpu().conv(0, d, FLX_CONV_BACKWARD);
  EXPECT_EQ(dx2.read(), dx.read()) << "dx of conv_backward";
  EXPECT_EQ(dw2.read(), dw.read()) << "dw of conv_backward";
  if (bias) EXPECT_EQ(db2.read(), db.read()) << "db of conv_backward";
}

TEST(CpuDnn, ConvolutionFloat32MatchesTheReference) {
  ASSERT_TRUE(cpu().has_dnn());
  for (const ConvCase& c : kConvCases)
    for (bool bias : {false, true}) check_conv<float>(c, bias);
}

TEST(CpuDnn, ConvolutionFloat64MatchesTheReference) {
  for (const ConvCase& c : kConvCases)
    for (bool bias : {false, true}) check_conv<double>(c, bias);
}

// On one thread and on the default count, with and without the
// deterministic flag, the results are the reference's (the thread
// determinism test checks that they are the same bits).
TEST(CpuDnn, ConvolutionFollowsFlxsThreadCount) {
  const int before = num_threads();
  set_num_threads(1);
  check_conv<float>(kConvCases[4], true);
  check_conv<float>(kConvCases[4], true, true);
  set_num_threads(before);
  check_conv<float>(kConvCases[4], true);
  check_conv<float>(kConvCases[4], true, true);
}

// ---- pooling ----------------------------------------------------------------------

struct PoolCase {
  const char* name;
  int nspatial;
  ref::Dims in, window, stride, pad_lo, pad_hi;
  int64_t batch, channels;
};

const PoolCase kPoolCases[] = {
    {"1-D, window 3, stride 2, pads (1, 1)", 1, {10, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, 2, 3},
    {"2-D, window (2, 3), strides (2, 1), asymmetric pads",
     2,
     {7, 6, 1},
     {2, 3, 1},
     {2, 1, 1},
     {1, 1, 0},
     {0, 2, 0},
     2,
     3},
    {"2-D, overlapping 3x3 windows, stride 2, no padding",
     2,
     {9, 9, 1},
     {3, 3, 1},
     {2, 2, 1},
     {0, 0, 0},
     {0, 0, 0},
     1,
     16},
    {"2-D, 2x2 windows at stride 2 over odd sizes (a last row and column in no window)",
     2,
     {7, 5, 1},
     {2, 2, 1},
     {2, 2, 1},
     {0, 0, 0},
     {0, 0, 0},
     2,
     3},
    {"3-D, window 2, strides (2, 2, 1), pads (0, 1, 1)",
     3,
     {4, 5, 3},
     {2, 2, 2},
     {2, 2, 1},
     {0, 1, 1},
     {1, 0, 0},
     2,
     2},
    {"2-D, padding as wide as the window (windows of padding only)",
     2,
     {3, 3, 1},
     {2, 2, 1},
     {1, 1, 1},
     {2, 0, 0},
     {2, 0, 0},
     1,
     2},
};

ref::PoolShape pool_shape(const PoolCase& c, bool max) {
  ref::PoolShape s;
  s.win.nspatial = c.nspatial;
  s.win.in = c.in;
  s.win.kernel = c.window;
  s.win.stride = c.stride;
  s.win.pad_lo = c.pad_lo;
  s.win.pad_hi = c.pad_hi;
  s.win.fill_out();
  s.batch = c.batch;
  s.channels = c.channels;
  s.max = max;
  return s;
}

flx_pool_desc pool_desc(const ref::PoolShape& s, int32_t dtype) {
  flx_pool_desc d{};
  d.dtype = dtype;
  d.mode = s.max ? FLX_POOL_MAX : FLX_POOL_MEAN;
  d.nspatial = s.win.nspatial;
  d.batch = s.batch;
  d.channels = s.channels;
  for (int i = 0; i < s.win.nspatial; ++i) {
    const size_t k = size_t(i);
    d.in_size[i] = s.win.in[k];
    d.out_size[i] = s.win.out[k];
    d.window[i] = s.win.kernel[k];
    d.stride[i] = s.win.stride[k];
    d.pad_lo[i] = s.win.pad_lo[k];
    d.pad_hi[i] = s.win.pad_hi[k];
  }
  return d;
}

// Forward (for inference and for training, with the reserve the backend
// asks for), then backward with that reserve. xv: the input (ties, NaNs).
template <class T>
void check_pool(const PoolCase& c, bool max, const std::vector<double>& xv) {
  SCOPED_TRACE(std::string(c.name) + (max ? ", max" : ", mean") +
               (std::is_same_v<T, float> ? ", Float32" : ", Float64"));
  const ref::PoolShape s = pool_shape(c, max);
  const auto dyv = values(s.y_size(), 6);
  Buf<T> x(xv), y(s.y_size()), dy(dyv), dx(s.x_size());
  flx_pool_desc d = pool_desc(s, dtype_of_v<T>);
  d.x = x.mem();
  d.y = y.mem();
  d.dy = dy.mem();
  d.dx = dx.mem();
  const auto want_y = ref::pool_forward(s, xv);
  cpu().pool_forward(0, d);
  expect_near(y.read(), want_y, tol_v<T>, "y (inference)");
  d.training = 1;
  const detail::Scratch reserve = cpu().pool_reserve(0, d);
  if (max)
    EXPECT_EQ(reserve.bytes(), 0u) << "max pooling runs as direct loops, which find the maximum again from x";
  d.reserve = reserve.mem();
  d.reserve_bytes = reserve.bytes();
  Buf<T> y2(s.y_size());
  d.y = y2.mem();
  cpu().pool_forward(0, d);
  expect_near(y2.read(), want_y, tol_v<T>, "y (training)");
  cpu().pool_backward(0, d);
  expect_near(dx.read(), ref::pool_backward(s, xv, dyv), tol_v<T>, "dx");
}

TEST(CpuDnn, PoolingMatchesTheReference) {
  for (const PoolCase& c : kPoolCases)
    for (bool max : {true, false}) {
      const ref::PoolShape s = pool_shape(c, max);
      check_pool<float>(c, max, values(s.x_size(), 5));
      check_pool<double>(c, max, values(s.x_size(), 5));
    }
}

// Windows full of ties: backward sends dy to the first largest element.
TEST(CpuDnn, MaxPoolingSendsTheGradientToTheFirstMaximum) {
  for (const PoolCase& c : kPoolCases) {
    const ref::PoolShape s = pool_shape(c, true);
    check_pool<float>(c, true, values(s.x_size(), 7, 2));
    check_pool<double>(c, true, values(s.x_size(), 7, 2));
  }
}

// A NaN in a window gives NaN (oneDNN's maximum would drop it).
TEST(CpuDnn, MaxPoolingPropagatesNaN) {
  // padded; unpadded (the loops without bounds checks); 2x2 at stride 2 (their own loop)
  for (const PoolCase& c : {kPoolCases[1], kPoolCases[2], kPoolCases[3]}) {
    const ref::PoolShape s = pool_shape(c, true);
    auto xv = values(s.x_size(), 8);
    xv[3] = xv[40] = std::nan("");
    check_pool<float>(c, true, xv);
    check_pool<double>(c, true, xv);
  }
}

// ---- batch normalisation ---------------------------------------------------------

struct BnCase {
  int64_t spatial, channels, batch;
};
const BnCase kBnCases[] = {{6, 3, 4}, {1, 5, 7}, {20, 17, 2}, {1, 2, 1}};

template <class T>
void check_batchnorm(const BnCase& c, bool affine, bool running, bool training) {
  SCOPED_TRACE("spatial " + std::to_string(c.spatial) + ", channels " + std::to_string(c.channels) + ", batch " +
               std::to_string(c.batch) + (affine ? ", scale and bias" : ", no scale or bias") +
               (running ? ", running statistics" : "") + (training ? ", training" : ", inference") +
               (std::is_same_v<T, float> ? ", Float32" : ", Float64"));
  ref::BatchNormShape s{c.spatial, c.channels, c.batch, 1e-5, 0.1};
  const size_t C = size_t(c.channels);
  auto xv = values(s.x_size(), 9);
  for (double& v : xv) v = 3 * v + 0.5;  // a mean and variance far from 0 and 1
  const auto scale = affine ? values(C, 10) : std::vector<double>{};
  const auto bias = affine ? values(C, 11) : std::vector<double>{};
  std::vector<double> rmean = values(C, 12), rvar = values(C, 13);
  for (double& v : rvar) v = v + 1.5;
  const auto want =
      ref::batchnorm_forward(s, training, xv, scale, bias, running || !training ? rmean : std::vector<double>{},
                             running || !training ? rvar : std::vector<double>{});
  Buf<T> x(xv), y(s.x_size()), sc(affine ? scale : std::vector<double>(1)), bi(affine ? bias : std::vector<double>(1)),
      rm(rmean), rv(rvar), sm(C), si(C);
  flx_batchnorm_desc d{};
  d.dtype = d.param_dtype = dtype_of_v<T>;
  d.training = training;
  d.spatial = c.spatial;
  d.channels = c.channels;
  d.batch = c.batch;
  d.epsilon = s.epsilon;
  d.momentum = s.momentum;
  d.x = x.mem();
  d.y = y.mem();
  if (affine) {
    d.scale = sc.mem();
    d.bias = bi.mem();
  }
  if (running || !training) {
    d.running_mean = rm.mem();
    d.running_var = rv.mem();
  }
  d.saved_mean = sm.mem();
  d.saved_invstd = si.mem();
  cpu().batchnorm_forward(0, d);
  expect_near(y.read(), want.y, tol_v<T>, "y");
  if (!training) {
    expect_near(rm.read(), rmean, tol_v<T>, "running_mean (unchanged)");
    return;
  }
  expect_near(sm.read(), want.mean, tol_v<T>, "saved_mean");
  expect_near(si.read(), want.invstd, tol_v<T>, "saved_invstd");
  if (running) {
    expect_near(rm.read(), want.running_mean, tol_v<T>, "running_mean");
    expect_near(rv.read(), want.running_var, tol_v<T>, "running_var");
  }
  // Backward from the saved statistics, with and without dscale and dbias.
  const auto dyv = values(s.x_size(), 14);
  const auto want_b = ref::batchnorm_backward(s, xv, dyv, scale);
  for (bool grads : {true, false}) {
    Buf<T> dy(dyv), dx(s.x_size()), dscale(C), dbias(C);
    d.dy = dy.mem();
    d.dx = dx.mem();
    d.dscale = grads ? dscale.mem() : flx_mem{};
    d.dbias = grads ? dbias.mem() : flx_mem{};
    cpu().batchnorm_backward(0, d);
    expect_near(dx.read(), want_b.dx, tol_v<T>, "dx");
    if (grads) {
      expect_near(dscale.read(), want_b.dscale, tol_v<T>, "dscale");
      expect_near(dbias.read(), want_b.dbias, tol_v<T>, "dbias");
    }
  }
}

TEST(CpuDnn, BatchNormMatchesTheReference) {
  for (const BnCase& c : kBnCases)
    for (bool affine : {true, false}) {
      for (bool running : {true, false}) {
        check_batchnorm<float>(c, affine, running, true);
        check_batchnorm<double>(c, affine, running, true);
      }
      check_batchnorm<float>(c, affine, true, false);
      check_batchnorm<double>(c, affine, true, false);
    }
}

// ---- errors -------------------------------------------------------------------------

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("the wrong exception: ") + e.what();
  }
  return "no exception";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

flx_conv_desc small_conv(int32_t dtype) {
  ref::ConvShape s = shape_of(kConvCases[1]);
  return conv_desc(s, dtype);
}

TEST(CpuDnn, BadDescriptorsAreInvalidArguments) {
  Buf<float> x(4096), w(4096), y(4096);
  flx_conv_desc d = small_conv(FLX_F32);
  d.x = x.mem();
  d.w = w.mem();
  d.y = y.mem();

  flx_conv_desc bad = d;
  bad.out_size[0] += 1;
  std::string m = error_of<BackendError>([&] { cpu().conv(0, bad, FLX_CONV_FORWARD); });
  EXPECT_TRUE(has(m, "conv_forward: out_size of dim 0 (W) is 5, expected 4")) << m;
  EXPECT_TRUE(has(m, "invalid argument")) << m;

  bad = d;
  bad.groups = 2;  // 3 input channels
  m = error_of<BackendError>([&] { cpu().conv(0, bad, FLX_CONV_BACKWARD_DATA); });
  EXPECT_TRUE(has(m, "in_channels (3) and out_channels (4) must both be multiples of groups (2)")) << m;

  bad = d;
  bad.nspatial = 4;
  m = error_of<BackendError>([&] { cpu().conv(0, bad, FLX_CONV_BACKWARD_FILTER); });
  EXPECT_TRUE(has(m, "nspatial is 4, expected 1 to 3")) << m;

  bad = d;
  bad.kernel[1] = 9;  // larger than the padded input (6 + 0 + 1)
  m = error_of<BackendError>([&] { cpu().conv(0, bad, FLX_CONV_FORWARD); });
  EXPECT_TRUE(has(m, "is larger than the padded input")) << m;

  flx_pool_desc p = pool_desc(pool_shape(kPoolCases[0], true), FLX_F64);
  p.x = x.mem();
  p.y = y.mem();
  p.mode = 7;
  m = error_of<BackendError>([&] { cpu().pool_forward(0, p); });
  EXPECT_TRUE(has(m, "mode is 7, expected FLX_POOL_MAX (0) or FLX_POOL_MEAN (1)")) << m;

  flx_batchnorm_desc b{};
  b.dtype = FLX_F32;
  b.param_dtype = FLX_F64;
  b.spatial = b.channels = b.batch = 1;
  b.epsilon = 1e-5;
  b.training = 1;
  b.x = x.mem();
  b.y = y.mem();
  m = error_of<BackendError>([&] { cpu().batchnorm_forward(0, b); });
  EXPECT_TRUE(has(m, "param_dtype is 1 for data of dtype 0")) << m;
}

// Backend::conv and friends set struct_size; a caller built against a
// smaller descriptor gets FLX_ERR_INVALID_ARGUMENT (through the dispatch
// layer's generic calls, which pass the descriptor as it is).
TEST(CpuDnn, AShortDescriptorIsRefused) {
  const auto& table = cpu().table<flx_dnn_table>();
  const detail::OpRef op{"conv", FLX_F32};
  flx_conv_desc d = small_conv(FLX_F32);
  d.struct_size = 16;
  std::string m = error_of<BackendError>([&] { cpu().run<&flx_dnn_table::conv_forward>(table, op, 0, &d); });
  EXPECT_TRUE(has(m, "conv_forward: struct_size is 16, expected at least sizeof(flx_conv_desc) = ")) << m;
  m = error_of<BackendError>(
      [&] { (void)cpu().scratch<&flx_dnn_table::conv_workspace>(table, op, 0, &d, int32_t(FLX_CONV_FORWARD)); });
  EXPECT_TRUE(has(m, "struct_size is 16")) << m;
  flx_batchnorm_desc b{};
  b.struct_size = 8;
  m = error_of<BackendError>([&] { cpu().run<&flx_dnn_table::batchnorm_backward>(table, op, 0, &b); });
  EXPECT_TRUE(has(m, "batchnorm_backward: struct_size is 8, expected at least sizeof(flx_batchnorm_desc)")) << m;
}

// Float16 and BFloat16 run the Float32 path on the widened values (exact)
// and round each output once: the same bits as the Float32 ops on the
// widened tensors, rounded, forward and backward (cpu_dnn_halves.cpp).
TEST(CpuDnn, HalvesGiveTheFloat32ResultRoundedOnce) {
  set_seed(5);
  for (DType t : {Float16, BFloat16}) {
    const Tensor x = randn(7, 6, 4, 3).to(t), w = randn(3, 3, 4, 5).to(t), b = randn(5).to(t);
    const Tensor scale = rand(4) + 0.5, bias = randn(4);  // BatchNorm's: Float32 for halves
    const std::vector<std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>> cases = {
        [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv(x, w, b, {.stride = 2, .pad = 1}); },
        [](const Tensor& x, const Tensor&, const Tensor&) { return maxpool(x, {2, 2}); },
        [](const Tensor& x, const Tensor&, const Tensor&) { return meanpool(x, {3, 2}, {.pad = 1}); },
        [&](const Tensor& x, const Tensor&, const Tensor&) {
          return batchnorm(x, scale, bias, Tensor(), Tensor(), true);
        }};
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto& f = cases[k];
      auto [y, g] = withgradient([&](const Tensor& x, const Tensor& w, const Tensor& b) {
        const Tensor out = f(x, w, b);
        return sum(out.to(Float32) * out.to(Float32));
      }, x, w, b);
      const Tensor want = f(x.to(Float32), w.to(Float32), b.to(Float32)).to(t);
      EXPECT_EQ(f(x, w, b).dtype(), t) << "case " << k;
      EXPECT_EQ(f(x, w, b).to_vector<float>(), want.to_vector<float>()) << t << ", case " << k;
      // The gradient of x: the Float32 backward of the rounded output's
      // gradient (2 y, exact in the half type), rounded once.
      const Tensor yf = f(x, w, b).to(Float32);
      auto [yw, gw] = withgradient([&](const Tensor& xf) {
        return sum(f(xf, w.to(Float32), b.to(Float32)) * yf.detach() * 2.0);
      }, x.to(Float32));
      EXPECT_EQ(std::get<0>(g).dtype(), t);
      EXPECT_EQ(std::get<0>(g).to_vector<float>(), std::get<0>(gw).to(t).to_vector<float>()) << t << ", case " << k;
      (void)y;
      (void)yw;
    }
  }
}

}  // namespace

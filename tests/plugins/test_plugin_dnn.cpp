// A backend plugin's dnn table (ABI minor 5: convolution, pooling, batch
// normalisation) through the dispatch layer, against the direct loops of
// tests/dnn_reference.hpp computed in double from the same stored input
// values. Every case runs in Float32 and Float64, and in Float16 and
// BFloat16 where the plugin does not answer unsupported (the halves are
// optional in backend.h: then the case skips saying so). A plugin without the table (one built
// before ABI 2.5, or one that does not serve it yet) skips every case,
// saying why. Only the ABI and Backend are used, so the file serves every
// plugin. Sizes stay small: PoCL compiles every kernel on first use.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "../dnn_reference.hpp"
#include "plugin_harness.hpp"

using namespace plugintest;
namespace ref = flx::testing::dnn_ref;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string why_no_dnn() {
  if (FLX_TEST_PLUGIN_MINOR < 5)
    return "the plugin implements ABI 2." + std::to_string(FLX_TEST_PLUGIN_MINOR) +
           " and predates the dnn table (ABI 2.5)";
  return FLX_TEST_PLUGIN_NAME " serves no dnn table";
}

// The dtype of the statistics, scale and bias (backend.h: F32 for the halves).
int32_t param_dtype(int32_t t) { return t == FLX_F16 || t == FLX_BF16 ? FLX_F32 : t; }

// Values as a dtype stores them, read back in double: the reference's inputs.
std::vector<double> stored(int32_t t, const std::vector<double>& v) {
  const Bytes b = make(t, v);
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = value_at(t, b, i);
  return out;
}
std::vector<double> absolute(std::vector<double> v) {
  for (double& x : v) x = std::fabs(x);
  return v;
}
// n distinct values (no ties for max pooling), exact in every float dtype.
std::vector<double> distinct_values(size_t n, uint32_t seed) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (double& x : v) x = (x - double(n) / 2) * 0.125;
  return v;
}

// |got - want| <= rel * (mag + 1e-6) per element, mag the magnitude of the
// terms summed into it (the reference computed on absolute values), rel by
// dtype: rounding that grows with the sum, not with its (possibly cancelled)
// result. NaN matches NaN.
::testing::AssertionResult near(int32_t t, const Bytes& got, const std::vector<double>& want,
                                const std::vector<double>& mag, const char* what) {
  if (got.size() != want.size() * dsize(t))
    return ::testing::AssertionFailure() << what << ": " << got.size() / dsize(t) << " elements, expected "
                                         << want.size();
  // The halves: the inputs are exact in them, so the error is the result's
  // one rounding (2^-11, 2^-8) plus what the sum lost on the way.
  const double rel = t == FLX_F64 ? 1e-10 : t == FLX_F32 ? 1e-4 : t == FLX_F16 ? 4e-3 : 1.6e-2;
  size_t bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = value_at(t, got, i), w = want[i];
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w || std::fabs(g - w) <= rel * (mag[i] + 1e-6);
    if (!ok && bad++ < 5)
      msg << "\n  [" << i << "] expected " << w << ", got " << g << " (tolerance " << rel * (mag[i] + 1e-6) << ")";
  }
  if (bad)
    return ::testing::AssertionFailure() << what << " " << dname(t) << ": " << bad << " of " << want.size()
                                         << " differ" << msg.str();
  return ::testing::AssertionSuccess();
}

// ---- the fixture: a plugin with the dnn table, one dtype per instance --------------
class PluginDnn : public PluginTest, public ::testing::WithParamInterface<int32_t> {
 protected:
  int32_t t = FLX_F32;
  void SetUp() override {
    PluginTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!be->has_dnn()) GTEST_SKIP() << why_no_dnn();
    t = GetParam();
    if (t == FLX_F64 && !fp64) GTEST_SKIP() << FLX_TEST_PLUGIN_NAME " device 0 has no Float64";
  }
  // Runs f; false when the plugin answered unsupported for a half dtype
  // (optional in backend.h), with its message in unsupported_. For Float32
  // and Float64 an unsupported answer fails the test.
  std::string unsupported_;
  bool ran(const std::function<void()>& f) {
    try {
      f();
      be->synchronize(0);
      return true;
    } catch (const flx::NotImplemented& e) {
      if (t != FLX_F16 && t != FLX_BF16) throw;
      unsupported_ = e.what();
      return false;
    }
  }
  std::unique_ptr<DevBuf> buf(const std::vector<double>& v, int32_t dtype = -1) {
    return std::make_unique<DevBuf>(*be, 0, make(dtype < 0 ? t : dtype, v));
  }
  std::unique_ptr<DevBuf> zeros(size_t n, int32_t dtype = -1) { return buf(std::vector<double>(n, 0.0), dtype); }
};
#define SKIP_UNLESS_RAN(call)                                                                               \
  do {                                                                                                      \
    if (!ran([&] { call; }))                                                                                \
      GTEST_SKIP() << dname(t) << " is optional in the dnn table and " FLX_TEST_PLUGIN_NAME                 \
                   << " answered unsupported: " << unsupported_;                                            \
  } while (0)

std::string dtype_label(const ::testing::TestParamInfo<int32_t>& i) { return dname(i.param); }
const auto kDnnDtypes = ::testing::Values(FLX_F32, FLX_F64, FLX_F16, FLX_BF16);

// ---- convolution -------------------------------------------------------------------
ref::ConvShape conv_shape(int ns, ref::Dims in, ref::Dims k, ref::Dims stride, ref::Dims dil, ref::Dims lo,
                          ref::Dims hi, int64_t batch, int64_t cin, int64_t cout, int64_t groups) {
  ref::ConvShape s;
  s.win.nspatial = ns;
  s.win.in = in;
  s.win.kernel = k;
  s.win.stride = stride;
  s.win.dilation = dil;
  s.win.pad_lo = lo;
  s.win.pad_hi = hi;
  s.win.fill_out();
  s.batch = batch;
  s.cin = cin;
  s.cout = cout;
  s.groups = groups;
  return s;
}
// Only the nspatial dims are set: backend.h lists sizes for those, so the
// others (0 here) must not be read.
flx_conv_desc conv_desc(const ref::ConvShape& s, int32_t t) {
  flx_conv_desc d{};
  d.struct_size = sizeof d;
  d.dtype = t;
  d.nspatial = s.win.nspatial;
  d.groups = int32_t(s.groups);
  d.batch = s.batch;
  d.in_channels = s.cin;
  d.out_channels = s.cout;
  for (size_t k = 0; k < size_t(s.win.nspatial); ++k) {
    d.in_size[k] = s.win.in[k];
    d.out_size[k] = s.win.out[k];
    d.kernel[k] = s.win.kernel[k];
    d.stride[k] = s.win.stride[k];
    d.dilation[k] = s.win.dilation[k];
    d.pad_lo[k] = s.win.pad_lo[k];
    d.pad_hi[k] = s.win.pad_hi[k];
  }
  return d;
}

}  // namespace

// Forward, backward data and backward filter (with db) of one shape, each
// against the reference from the same stored values.
class PluginDnnConv : public PluginDnn {
 protected:
  void check(const ref::ConvShape& s, bool bias) {
    SCOPED_TRACE(std::string("conv ") + dname(t));
    ASSERT_GE(s.win.out_numel(), 1);
    const std::vector<double> x = stored(t, grid_values(s.x_size(), -1, 1, 1.0 / 16, 1));
    const std::vector<double> w = stored(t, grid_values(s.w_size(), -1, 1, 1.0 / 16, 2));
    const std::vector<double> b =
        bias ? stored(t, grid_values(size_t(s.cout), -1, 1, 1.0 / 16, 3)) : std::vector<double>{};
    const std::vector<double> dy = stored(t, grid_values(s.y_size(), -1, 1, 1.0 / 16, 4));
    auto X = buf(x), W = buf(w), DY = buf(dy);
    auto B = bias ? buf(b) : nullptr;
    auto Y = zeros(s.y_size()), DX = zeros(s.x_size()), DW = zeros(s.w_size()), DB = zeros(size_t(s.cout));
    flx_conv_desc d = conv_desc(s, t);
    d.x = X->mem();
    d.w = W->mem();
    d.b = B ? B->mem() : flx_mem{};
    d.y = Y->mem();
    SKIP_UNLESS_RAN(be->conv(0, d, FLX_CONV_FORWARD));
    EXPECT_TRUE(near(t, Y->read(), ref::conv_forward(s, x, w, b),
                     ref::conv_forward(s, absolute(x), absolute(w), absolute(b)), "conv forward y"));

    d = conv_desc(s, t);
    d.dy = DY->mem();
    d.w = W->mem();
    d.dx = DX->mem();
    ASSERT_TRUE(ran([&] { be->conv(0, d, FLX_CONV_BACKWARD_DATA); }));
    EXPECT_TRUE(near(t, DX->read(), ref::conv_backward_data(s, dy, w),
                     ref::conv_backward_data(s, absolute(dy), absolute(w)), "conv backward data dx"));

    d = conv_desc(s, t);
    d.x = X->mem();
    d.dy = DY->mem();
    d.dw = DW->mem();
    d.db = DB->mem();
    ASSERT_TRUE(ran([&] { be->conv(0, d, FLX_CONV_BACKWARD_FILTER); }));
    std::vector<double> db, db_mag;
    const std::vector<double> dw = ref::conv_backward_filter(s, x, dy, &db);
    const std::vector<double> dw_mag = ref::conv_backward_filter(s, absolute(x), absolute(dy), &db_mag);
    EXPECT_TRUE(near(t, DW->read(), dw, dw_mag, "conv backward filter dw"));
    EXPECT_TRUE(near(t, DB->read(), db, db_mag, "conv backward filter db"));
    // Without db: dw alone, db's buffer untouched.
    auto DW2 = zeros(s.w_size());
    auto DB2 = buf(std::vector<double>(size_t(s.cout), 7.0));
    d.dw = DW2->mem();
    d.db = {};
    ASSERT_TRUE(ran([&] { be->conv(0, d, FLX_CONV_BACKWARD_FILTER); }));
    EXPECT_TRUE(near(t, DW2->read(), dw, dw_mag, "conv backward filter dw (no db)"));
    EXPECT_TRUE(near(t, DB2->read(), std::vector<double>(size_t(s.cout), 7.0), std::vector<double>(size_t(s.cout), 0.0),
                     "db left alone"));
  }
};

// 1-D: stride 2, padding 1 before and 2 after, a batch of 2, bias.
TEST_P(PluginDnnConv, Conv1dStridedAsymmetricPadding) {
  check(conv_shape(1, {9, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 1, 1}, {1, 0, 0}, {2, 0, 0}, 2, 2, 3, 1), true);
}
// 2-D: two groups, dilation in dim 0, stride in dim 1, asymmetric padding, a batch of 3.
TEST_P(PluginDnnConv, Conv2dGroupsDilationStride) {
  check(conv_shape(2, {7, 6, 1}, {3, 2, 1}, {1, 2, 1}, {2, 1, 1}, {2, 0, 0}, {1, 1, 0}, 3, 4, 6, 2), true);
}
// Depthwise: one group per input channel, two output channels each.
TEST_P(PluginDnnConv, Conv2dDepthwise) {
  check(conv_shape(2, {5, 5, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}, 2, 3, 6, 3), false);
}
// 3-D: stride, dilation and per-side padding in different dims.
TEST_P(PluginDnnConv, Conv3dStrideDilationPadding) {
  check(conv_shape(3, {4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {1, 1, 2}, {0, 1, 1}, {1, 0, 0}, 2, 2, 2, 1), true);
}
// A kernel as large as the padded input: one output point.
TEST_P(PluginDnnConv, Conv2dKernelCoversInput) {
  check(conv_shape(2, {3, 2, 1}, {4, 3, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}, 2, 2, 2, 1), true);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PluginDnnConv, kDnnDtypes, dtype_label);

// ---- pooling -------------------------------------------------------------------------
namespace {
ref::PoolShape pool_shape(bool max, int ns, ref::Dims in, ref::Dims win, ref::Dims stride, ref::Dims lo, ref::Dims hi,
                          int64_t channels, int64_t batch) {
  ref::PoolShape s;
  s.max = max;
  s.win.nspatial = ns;
  s.win.in = in;
  s.win.kernel = win;
  s.win.stride = stride;
  s.win.pad_lo = lo;
  s.win.pad_hi = hi;
  s.win.fill_out();
  s.channels = channels;
  s.batch = batch;
  return s;
}
flx_pool_desc pool_desc(const ref::PoolShape& s, int32_t t) {
  flx_pool_desc d{};
  d.struct_size = sizeof d;
  d.dtype = t;
  d.mode = s.max ? FLX_POOL_MAX : FLX_POOL_MEAN;
  d.nspatial = s.win.nspatial;
  d.batch = s.batch;
  d.channels = s.channels;
  for (size_t k = 0; k < size_t(s.win.nspatial); ++k) {
    d.in_size[k] = s.win.in[k];
    d.out_size[k] = s.win.out[k];
    d.window[k] = s.win.kernel[k];
    d.stride[k] = s.win.stride[k];
    d.pad_lo[k] = s.win.pad_lo[k];
    d.pad_hi[k] = s.win.pad_hi[k];
  }
  return d;
}
}  // namespace

class PluginDnnPool : public PluginDnn {
 protected:
  // Forward (training, with the reserve the plugin asks for) and backward.
  // nan_at: an element of x set to NaN (the windows holding it give NaN;
  // forward only unless nan_backward: their dy then goes nowhere). given:
  // x's values, else distinct ones.
  void check(const ref::PoolShape& s, long nan_at = -1, const std::vector<double>* given = nullptr,
             bool nan_backward = false) {
    SCOPED_TRACE(std::string(s.max ? "maxpool " : "meanpool ") + dname(t));
    std::vector<double> x = stored(t, given ? *given : distinct_values(s.x_size(), 5));
    if (nan_at >= 0) x[size_t(nan_at)] = std::nan("");
    const std::vector<double> dy = stored(t, grid_values(s.y_size(), -1, 1, 1.0 / 16, 6));
    auto X = buf(x), DY = buf(dy), Y = zeros(s.y_size()), DX = zeros(s.x_size());
    flx_pool_desc d = pool_desc(s, t);
    d.training = 1;
    d.x = X->mem();
    d.y = Y->mem();
    flx::detail::Scratch reserve;
    SKIP_UNLESS_RAN(reserve = be->pool_reserve(0, d); d.reserve = reserve.mem(); d.reserve_bytes = reserve.bytes();
                    be->pool_forward(0, d));
    const std::vector<double> y = ref::pool_forward(s, x);
    // Max is exact; mean's magnitude is the mean of |x|.
    ref::PoolShape mean_of_abs = s;
    mean_of_abs.max = false;
    EXPECT_TRUE(near(t, Y->read(), y, ref::pool_forward(mean_of_abs, absolute(x)), "pool forward y"));
    if (nan_at >= 0 && !nan_backward) return;
    d.dy = DY->mem();
    d.dx = DX->mem();
    ASSERT_TRUE(ran([&] { be->pool_backward(0, d); }));
    ref::PoolShape spread = s;  // the magnitude: every dy that reaches an element, undivided
    spread.max = false;
    std::vector<double> mag = ref::pool_backward(spread, x, absolute(dy));
    for (double& m : mag) m *= double(s.win.kernel_numel());
    EXPECT_TRUE(near(t, DX->read(), ref::pool_backward(s, x, dy), mag, "pool backward dx"));
  }
};

// Overlapping windows (3 wide, stride 2), padding on both sides of dim 0
// and after dim 1 only.
TEST_P(PluginDnnPool, MaxPool2d) {
  check(pool_shape(true, 2, {6, 5, 1}, {3, 2, 1}, {2, 2, 1}, {1, 0, 0}, {1, 1, 0}, 2, 2));
}
TEST_P(PluginDnnPool, MeanPool2dCountsPadding) {
  check(pool_shape(false, 2, {6, 5, 1}, {3, 2, 1}, {2, 2, 1}, {1, 0, 0}, {1, 1, 0}, 2, 2));
}
TEST_P(PluginDnnPool, MaxAndMeanPool1d) {
  check(pool_shape(true, 1, {7, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, 3, 2));
  check(pool_shape(false, 1, {7, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, 3, 2));
}
TEST_P(PluginDnnPool, MaxAndMeanPool3d) {
  check(pool_shape(true, 3, {4, 3, 4}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1}, {1, 0, 0}, 2, 1));
  check(pool_shape(false, 3, {4, 3, 4}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1}, {1, 0, 0}, 2, 1));
}
// A NaN wins every window that holds it; the others are untouched by it.
TEST_P(PluginDnnPool, MaxPoolNaNPropagates) {
  check(pool_shape(true, 2, {6, 5, 1}, {3, 2, 1}, {2, 2, 1}, {1, 0, 0}, {1, 1, 0}, 1, 1), 8);
}

// backend_window.h's rules against the reference, which states them
// independently: of equal maxima (-0 and 0 among them) the first in window
// order takes the gradient; a NaN maximum sends it nowhere (the shape's
// padding is per side: cuDNN does not run it); a window of padding only
// gives -Inf and no gradient.
TEST_P(PluginDnnPool, MaxPoolTiesGoToTheFirstMaximum) {
  const ref::PoolShape s = pool_shape(true, 2, {6, 5, 1}, {3, 2, 1}, {2, 2, 1}, {1, 0, 0}, {1, 1, 0}, 2, 2);
  std::vector<double> x(s.x_size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 4 == 0 ? -0.0 : double((i * 5) % 3) * 0.5 - 0.5;
  check(s, -1, &x);
}
TEST_P(PluginDnnPool, MaxPoolNaNSendsNoGradient) {
  check(pool_shape(true, 2, {6, 5, 1}, {3, 2, 1}, {2, 2, 1}, {1, 0, 0}, {1, 1, 0}, 1, 1), 8, nullptr, true);
}
TEST_P(PluginDnnPool, MaxPoolWindowsOfPaddingOnly) {
  check(pool_shape(true, 1, {4, 1, 1}, {2, 1, 1}, {2, 1, 1}, {2, 0, 0}, {2, 0, 0}, 1, 2));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PluginDnnPool, kDnnDtypes, dtype_label);

// ---- batch normalisation ---------------------------------------------------------------
class PluginDnnBatchNorm : public PluginDnn {
 protected:
  int32_t pt() const { return param_dtype(t); }
  std::vector<double> params(size_t n, uint32_t seed, double lo, double hi) const {
    return stored(pt(), grid_values(n, lo, hi, 1.0 / 16, seed));
  }
  flx_batchnorm_desc desc(const ref::BatchNormShape& s, bool training) const {
    flx_batchnorm_desc d{};
    d.struct_size = sizeof d;
    d.dtype = t;
    d.param_dtype = pt();
    d.training = training;
    d.spatial = s.spatial;
    d.channels = s.channels;
    d.batch = s.batch;
    d.epsilon = s.epsilon;
    d.momentum = s.momentum;
    return d;
  }

  // Training forward: y, saved_mean, saved_invstd and the running statistics.
  bool training(const ref::BatchNormShape& s, bool affine) {
    SCOPED_TRACE(std::string("batchnorm training ") + dname(t) + (affine ? " affine" : ""));
    const size_t C = size_t(s.channels);
    const std::vector<double> x = stored(t, grid_values(s.x_size(), -2, 3, 1.0 / 16, 7));
    const std::vector<double> g = affine ? params(C, 8, 0.5, 2) : std::vector<double>{};
    const std::vector<double> b = affine ? params(C, 9, -1, 1) : std::vector<double>{};
    const std::vector<double> rm = params(C, 10, -0.5, 0.5), rv = params(C, 11, 0.5, 2);
    auto X = buf(x), Y = zeros(s.x_size());
    auto G = affine ? buf(g, pt()) : nullptr, B = affine ? buf(b, pt()) : nullptr;
    auto RM = buf(rm, pt()), RV = buf(rv, pt()), SM = zeros(C, pt()), SI = zeros(C, pt());
    flx_batchnorm_desc d = desc(s, true);
    d.x = X->mem();
    d.y = Y->mem();
    d.scale = G ? G->mem() : flx_mem{};
    d.bias = B ? B->mem() : flx_mem{};
    d.running_mean = RM->mem();
    d.running_var = RV->mem();
    d.saved_mean = SM->mem();
    d.saved_invstd = SI->mem();
    if (!ran([&] { be->batchnorm_forward(0, d); })) return false;
    const ref::BatchNormForward r = ref::batchnorm_forward(s, true, x, g, b, rm, rv);
    std::vector<double> ymag(s.x_size()), ones(C, 1.0), rmag(C);
    for (size_t i = 0; i < ymag.size(); ++i) {
      const size_t c = (i / size_t(s.spatial)) % C;
      ymag[i] = (g.empty() ? 1 : std::fabs(g[c])) * (std::fabs(x[i]) + std::fabs(r.mean[c])) * r.invstd[c] +
                (b.empty() ? 0 : std::fabs(b[c]));
    }
    for (size_t c = 0; c < C; ++c)  // the terms of the update, the unbiased variance at most 4 * 16 / 15 here
      rmag[c] = std::fabs(rm[c]) + std::fabs(rv[c]) + std::fabs(r.mean[c]) + 5;
    EXPECT_TRUE(near(t, Y->read(), r.y, ymag, "y"));
    EXPECT_TRUE(near(pt(), SM->read(), r.mean, std::vector<double>(C, 4.0), "saved_mean"));
    EXPECT_TRUE(near(pt(), SI->read(), r.invstd, r.invstd, "saved_invstd"));
    EXPECT_TRUE(near(pt(), RM->read(), r.running_mean, rmag, "running_mean"));
    EXPECT_TRUE(near(pt(), RV->read(), r.running_var, rmag, "running_var"));
    return true;
  }

  // Backward of the training forward, from the saved statistics the plugin
  // wrote; dscale and dbias when asked for.
  bool backward(const ref::BatchNormShape& s, bool affine) {
    SCOPED_TRACE(std::string("batchnorm backward ") + dname(t) + (affine ? " affine" : ""));
    const size_t C = size_t(s.channels), n = s.x_size();
    const std::vector<double> x = stored(t, grid_values(n, -2, 3, 1.0 / 16, 12));
    const std::vector<double> dy = stored(t, grid_values(n, -1, 1, 1.0 / 16, 13));
    const std::vector<double> g = affine ? params(C, 14, 0.5, 2) : std::vector<double>{};
    auto X = buf(x), DY = buf(dy), Y = zeros(n), DX = zeros(n), SM = zeros(C, pt()), SI = zeros(C, pt());
    auto G = affine ? buf(g, pt()) : nullptr;
    auto DG = zeros(C, pt()), DB = zeros(C, pt());
    flx_batchnorm_desc d = desc(s, true);
    d.x = X->mem();
    d.y = Y->mem();
    d.scale = G ? G->mem() : flx_mem{};
    d.saved_mean = SM->mem();
    d.saved_invstd = SI->mem();
    if (!ran([&] { be->batchnorm_forward(0, d); })) return false;  // no running statistics
    d.dy = DY->mem();
    d.dx = DX->mem();
    d.dscale = affine ? DG->mem() : flx_mem{};
    d.dbias = affine ? DB->mem() : flx_mem{};
    EXPECT_TRUE(ran([&] { be->batchnorm_backward(0, d); }));
    const ref::BatchNormBackward r = ref::batchnorm_backward(s, x, dy, g);
    const ref::BatchNormForward f = ref::batchnorm_forward(s, true, x, {}, {}, {}, {});
    std::vector<double> dxmag(n), sum_abs(C, 0.0), sum_abs_xhat(C, 0.0);
    auto xhat = [&](size_t i) {
      const size_t c = (i / size_t(s.spatial)) % C;
      return (x[i] - f.mean[c]) * f.invstd[c];
    };
    for (size_t i = 0; i < n; ++i) {
      const size_t c = (i / size_t(s.spatial)) % C;
      sum_abs[c] += std::fabs(dy[i]);
      sum_abs_xhat[c] += std::fabs(dy[i] * xhat(i));
    }
    const double m = double(s.spatial * s.batch);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = (i / size_t(s.spatial)) % C;
      dxmag[i] = (g.empty() ? 1 : std::fabs(g[c])) * f.invstd[c] *
                 (std::fabs(dy[i]) + sum_abs[c] / m + std::fabs(xhat(i)) * sum_abs_xhat[c] / m + 1);
    }
    EXPECT_TRUE(near(t, DX->read(), r.dx, dxmag, "dx"));
    if (affine) {
      EXPECT_TRUE(near(pt(), DG->read(), r.dscale, sum_abs_xhat, "dscale"));
      EXPECT_TRUE(near(pt(), DB->read(), r.dbias, sum_abs, "dbias"));
    } else {  // NULL dscale and dbias: nothing written
      EXPECT_TRUE(near(pt(), DG->read(), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0), "dscale untouched"));
    }
    return true;
  }
};

namespace {
ref::BatchNormShape bn_shape(int64_t spatial, int64_t channels, int64_t batch) {
  ref::BatchNormShape s;
  s.spatial = spatial;
  s.channels = channels;
  s.batch = batch;
  s.epsilon = 1e-3;
  s.momentum = 0.1;
  return s;
}
}  // namespace

// After a convolution (spatial 6) and after a Dense layer (spatial 1).
TEST_P(PluginDnnBatchNorm, TrainingWithAffineParameters) {
  if (!training(bn_shape(6, 3, 4), true)) GTEST_SKIP() << dname(t) << " answered unsupported: " << unsupported_;
  training(bn_shape(1, 5, 7), true);
}
TEST_P(PluginDnnBatchNorm, TrainingWithoutAffineParameters) {
  if (!training(bn_shape(6, 3, 4), false)) GTEST_SKIP() << dname(t) << " answered unsupported: " << unsupported_;
}
// One element per channel: the biased variance is 0, the running one keeps it (m = 1).
TEST_P(PluginDnnBatchNorm, TrainingOneElementPerChannel) {
  if (!training(bn_shape(1, 3, 1), true)) GTEST_SKIP() << dname(t) << " answered unsupported: " << unsupported_;
}
// Inference: y from the running statistics, which stay as they are.
TEST_P(PluginDnnBatchNorm, Inference) {
  const ref::BatchNormShape s = bn_shape(4, 3, 2);
  const size_t C = size_t(s.channels);
  const std::vector<double> x = stored(t, grid_values(s.x_size(), -2, 3, 1.0 / 16, 15));
  const std::vector<double> g = params(C, 16, 0.5, 2), b = params(C, 17, -1, 1);
  const std::vector<double> rm = params(C, 18, -0.5, 0.5), rv = params(C, 19, 0.5, 2);
  auto X = buf(x), Y = zeros(s.x_size()), G = buf(g, pt()), B = buf(b, pt()), RM = buf(rm, pt()), RV = buf(rv, pt());
  flx_batchnorm_desc d = desc(s, false);
  d.x = X->mem();
  d.y = Y->mem();
  d.scale = G->mem();
  d.bias = B->mem();
  d.running_mean = RM->mem();
  d.running_var = RV->mem();
  SKIP_UNLESS_RAN(be->batchnorm_forward(0, d));
  const ref::BatchNormForward r = ref::batchnorm_forward(s, false, x, g, b, rm, rv);
  std::vector<double> ymag(s.x_size());
  for (size_t i = 0; i < ymag.size(); ++i) {
    const size_t c = (i / size_t(s.spatial)) % C;
    ymag[i] = std::fabs(g[c]) * (std::fabs(x[i]) + std::fabs(rm[c])) * r.invstd[c] + std::fabs(b[c]);
  }
  EXPECT_TRUE(near(t, Y->read(), r.y, ymag, "y"));
  EXPECT_TRUE(near(pt(), RM->read(), rm, std::vector<double>(C, 0.0), "running_mean unchanged"));
  EXPECT_TRUE(near(pt(), RV->read(), rv, std::vector<double>(C, 0.0), "running_var unchanged"));
}
TEST_P(PluginDnnBatchNorm, BackwardWithScale) {
  if (!backward(bn_shape(6, 3, 4), true)) GTEST_SKIP() << dname(t) << " answered unsupported: " << unsupported_;
  backward(bn_shape(1, 4, 9), true);
}
TEST_P(PluginDnnBatchNorm, BackwardWithoutScale) {
  if (!backward(bn_shape(6, 3, 4), false)) GTEST_SKIP() << dname(t) << " answered unsupported: " << unsupported_;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PluginDnnBatchNorm, kDnnDtypes, dtype_label);

// ---- the table, and descriptors that do not fit -----------------------------------------
// A plugin at ABI 2.5 lists the table with every required call; one without
// it gets NotImplemented naming the table from every op of it.
TEST(PluginDnnTable, ServedOrNamedAsMissing) {
  const Plugin& p = plugin();
  ASSERT_TRUE(p.load_error.empty()) << p.load_error;
  const Backend& be = *p.be;
  if (std::string(FLX_TEST_PLUGIN_NAME) == "OpenCL" && FLX_TEST_PLUGIN_MINOR >= 5) EXPECT_TRUE(be.has_dnn());
  if (be.has_dnn()) {
    bool listed = false;
    for (const auto& t : be.tables())
      if (t.name == FLX_TABLE_DNN) {
        listed = true;
        EXPECT_EQ(t.version, FLX_TABLE_DNN_VERSION);
        EXPECT_TRUE(t.listed) << "list_tables names it";
        EXPECT_TRUE(t.missing.empty()) << "dnn calls left NULL: " << t.missing.size();
      }
    EXPECT_TRUE(listed);
    return;
  }
  const ref::ConvShape s = conv_shape(1, {5, 1, 1}, {3, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1, 1, 1, 1);
  std::string m;
  try {
    be.conv(0, conv_desc(s, FLX_F32), FLX_CONV_FORWARD);
  } catch (const flx::NotImplemented& e) {
    m = e.what();
  }
  EXPECT_TRUE(has(m, "provides no \"dnn\" table")) << m;
  EXPECT_EQ(has(m, "(the table came with ABI 2.5)"), FLX_TEST_PLUGIN_MINOR < 5) << m;
  GTEST_SKIP() << why_no_dnn() << " (its ops say so: " << m << ")";
}

class PluginDnnErrors : public PluginDnn {};

// Typed errors, before anything runs: FLX_ERR_INVALID_ARGUMENT is a
// BackendError "(invalid argument)" naming what does not fit.
TEST_P(PluginDnnErrors, BadDescriptorsAreInvalidArguments) {
  const ref::ConvShape s = conv_shape(2, {5, 4, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}, 1, 4, 2, 2);
  auto X = zeros(s.x_size()), W = zeros(s.w_size()), Y = zeros(s.y_size());
  auto with_bufs = [&](flx_conv_desc d) {
    d.x = X->mem();
    d.w = W->mem();
    d.y = Y->mem();
    return d;
  };
  {  // sanity: the shape itself runs
    SCOPED_TRACE("valid descriptor");
    be->conv(0, with_bufs(conv_desc(s, t)), FLX_CONV_FORWARD);
    be->synchronize(0);
  }
  // struct_size: Backend sets it, so the call goes to the table directly (still through Backend::run).
  flx_conv_desc d = with_bufs(conv_desc(s, t));
  d.struct_size = 16;
  EXPECT_BACKEND_ERROR(be->run<&flx_dnn_table::conv_forward>(be->table<flx_dnn_table>(), {"conv", t}, 0, &d),
                       "(invalid argument)", "struct_size");
  d = with_bufs(conv_desc(s, t));
  d.groups = 3;  // 4 input channels are not a multiple of 3
  EXPECT_BACKEND_ERROR(be->conv(0, d, FLX_CONV_FORWARD), "(invalid argument)", "groups");
  d = with_bufs(conv_desc(s, t));
  d.groups = 0;
  EXPECT_BACKEND_ERROR(be->conv(0, d, FLX_CONV_FORWARD), "(invalid argument)", "groups");
  d = with_bufs(conv_desc(s, t));
  d.out_size[0] += 1;
  EXPECT_BACKEND_ERROR(be->conv(0, d, FLX_CONV_FORWARD), "(invalid argument)", "out");
  d = with_bufs(conv_desc(s, t));
  d.nspatial = 4;
  EXPECT_BACKEND_ERROR(be->conv(0, d, FLX_CONV_FORWARD), "(invalid argument)", "nspatial");
  d = with_bufs(conv_desc(s, t));
  d.batch = 3;  // x, y hold one sample
  EXPECT_BACKEND_ERROR(be->conv(0, d, FLX_CONV_FORWARD), "(invalid argument)");

  ref::PoolShape ps = pool_shape(true, 2, {5, 4, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, 1, 1);
  auto PX = zeros(ps.x_size()), PY = zeros(ps.y_size());
  flx_pool_desc pd = pool_desc(ps, t);
  pd.x = PX->mem();
  pd.y = PY->mem();
  pd.out_size[1] = 5;
  EXPECT_BACKEND_ERROR(be->pool_forward(0, pd), "(invalid argument)", "out");
  pd.struct_size = 8;
  pd.out_size[1] = ps.win.out[1];
  EXPECT_BACKEND_ERROR(be->run<&flx_dnn_table::pool_forward>(be->table<flx_dnn_table>(), {"maxpool", t}, 0, &pd),
                       "(invalid argument)", "struct_size");

  auto BX = zeros(12), BY = zeros(12);
  flx_batchnorm_desc bd{};
  bd.dtype = t;
  bd.param_dtype = param_dtype(t);
  bd.training = 0;  // inference without running statistics
  bd.spatial = 2;
  bd.channels = 3;
  bd.batch = 2;
  bd.epsilon = 1e-5;
  bd.x = BX->mem();
  bd.y = BY->mem();
  EXPECT_BACKEND_ERROR(be->batchnorm_forward(0, bd), "(invalid argument)", "running");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PluginDnnErrors, ::testing::Values(FLX_F32), dtype_label);

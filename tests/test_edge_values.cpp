// Results at the edges of the number line, on every device: uniform draws
// never reach their excluded upper bound (narrow types round up to it),
// maximum/minimum of infinities are those infinities in every floating
// dtype, and a null pointer with elements to read is a typed error.
#include <cmath>
#include <limits>

#include "test_util.hpp"
#include "ulps.hpp"

using namespace flx;

namespace {

const DType kFloating[] = {Float32, Float64, Float16, BFloat16};

// A device's tensor x of dtype t, all of whose n values are v.
Tensor filled(DType t, double v, int64_t n, Device dev) { return full(t, v, Shape{n}).to(dev); }

}  // namespace

// 10^6 draws per type: with 11 significant bits (Float16) about 1 draw in
// 4000 rounds to 1.0, with 8 (BFloat16) about 1 in 500, so a fill that lets
// them through fails here with certainty.
TEST(EdgeValues, UniformDrawsStayBelowTheirUpperBound) {
  constexpr int64_t kDraws = 1'000'000;
  for (DType t : kFloating) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<double> v = rand(t, Shape{kDraws}).to_vector<double>();
    double lo = 1, hi = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, 0.0);
    EXPECT_LT(hi, 1.0) << "a draw reached the excluded bound";
    // The largest value below 1 is drawn too, where the type is coarse
    // enough for that to be near certain in 10^6 draws.
    if (t == Float16) EXPECT_EQ(hi, 1.0 - 0x1p-11);
    if (t == BFloat16) EXPECT_EQ(hi, 1.0 - 0x1p-8);
  }
}

TEST(EdgeValues, ExtremaOfInfinitiesAreInfinite) {
  const double inf = std::numeric_limits<double>::infinity();
  // 3 elements take every backend's short path; 70001 its split or chunked
  // one (CUDA splits long runs, OpenCL combines partial chunks).
  for (const Device& dev : flx::testing::conformance_devices())
    for (DType t : kFloating)
      for (int64_t n : {int64_t(3), int64_t(70001)}) {
        SCOPED_TRACE(dev.str() + " " + std::string(dtype_name(t)) + " n=" + std::to_string(n));
        EXPECT_EQ(maximum(filled(t, -inf, n, dev)).item<double>(), -inf);
        EXPECT_EQ(minimum(filled(t, inf, n, dev)).item<double>(), inf);
        EXPECT_EQ(maximum(filled(t, inf, n, dev)).item<double>(), inf);
        EXPECT_EQ(minimum(filled(t, -inf, n, dev)).item<double>(), -inf);
        // along a dim: each column of all -Inf gives -Inf
        Tensor cols = full(t, -inf, Shape{n, 2}).to(dev);
        EXPECT_EQ(maximum(cols, {0}).to_vector<double>(), (std::vector<double>{-inf, -inf}));
        EXPECT_EQ(minimum(-cols, {0}).to_vector<double>(), (std::vector<double>{inf, inf}));
        // the extremes of the finite range are still found past them
        const double big = t == Float16 ? 65504.0 : t == BFloat16 ? 0x1.fep127 : t == Float32 ? 0x1.fffffep127 : 0x1.fffffffffffffp1023;
        Tensor mixed = tensor(std::vector<double>{-inf, -big, -inf}, {3}).to(t).to(dev);
        EXPECT_EQ(maximum(mixed).item<double>(), -big);
      }
}

TEST(EdgeValues, EmptyReductionsBehaveAsBefore) {
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    Tensor e = zeros(Float32, Shape{0, 3}).to(dev);
    EXPECT_THROW((void)maximum(e), ArgumentError);
    EXPECT_THROW((void)minimum(e, {0}), ArgumentError);
    EXPECT_EQ(sum(e).item<double>(), 0.0);
    EXPECT_EQ(sum(e, {0}).to_vector<double>(), (std::vector<double>{0, 0, 0}));
    EXPECT_THROW((void)mean(e), ArgumentError);
  }
}

TEST(EdgeValues, ANullPointerWithElementsIsATypedError) {
  try {
    (void)from_host(nullptr, Float32, Shape{3});
    FAIL() << "from_host(nullptr, Float32, {3}) did not throw";
  } catch (const ArgumentError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("null pointer"), std::string::npos) << m;
    EXPECT_NE(m.find("3 Float32"), std::string::npos) << m;
  }
  // No elements to read: nothing is read, as with any empty shape.
  Tensor none = from_host(nullptr, Float64, Shape{0, 4});
  EXPECT_EQ(none.shape(), (Shape{0, 4}));
  EXPECT_EQ(none.dtype(), Float64);
}

// The CPU's Float32 exp, tanh, sigmoid and gelu run in 8 lanes with its own
// polynomials (backends/cpu/cpu_vector_math.hpp), not libm: within 1 or 2
// floats of the exact value over [-90, 90] (here: exp 1, tanh 1, sigmoid 2,
// gelu 1.5 in ulps of x/2 where it cancels), with libm's special values, and the same
// bits for an element whether its row is contiguous (8 lanes) or strided
// (one at a time).
TEST(EdgeValues, Float32ExpTanhSigmoidAndGeluAreWithinAFewUlpsOfExact) {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(float(i) * 4.5e-4f);       // [-90, 90]
  for (int e = -40; e <= 0; ++e) xs.push_back(std::ldexp(1.2345f, e)), xs.push_back(-std::ldexp(1.2345f, e));
  const int64_t n = int64_t(xs.size());
  const Tensor x = tensor(xs, {n});
  using F = double (*)(double);
  const std::vector<std::tuple<std::string, Tensor, F, double>> cases = {
      {"exp", flx::exp(x), [](double v) { return std::exp(v); }, 1},
      {"tanh", flx::tanh(x), [](double v) { return std::tanh(v); }, 2},
      {"sigmoid", flx::sigmoid(x), [](double v) { return 1 / (1 + std::exp(-v)); }, 2},
      {"gelu", flx::gelu(x), [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }, 2},
  };
  for (const auto& [name, y, exact, tol] : cases) {
    SCOPED_TRACE(name);
    const std::vector<float> got = y.to_vector<float>();
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = exact(double(xs[size_t(i)]));
      if (std::fabs(want) < double(std::numeric_limits<float>::min())) continue;  // flushed below FLT_MIN
      // gelu: its 1 + tanh(u) cancels for x below -3 (where tanh(u) nears
      // -1), in float as written, so its error there is counted in ulps of
      // x/2 (an ulp of that 1 + tanh(u), times x/2)
      const double scale = name == "gelu" ? std::max(std::fabs(want), 0.5 * std::fabs(double(xs[size_t(i)]))) : 0.0;
      const double u = name == "gelu" ? std::fabs(got[size_t(i)] - want) / flx::testing::ulp_of(scale, Float32)
                                      : flx::testing::ulps_between(got[size_t(i)], want, Float32);
      if (u > worst) worst = u, at = i;
    }
    EXPECT_LE(worst, tol) << "at x = " << xs[size_t(at)] << ": " << got[size_t(at)];
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor s = tensor(std::vector<float>{inf, -inf, nan, -0.0f, 0.0f, 100.0f, -100.0f}, {7});
  const std::vector<float> e = flx::exp(s).to_vector<float>(), t = flx::tanh(s).to_vector<float>();
  EXPECT_EQ(e[0], inf);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 1.0f);
  EXPECT_EQ(e[5], inf);
  EXPECT_EQ(e[6], 0.0f);
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[1], -1.0f);
  EXPECT_TRUE(std::isnan(t[2]));
  EXPECT_TRUE(std::signbit(t[3]) && t[3] == 0.0f);
  EXPECT_EQ(t[5], 1.0f);
  EXPECT_EQ(t[6], -1.0f);
  // A strided operand (a transpose's view) takes the one-at-a-time path.
  const Tensor m = reshape(x.slice_last(0, 40000), {200, 200});
  for (auto f : {+[](const Tensor& v) { return flx::tanh(v); }, +[](const Tensor& v) { return flx::exp(v); }}) {
    EXPECT_EQ(f(permutedims(m, {1, 0})).to_vector<float>(), permutedims(f(m), {1, 0}).to_vector<float>());
  }
}

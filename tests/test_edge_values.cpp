// Results at the edges of the number line, on every device: uniform draws
// never reach their excluded upper bound (narrow types round up to it),
// maximum/minimum of infinities are those infinities in every floating
// dtype, and a null pointer with elements to read is a typed error.
#include <cmath>
#include <limits>

#include "test_util.hpp"

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

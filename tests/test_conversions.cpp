// Converting between element types, on every device (docs/dtypes.md,
// "Converting"): into Float16 and BFloat16 a value rounds once, from a
// Float64 or an integer too (not through Float32, which rounds twice); into
// an integer type it saturates, NaN to 0; x.to(t), full(t, v) and a scalar
// operand follow the one rule. The references are computed here in long
// double arithmetic (exact scaling by powers of two, and nearbyint), not
// with flx's bit manipulations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace flx;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A binary format: p significant bits, smallest normal 2^emin, largest finite `big`.
struct Format {
  DType dtype;
  int p, emin;
  long double big;
};
const Format kHalf{Float16, 11, -14, 65504.0L};
const Format kBHalf{BFloat16, 8, -126, 0x1.fep127L};

// v rounded once to nearest, ties to even, in format f; Inf past its range
// (as IEEE: from the largest finite plus half an ulp on). Dividing by a
// power of two is exact, and nearbyint rounds ties to even.
double round_once(long double v, const Format& f) {
  if (std::isnan(v)) return kNaN;
  if (v == 0 || std::isinf(v)) return double(v);
  const int e = std::max(std::ilogb(v), f.emin);
  const long double ulp = std::ldexp(1.0L, e - (f.p - 1));
  const long double r = std::nearbyint(v / ulp) * ulp;
  if (std::fabs(r) > f.big) return std::copysign(kInf, double(v));
  return double(r);
}

// Same bits, NaN matching NaN.
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i])
                                          : got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]);
    if (!same && shown++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
  }
}

// Doubles near a format's ties: a random value of the format (sign,
// exponent from emin - 11 to top, random significand), moved by half an
// ulp and then by a little more, a little less, or nothing, so that a
// double rounding (through Float32, which drops the "little") shows.
std::vector<double> near_ties(const Format& f, int top, int n, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const int e = f.emin - 11 + int(gen() % uint64_t(top - f.emin + 12));
    const int ulp_e = std::max(e, f.emin) - (f.p - 1);
    const double m = std::ldexp(double(gen() % (uint64_t(1) << f.p)), ulp_e);
    const double half = std::ldexp(1.0, ulp_e - 1);
    const double little = std::ldexp(1.0, ulp_e - 1 - 30);  // below Float32's precision there
    const int which = int(gen() % 3);
    const double x = m + half + (which == 0 ? little : which == 1 ? -little : 0.0);
    v.push_back(gen() % 2 ? -x : x);
  }
  return v;
}

}  // namespace

TEST(Conversions, Float64RoundsOnceToTheHalvesOnEveryDevice) {
  for (const Format& f : {kHalf, kBHalf}) {
    std::vector<double> v = {1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40, 65519.9999999, 65520.0, -65520.0,
                             0x1p-25,               0x1p-25 + 0x1p-60,   0x1p-134 + 0x1p-170,    1e300,
                             -1e-300,               -0.0,                kInf,                 -kInf,
                             kNaN,                  0x1.fefffffffp127,    0x1.ff00000001p127};
    const std::vector<double> ties = near_ties(f, f.dtype == Float16 ? 17 : 128, 4000, 39);
    v.insert(v.end(), ties.begin(), ties.end());
    std::vector<double> want;
    for (double x : v) want.push_back(round_once(x, f));
    // The cases the issue names: once, not twice.
    if (f.dtype == Float16) {
      EXPECT_EQ(want[0], 1.0009765625);
      EXPECT_EQ(want[2], 65504.0);
      EXPECT_EQ(want[3], kInf);
      EXPECT_EQ(want[6], 0x1p-24);
    } else {
      EXPECT_EQ(want[1], 1.0078125);
    }
    const Tensor x = tensor(v, Shape{int64_t(v.size())});
    for (const Device& dev : flx::testing::conformance_devices()) {
      const std::string what = dev.str() + " Float64 -> " + std::string(dtype_name(f.dtype));
      expect_same(x.to(dev).to(f.dtype).to(Device::cpu()).to_vector<double>(), want, what);
      // A fill (full on the CPU, a padding's value on the device) and a
      // scalar operand become elements by the same rule.
      for (size_t i : {size_t(0), size_t(1), size_t(2), size_t(6)}) {
        const std::string value = " of " + std::to_string(v[i]);
        expect_same(full(f.dtype, v[i], Shape{3}).to_vector<double>(), std::vector<double>(3, want[i]), what + " full" + value);
        expect_same(pad_constant(zeros(f.dtype, Shape{1}).to(dev), {2, 0}, v[i]).to_vector<double>(),
                    {want[i], want[i], 0.0}, what + " pad_constant" + value);
        expect_same((zeros(f.dtype, Shape{3}).to(dev) + v[i]).to_vector<double>(), std::vector<double>(3, want[i]),
                    what + " zeros +" + value);
      }
    }
  }
}

TEST(Conversions, IntegersRoundOnceToTheHalvesOnEveryDevice) {
  // 2^24 + 2^16 + 1 through Float32 is 2^24 + 2^16 (a tie for BFloat16),
  // then 2^24; rounded once it is 2^24 + 2^17.
  std::vector<int64_t> v = {(1 << 24) + (1 << 16) + 1, 2049, 2051, 65519, 65520, -65536, 0, -1,
                            std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                            (int64_t(1) << 62) + (int64_t(1) << 54) + 1};
  std::mt19937_64 gen(7);
  for (int i = 0; i < 2000; ++i) {
    const int bits = 1 + int(gen() % 63);
    const int64_t m = int64_t(gen() >> (64 - bits));
    v.push_back(gen() % 2 ? -m : m);
  }
  for (const Format& f : {kHalf, kBHalf}) {
    std::vector<double> want;
    for (int64_t x : v) want.push_back(round_once((long double)x, f));
    if (f.dtype == BFloat16) EXPECT_EQ(want[0], double((1 << 24) + (1 << 17)));
    for (DType src : {Int64, Int32}) {
      std::vector<double> want_src;
      std::vector<int64_t> kept;
      for (size_t i = 0; i < v.size(); ++i)
        if (src == Int64 || (v[i] >= INT32_MIN && v[i] <= INT32_MAX)) kept.push_back(v[i]), want_src.push_back(want[i]);
      const Tensor x = tensor(kept, Shape{int64_t(kept.size())}).to(src);
      for (const Device& dev : flx::testing::conformance_devices())
        expect_same(x.to(dev).to(f.dtype).to(Device::cpu()).to_vector<double>(), want_src,
                    dev.str() + " " + std::string(dtype_name(src)) + " -> " + std::string(dtype_name(f.dtype)));
    }
  }
}

TEST(Conversions, FloatingIntoIntegersSaturatesWithNaNAsZeroOnEveryDevice) {
  const std::vector<double> v = {-1,   300,   2.7,          -2.7,           kNaN,   kInf,    -kInf, 255.9,
                                 1e10, -1e10, 2147483647.5, -2147483649.0, 9.3e18, -9.3e18, -0.0,  0.9};
  for (DType from : {Float32, Float64, Float16, BFloat16}) {
    const Tensor x = tensor(v, Shape{int64_t(v.size())}).to(from);
    const std::vector<double> held = x.to_vector<double>();  // the values as `from` holds them
    for (DType to : {UInt8, Int32, Int64}) {
      const int64_t lo = to == UInt8 ? 0 : to == Int32 ? INT32_MIN : std::numeric_limits<int64_t>::min();
      const int64_t hi = to == UInt8 ? 255 : to == Int32 ? INT32_MAX : std::numeric_limits<int64_t>::max();
      std::vector<int64_t> want;
      for (double h : held) {
        const double t = std::trunc(h);
        want.push_back(std::isnan(h)            ? 0
                       : t <= double(lo)        ? lo
                       : t >= 2.0 * double(hi / 2 + 1) ? hi  // hi + 1, a power of two, exact as a double
                                                : std::min(int64_t(t), hi));
      }
      for (const Device& dev : flx::testing::conformance_devices())
        EXPECT_EQ(x.to(dev).to(to).to(Device::cpu()).to_vector<int64_t>(), want)
            << dev.str() << " " << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
  // The cases, spelled out.
  EXPECT_EQ(tensor(std::vector<float>{-1, 300}, {2}).to(UInt8).to_vector<int64_t>(), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(tensor(std::vector<float>{NAN}, {1}).to(Int32).to_vector<int64_t>(), (std::vector<int64_t>{0}));
}

TEST(Conversions, IntegersIntoNarrowerIntegersSaturateOnEveryDevice) {
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  const Tensor x = tensor(std::vector<int64_t>{300, -1, 255, big, small, int64_t(1) << 40, 7}, {7});
  for (const Device& dev : flx::testing::conformance_devices()) {
    SCOPED_TRACE(dev.str());
    EXPECT_EQ(x.to(dev).to(UInt8).to(Device::cpu()).to_vector<int64_t>(),
              (std::vector<int64_t>{255, 0, 255, 255, 0, 255, 7}));
    EXPECT_EQ(x.to(dev).to(Int32).to(Device::cpu()).to_vector<int64_t>(),
              (std::vector<int64_t>{300, -1, 255, INT32_MAX, INT32_MIN, INT32_MAX, 7}));
    const Tensor i32 = tensor(std::vector<int32_t>{-5, 300, 200}, {3});
    EXPECT_EQ(i32.to(dev).to(UInt8).to(Device::cpu()).to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 200}));
    // A fill past the type saturates too (it did before: saturating_cast).
    EXPECT_EQ(full(UInt8, -3.0, Shape{2}).to(dev).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  }
}

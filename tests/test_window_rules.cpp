// The window rules of include/flx/backend_window.h on every device, the CPU
// included, in every floating dtype: which element of a max pooling window
// is its maximum and takes the gradient (padding never wins, a NaN wins and
// stays, the first of equal maxima, -0 and 0 alike, keeps it), and softmax's
// row maximum (a row that holds a NaN comes out NaN; a large value shifts
// the row, so nothing overflows). Each case states its expected values, so a
// change to the shared body (which every backend compiles, so that they
// would still agree with each other) fails here; and each device's result
// must be the CPU's, bit for bit (NaN matching NaN, -0 matching only -0).
//
// The inputs reach the CPU's fast loops, which keep the rule in their own
// form (backend_window.h's header): an unpadded 2x2 window at stride 2 is
// cpu_dnn_direct.cpp's WindowScan forward and 2x2 backward; a padded window
// its general loops; softmax over dim 1 of a matrix (contiguous rows) the
// Float32 8-lane row maximum, over dim 2 the general loop.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace flx;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Param {
  Device device;
  DType dtype;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.device << " " << p.dtype; }

std::vector<Param> params() {
  std::vector<Param> p;
  std::vector<Device> devices{Device::cpu()};
  for (const auto& d : flx::testing::accelerator_devices()) devices.push_back(d);
  for (const auto& d : devices)
    for (DType t : {Float32, Float64, Float16, BFloat16}) p.push_back({d, t});
  return p;
}
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Device& d = info.param.device;
  return std::string(d.backend()) + (d.is_cpu() ? "" : std::to_string(d.ordinal())) + "_" +
         std::string(dtype_name(info.param.dtype));
}

// Same value, NaN matching NaN and the sign of a zero counted.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same(got[i], want[i])) << what << " [" << i << "]: got " << got[i] << ", expected " << want[i];
}

class WindowRules : public ::testing::TestWithParam<Param> {
 protected:
  Device dev() const { return GetParam().device; }
  DType t() const { return GetParam().dtype; }
  Tensor on(const std::vector<double>& v, const Shape& s, Device d) const { return tensor(v, s).to(t()).to(d); }
  // The CPU, then the device (once when it is the CPU).
  std::vector<Device> devices() const {
    if (dev().is_cpu()) return {Device::cpu()};
    return {Device::cpu(), dev()};
  }

  // f(x) and the gradient of sum(f(x) .* w), on the device, against the
  // expected values and against the CPU's.
  void check(const std::string& what, const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& x,
             const Shape& xs, const std::vector<double>& w, const Shape& ys, const std::vector<double>& y_want,
             const std::vector<double>* dx_want) {
    SCOPED_TRACE(what);
    std::vector<double> y_cpu, dx_cpu;
    for (Device d : devices()) {
      const std::string where = what + " on " + d.str();
      Tensor xd = on(x, xs, d);
      const std::vector<double> y = f(xd).to(Device::cpu()).to_vector<double>();
      expect_same(y, y_want, where + ": forward");
      if (d.is_cpu()) y_cpu = y;
      else expect_same(y, y_cpu, where + ": forward against the CPU");
      if (!dx_want) continue;
      Tensor wd = on(w, ys, d);
      auto loss = [&](const Tensor& v) { return sum(f(v) * wd); };
      const std::vector<double> dx = std::get<0>(gradient(loss, xd)).to(Device::cpu()).to_vector<double>();
      expect_same(dx, *dx_want, where + ": gradient");
      if (d.is_cpu()) dx_cpu = dx;
      else expect_same(dx, dx_cpu, where + ": gradient against the CPU");
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, WindowRules, ::testing::ValuesIn(params()), param_name);

// 2x2 windows at stride 2, no padding (4 x 2 planes, x fastest; window
// order a b on the first row, c d on the second), two channels.
TEST_P(WindowRules, MaxPoolTiesNaNAndZerosUnpadded) {
  const std::vector<double> x = {
      // channel 0: window 0 = (1, 3 / 3, 2): the first 3 (b) wins the tie;
      // window 1 = (0, NaN / 7, -1): the NaN wins, 7 after it does not, no gradient.
      1, 3, 0, kNaN,  //
      3, 2, 7, -1,    //
      // channel 1: window 0 = (-0, 0 / -1, -2): -0 first, 0 equal to it; window 1 all -3: the first.
      -0.0, 0, -3, -3,  //
      -1, -2, -3, -3};
  const std::vector<double> y = {3, kNaN, -0.0, -3};
  const std::vector<double> dx = {0, 10, 0, 0, 0, 0, 0, 0,  //
                                  30, 0, 40, 0, 0, 0, 0, 0};
  check("maxpool 2x2", [](const Tensor& v) { return maxpool(v, {2, 2}); }, x, {4, 2, 2, 1}, {10, 20, 30, 40},
        {2, 1, 2, 1}, y, &dx);
}

// Windows of 3 at stride 3 with a padding element before the first (1-d, six
// elements): padding (zero) never wins over negative values.
TEST_P(WindowRules, MaxPoolTiesNaNAndInfinitiesPadded) {
  const std::vector<double> x = {
      // channel 0: window 0 = (pad, -2, -2): the first -2; window 1 = (3, NaN, 4): NaN, no gradient.
      -2, -2, 3, kNaN, 4, -7,
      // channel 1: window 0 = (pad, -Inf, -Inf): -Inf, the first takes the gradient; window 1 = (1, 2, 2): the first 2.
      -kInf, -kInf, 1, 2, 2, 0};
  const std::vector<double> y = {-2, kNaN, -kInf, 2};
  const std::vector<double> dx = {10, 0, 0, 0, 0, 0,  //
                                  30, 0, 0, 40, 0, 0};
  check("maxpool padded", [](const Tensor& v) { return maxpool(v, {3}, {.pad = 1}); }, x, {6, 2, 1}, {10, 20, 30, 40},
        {2, 2, 1}, y, &dx);
}

// Softmax's rows: a NaN makes its row NaN; a row's maximum is subtracted
// first (1000 would overflow exp); -Inf gives 0. The values are exact in
// every dtype. Over dim 1 the rows are contiguous, over dim 2 strided.
TEST_P(WindowRules, SoftmaxRowsWithNaNInfinitiesAndLargeValues) {
  // Row r, element j at x[j + 4 r] (dim 1) or at x[r + 4 j] (dim 2, a 4 x 4 transpose).
  const std::vector<std::vector<double>> rows = {
      {1, kNaN, 2, 3}, {0, 0, 0, 0}, {-kInf, 0, -kInf, 0}, {1000, 0, 0, 0}};
  const std::vector<std::vector<double>> soft = {
      {kNaN, kNaN, kNaN, kNaN}, {0.25, 0.25, 0.25, 0.25}, {0, 0.5, 0, 0.5}, {1, 0, 0, 0}};
  const std::vector<std::vector<double>> logsoft = {
      {kNaN, kNaN, kNaN, kNaN}, {}, {}, {0, -1000, -1000, -1000}};
  for (int dim : {0, 1}) {
    std::vector<double> x(16), y(16);
    auto at = [&](size_t r, size_t j) { return dim == 0 ? j + 4 * r : r + 4 * j; };
    for (size_t r = 0; r < 4; ++r)
      for (size_t j = 0; j < 4; ++j) x[at(r, j)] = rows[r][j], y[at(r, j)] = soft[r][j];
    check("softmax over dim " + std::to_string(dim + 1), [dim](const Tensor& v) { return softmax(v, dim); }, x,
          {4, 4}, {}, {4, 4}, y, nullptr);
    // logsoftmax: the rows whose values are exact in every dtype (-log 2 is
    // not: that row is checked for its -Inf only).
    for (Device d : devices()) {
      const std::vector<double> ls = logsoftmax(on(x, {4, 4}, d), dim).to(Device::cpu()).to_vector<double>();
      for (size_t r : {size_t(0), size_t(3)})
        for (size_t j = 0; j < 4; ++j)
          EXPECT_TRUE(same(ls[at(r, j)], logsoft[r][j]))
              << "logsoftmax over dim " << dim + 1 << " on " << d << " row " << r << " [" << j << "]: got "
              << ls[at(r, j)];
      for (size_t j : {size_t(0), size_t(2)}) EXPECT_TRUE(same(ls[at(2, j)], -kInf)) << d;
    }
  }
}

}  // namespace

// The ops conformance suite: every op on every available device, checked
// against closed forms (and so against the CPU).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_close;
using flx::testing::expect_values;

class Ops : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor on(const Tensor& t) const { return t.to(dev()); }
  Tensor vec(std::vector<float> v, Shape s = {}) const {
    if (s.ndims() == 0) s = Shape{int64_t(v.size())};
    return on(tensor(v, s));
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, Ops, ::testing::ValuesIn(flx::testing::conformance_devices()),
                         [](const auto& info) { return std::string(info.param.backend()) + std::to_string(info.param.ordinal()); });

TEST_P(Ops, ArithmeticAndBroadcasting) {
  Tensor a = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = vec({10, 20}, {2});
  expect_values(a + b, {11, 22, 13, 24, 15, 26});         // bias (2) over (2, 3)
  expect_values(a - vec({1, 2, 3}, {1, 3}), {0, 1, 1, 2, 2, 3});  // row (1, 3)
  expect_values(a * a, {1, 4, 9, 16, 25, 36});
  expect_values(a / b, {0.1, 0.1, 0.3, 0.2, 0.5, 0.3});
  expect_values(-a, {-1, -2, -3, -4, -5, -6});
  expect_values(a * 2, {2, 4, 6, 8, 10, 12});
  expect_values(2.0 - a, {1, 0, -1, -2, -3, -4});
  expect_values(12 / a, {12, 6, 4, 3, 2.4, 2});
  expect_values(a + 0.5, {1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  expect_values(a + sum(a), {22, 23, 24, 25, 26, 27});  // 0-dim broadcasts
  Tensor big = on(rand(300, 200));
  expect_close(big + big, big * 2, 1e-6);  // exercise the threaded path
  Tensor col = on(rand(300, 1));
  auto bv = big.to_vector<float>(), cv = col.to_vector<float>();
  auto s = (big + col).to_vector<float>();
  for (size_t j = 0; j < 200; ++j)
    for (size_t i = 0; i < 300; ++i) ASSERT_FLOAT_EQ(s[i + 300 * j], bv[i + 300 * j] + cv[i]);
}

TEST_P(Ops, ShapeMismatchNamesBothShapesAndTheOp) {
  Tensor a = on(zeros(2, 3)), b = on(zeros(3, 2));
  try {
    (void)(a + b);
    FAIL() << "no exception";
  } catch (const DimensionMismatch& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(2×3)"), std::string::npos) << m;
    EXPECT_NE(m.find("(3×2)"), std::string::npos) << m;
    EXPECT_NE(m.find("+"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(a, a), DimensionMismatch);
  EXPECT_THROW(sum(a, {2}), DimensionMismatch);
}

TEST_P(Ops, PromotionRules) {
  Tensor f32 = on(ones(2)), f64 = on(ones(Float64, 2)), i32 = on(ones(Int32, 2)), i64 = on(ones(Int64, 2));
  Tensor bl = on(tensor({true, false})), h = on(ones(Float16, 2)), bh = on(ones(BFloat16, 2));
  EXPECT_EQ((f32 + f64).dtype(), Float64);
  EXPECT_EQ((i32 + f32).dtype(), Float32);
  EXPECT_EQ((i32 + i64).dtype(), Int64);
  EXPECT_EQ((bl + bl).dtype(), Int64);
  expect_values(bl + bl, {2, 0});
  EXPECT_EQ((h + bh).dtype(), Float32);
  EXPECT_EQ((h + h).dtype(), Float16);
  EXPECT_EQ((i32 / i32).dtype(), Float32);  // true division
  EXPECT_EQ((i32 * 2).dtype(), Int32);      // integer scalar keeps the type
  EXPECT_EQ((i32 * 2.5).dtype(), Float32);  // floating scalar makes it float
  EXPECT_EQ((f32 * 2.5).dtype(), Float32);  // scalars never widen a float tensor
  EXPECT_EQ(exp(i32).dtype(), Float32);
  EXPECT_EQ((f32 < f64).dtype(), Bool);
  expect_values(h * 3 + 0.5, {3.5, 3.5});
  expect_values(bh * 3, {3, 3});
}

TEST_P(Ops, Comparisons) {
  Tensor a = vec({1, 2, 3}), b = vec({3, 2, 1});
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((a >= 2).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  expect_values(where(a > b, a, b), {3, 2, 3});
}

TEST_P(Ops, MathFunctions) {
  std::vector<double> xs{0.25, 1, 2.5};
  Tensor x = on(tensor(xs));
  std::vector<double> e, l, s, sq, p3;
  for (double v : xs) {
    e.push_back(std::exp(v));
    l.push_back(std::log(v));
    s.push_back(std::sqrt(v));
    sq.push_back(v * v);
    p3.push_back(v * v * v);
  }
  expect_values(exp(x), e, 1e-12);
  expect_values(log(x), l, 1e-12);
  expect_values(sqrt(x), s, 1e-12);
  expect_values(square(x), sq, 1e-12);
  expect_values(pow(x, 3.0), p3, 1e-12);
  expect_values(pow(x, on(tensor({2.0, 2.0, 2.0}))), sq, 1e-12);
  expect_values(abs(vec({-1.5, 2, 0})), {1.5, 2, 0});
  expect_values(sign(vec({-1.5, 2, 0})), {-1, 1, 0});
  expect_values(clamp(vec({-3, 0.5, 3}), -1, 1), {-1, 0.5, 1});
  expect_values(maximum(vec({1, 5}), vec({3, 2})), {3, 5});
  expect_values(minimum(vec({1, 5}), vec({3, 2})), {1, 2});
  expect_values(xlogy(vec({0, 2}), vec({0, 3})), {0, 2 * std::log(3.0)}, 1e-6);
  expect_values(abs(on(tensor(std::vector<int32_t>{-3, 4}))), {3, 4});
}

TEST_P(Ops, Activations) {
  std::vector<double> xs{-2, -0.5, 0.5, 3};
  Tensor x = on(tensor(xs));
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> vs, vr, vt, vg, vl, ve, vw, vp;
  for (double v : xs) {
    vs.push_back(sig(v));
    vr.push_back(std::max(v, 0.0));
    vt.push_back(std::tanh(v));
    vg.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    vl.push_back(v > 0 ? v : 0.01 * v);
    ve.push_back(v >= 0 ? v : std::exp(v) - 1);
    vw.push_back(v * sig(v));
    vp.push_back(std::log1p(std::exp(v)));
  }
  expect_values(sigmoid(x), vs, 1e-12);
  expect_values(relu(x), vr, 1e-12);
  expect_values(flx::tanh(x), vt, 1e-12);
  expect_values(gelu(x), vg, 1e-12);
  expect_values(leakyrelu(x), vl, 1e-12);
  expect_values(leakyrelu(x, 0.2), {-0.4, -0.1, 0.5, 3}, 1e-12);
  expect_values(elu(x), ve, 1e-12);
  expect_values(swish(x), vw, 1e-12);
  expect_values(softplus(x), vp, 1e-12);
  expect_values(identity(x), xs);
  expect_values(sigmoid(vec({-100, 100})), {0, 1});  // no overflow
}

TEST_P(Ops, Reductions) {
  Tensor a = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(sum(a), {21});
  EXPECT_EQ(sum(a).ndims(), 0);
  expect_values(sum(a, {0}), {3, 7, 11});
  EXPECT_EQ(sum(a, {0}).shape(), (Shape{1, 3}));
  expect_values(sum(a, {1}), {9, 12});
  EXPECT_EQ(sum(a, {1}).shape(), (Shape{2, 1}));
  expect_values(sum(a, {0, 1}), {21});
  expect_values(mean(a), {3.5});
  expect_values(mean(a, {1}), {3, 4});
  expect_values(maximum(a), {6});
  expect_values(maximum(a, {0}), {2, 4, 6});
  expect_values(minimum(a, {1}), {1, 2});
  expect_values(minimum(a), {1});
  Tensor c = on(reshape(tensor(std::vector<double>(24, 1.0)), {2, 3, 4}));
  expect_values(sum(c, {0, 2}), {8, 8, 8});  // non-adjacent dims
  EXPECT_EQ(sum(c, {0, 2}).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(on(tensor(std::vector<int32_t>{1, 2}))).dtype(), Int64);
  EXPECT_EQ(sum(on(tensor({true, true, false}))).item<int64_t>(), 2);
  Tensor big = on(ones(1000, 300));
  expect_values(sum(big, {0}), std::vector<double>(300, 1000.0));
  expect_values(sum(big, {1}), std::vector<double>(1000, 300.0));
  expect_values(sum(big), {300000});
  EXPECT_THROW(maximum(on(zeros(0))), ArgumentError);
  EXPECT_THROW(mean(on(zeros(0))), ArgumentError);
}

// The CPU sums a whole Float32 tensor in double (in 16 interleaved lanes,
// then chunks of 65536 in order): the result is the exact sum rounded once
// to Float32, give or take an ulp where the double sum lands near a
// rounding boundary. Lengths around the lanes' 16 and the chunks' 2^17.
TEST(CpuReductions, WholeFloat32SumIsTheDoubleSumRounded) {
  set_seed(11);
  for (int64_t n : {1, 15, 16, 17, 33, 1000, 131071, 131072, 131073, 300001}) {
    const Tensor x = rand(n) - 0.25f;
    double want = 0;
    for (float v : x.to_vector<float>()) want += double(v);
    const double got = sum(x).item<float>();
    const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);
    EXPECT_NEAR(got, want, ulp) << "sum of " << n << " elements";
    EXPECT_NEAR(mean(x).item<float>(), want / double(n), 2 * ulp / double(n)) << "mean of " << n << " elements";
  }
}

TEST_P(Ops, Matmul) {
  // column-major: A = [1 3 5; 2 4 6]
  Tensor A = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor x = vec({1, 0, -1});
  expect_values(matmul(A, x), {-4, -4});
  EXPECT_EQ(matmul(A, x).shape(), (Shape{2}));
  Tensor B = vec({1, 2, 3, 4, 5, 6}, {3, 2});
  expect_values(matmul(A, B), {22, 28, 49, 64});
  // batched: (2,3,2) × (3,2,2), and a 2-d operand broadcast over the batch
  Tensor Ab = on(reshape(tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1}), {2, 3, 2}));
  Tensor Bb = on(reshape(tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}), {3, 2, 2}));
  Tensor C = matmul(Ab, Bb);
  EXPECT_EQ(C.shape(), (Shape{2, 2, 2}));
  expect_values(C, {22, 28, 49, 64, 6, 6, 15, 15});
  expect_values(matmul(Ab, B), {22, 28, 49, 64, 6, 6, 15, 15});
  // against a naive product at a size that exercises BLAS blocking
  Tensor P = on(rand(Float64, 37, 53)), Q = on(rand(Float64, 53, 29));
  auto pv = P.to_vector<double>(), qv = Q.to_vector<double>();
  std::vector<double> ref(37 * 29, 0.0);
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 29; ++j)
      for (int k = 0; k < 53; ++k) ref[size_t(i + 37 * j)] += pv[size_t(i + 37 * k)] * qv[size_t(k + 53 * j)];
  expect_values(matmul(P, Q), ref, 1e-12);
  expect_values(matmul(on(ones(Float16, 2, 3)), on(ones(Float16, 3, 2))), {3, 3, 3, 3});
  EXPECT_EQ(matmul(on(ones(Int32, 2, 2)), on(ones(Int32, 2, 2))).dtype(), Float32);
}

TEST_P(Ops, SoftmaxAndOneHot) {
  Tensor x = vec({1, 2, 3, 1, 1, 1}, {3, 2});
  double z = std::exp(1) + std::exp(2) + std::exp(3);
  expect_values(softmax(x), {std::exp(1) / z, std::exp(2) / z, std::exp(3) / z, 1 / 3., 1 / 3., 1 / 3.}, 1e-6);
  expect_values(logsoftmax(x), {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), -std::log(3), -std::log(3), -std::log(3)},
                1e-6);
  expect_values(softmax(x, 1), {0.5, 1 / (1 + std::exp(-1)), 1 / (1 + std::exp(-2)), 0.5, 1 / (1 + std::exp(1)),
                                1 / (1 + std::exp(2))},
                1e-6);
  expect_values(softmax(vec({1000, 1000})), {0.5, 0.5});  // stable
  Tensor oh = onehotbatch(on(tensor(std::vector<int64_t>{2, 0, 1})), 3);
  EXPECT_EQ(oh.dtype(), Bool);
  EXPECT_EQ(oh.shape(), (Shape{3, 3}));
  expect_values(oh, {0, 0, 1, 1, 0, 0, 0, 1, 0});
  EXPECT_EQ(onecold(oh).to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(onecold(vec({0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f}, {3, 2})).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(onehotbatch({1, 1}, 2).shape(), (Shape{2, 2}));
  EXPECT_THROW(onehotbatch({3}, 3), ArgumentError);
  EXPECT_THROW(onehotbatch({-1}, 3), ArgumentError);
}

TEST_P(Ops, Gather) {
  // x = [1 3 5 7; 2 4 6 8] (2×4): columns picked by 0-based index.
  Tensor x = vec({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  Tensor g = gather(x, on(tensor(std::vector<int64_t>{3, 0, 3})));
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  expect_values(g, {7, 8, 1, 2, 7, 8});
  // Any integer index type; the index's shape follows the leading dims.
  Tensor g2 = gather(x, on(tensor(std::vector<int32_t>{1, 2, 0, 1}, {2, 2})));
  EXPECT_EQ(g2.shape(), (Shape{2, 2, 2}));
  expect_values(g2, {3, 4, 5, 6, 1, 2, 3, 4});
  EXPECT_EQ(gather(x, on(tensor(std::vector<int64_t>{}, {0}))).shape(), (Shape{2, 0}));
  EXPECT_THROW(gather(x, on(tensor(std::vector<int64_t>{4}))), ArgumentError);
  EXPECT_THROW(gather(x, on(tensor(std::vector<int64_t>{-1}))), ArgumentError);
  EXPECT_THROW(gather(x, on(tensor(std::vector<float>{1}))), TypeError);
}

// ---- issue 8: NaN, reductions over every dim, batched broadcasting, gelu ----

TEST_P(Ops, NaNPropagatesAsInJuliaAndPyTorch) {
  const double nan = std::nan("");
  auto isnan_at = [](const Tensor& t) {
    std::vector<bool> r;
    for (double v : t.to(Device::cpu()).to_vector<double>()) r.push_back(std::isnan(v));
    return r;
  };
  for (DType t : {Float32, Float64}) {
    Tensor x = on(tensor(std::vector<double>{nan, -1, 2}).to(t));
    // relu(NaN) is NaN (NNlib's max(0, x), torch.relu), the others as before.
    EXPECT_EQ(isnan_at(relu(x)), (std::vector<bool>{true, false, false})) << t;
    EXPECT_EQ(relu(x).to_vector<double>()[2], 2);
    // Elementwise max/min: NaN on either side wins.
    Tensor y = on(tensor(std::vector<double>{0, nan, 5}).to(t));
    EXPECT_EQ(isnan_at(maximum(x, y)), (std::vector<bool>{true, true, false})) << t;
    EXPECT_EQ(isnan_at(maximum(y, x)), (std::vector<bool>{true, true, false})) << t;
    EXPECT_EQ(isnan_at(minimum(x, y)), (std::vector<bool>{true, true, false})) << t;
    EXPECT_EQ(isnan_at(minimum(y, x)), (std::vector<bool>{true, true, false})) << t;
    EXPECT_EQ(maximum(x, y).to_vector<double>()[2], 5);
    EXPECT_EQ(minimum(y, x).to_vector<double>()[2], 2);
    // Reductions propagate NaN wherever it sits.
    EXPECT_TRUE(std::isnan(maximum(x).item<double>())) << t;
    EXPECT_TRUE(std::isnan(minimum(y).item<double>())) << t;
    // onecold/argmax: the first NaN of a column counts as the largest
    // (Julia's findmax, torch.argmax), also after a larger value.
    Tensor s = on(tensor(std::vector<double>{0.1, nan, 0.9, /**/ 3, 1, nan, /**/ 0.2, 0.7, 0.1, /**/ nan, nan, 1},
                         {3, 4})
                      .to(t));
    EXPECT_EQ(onecold(s).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 0})) << t;
  }
}

TEST_P(Ops, ReductionsOverEveryDimKeepTheDims) {
  Tensor x = on(ones(3, 1, 5, 2));
  for (auto f : {+[](const Tensor& t, const Dims& d) { return sum(t, d); },
                 +[](const Tensor& t, const Dims& d) { return mean(t, d); },
                 +[](const Tensor& t, const Dims& d) { return maximum(t, d); },
                 +[](const Tensor& t, const Dims& d) { return minimum(t, d); }}) {
    EXPECT_EQ(f(x, {0, 1, 2, 3}).shape(), (Shape{1, 1, 1, 1}));
    EXPECT_EQ(f(x, {3, 2, 1, 0}).shape(), (Shape{1, 1, 1, 1}));
    EXPECT_EQ(f(on(ones(4)), {0}).shape(), (Shape{1}));
  }
  expect_values(sum(x, {0, 1, 2, 3}), {30});
  // Only the forms without dims drop them, as Julia's sum(x).
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(mean(x).shape(), Shape{});
  EXPECT_EQ(maximum(x).shape(), Shape{});
  EXPECT_EQ(minimum(x).shape(), Shape{});
  // Gradients flow through the kept dims.
  auto [g] = gradient([](const Tensor& t) { return sum(sum(t, {0, 1}) * 2.0); }, on(ones(Float64, 2, 3)));
  expect_values(g, std::vector<double>(6, 2.0));
}

namespace {
// The gradient of sum(w .* extremum(x; dims)) by the rule src/ops/reduce.cpp
// documents: each output's cotangent w[o] shared equally among the elements
// of its group that attain the extremum. x is (rows, cols), column-major; no
// dims is the whole matrix; w has (at least) one entry per output.
std::vector<double> tie_split(const std::vector<double>& x, int64_t rows, const Dims& dims, bool is_max,
                              const std::vector<double>& w) {
  auto reduces = [&](int d) { return dims.empty() || std::count(dims.begin(), dims.end(), d) > 0; };
  const bool over_rows = reduces(0), over_cols = reduces(1);
  auto group = [&](size_t k) {
    const int64_t i = int64_t(k) % rows, j = int64_t(k) / rows;
    return size_t((over_rows ? 0 : i) + (over_cols ? 0 : j) * (over_rows ? 1 : rows));
  };
  std::vector<double> best(w.size(), is_max ? -INFINITY : INFINITY), count(w.size(), 0), g(x.size(), 0);
  for (size_t k = 0; k < x.size(); ++k) EXPECT_LT(group(k), w.size()) << "no cotangent for an output";
  for (size_t k = 0; k < x.size(); ++k)
    best[group(k)] = is_max ? std::max(best[group(k)], x[k]) : std::min(best[group(k)], x[k]);
  for (size_t k = 0; k < x.size(); ++k) count[group(k)] += x[k] == best[group(k)];
  for (size_t k = 0; k < x.size(); ++k)
    if (x[k] == best[group(k)]) g[k] = w[group(k)] / count[group(k)];
  return g;
}
}  // namespace

TEST_P(Ops, MaximumAndMinimumShareTheGradientEquallyAmongTies) {
  // (4, 3): column 0 holds three 5s, column 1 four 3s, column 2 two -2s, row
  // 1 two 5s, the whole matrix four 5s and two -2s.
  const std::vector<double> x = {5, 5, 1, 5, 3, 3, 3, 3, -2, 5, -2, 0};
  // Cotangents 3·2^k: every share w/count (count 1 to 4) is exact in every type.
  const std::vector<double> w = {0.75, 3, 1.5, 6};
  for (DType t : {Float64, Float32, Float16, BFloat16}) {
    for (bool is_max : {true, false}) {
      for (const Dims& dims : {Dims{}, Dims{0}, Dims{1}, Dims{0, 1}}) {
        auto f = [&](const Tensor& v) {
          Tensor y = dims.empty() ? (is_max ? maximum(v) : minimum(v)) : (is_max ? maximum(v, dims) : minimum(v, dims));
          return sum(y * on(tensor(std::vector<double>(w.begin(), w.begin() + y.numel()), y.shape()).to(t)));
        };
        auto [g] = gradient(f, on(tensor(x, {4, 3}).to(t)));
        std::ostringstream what;
        what << (is_max ? "maximum" : "minimum") << " over dims " << ::testing::PrintToString(dims) << " in " << t;
        EXPECT_EQ(g.device(), dev()) << what.str();
        EXPECT_EQ(g.dtype(), t) << what.str();
        expect_values(g, tie_split(x, 4, dims, is_max, w), 0, what.str());
      }
    }
  }
}

TEST_P(Ops, BatchedMatmulBroadcastsBatchDimsOfSizeOne) {
  // NNlib.batched_mul and torch.matmul stretch a batch dim of size 1.
  Tensor c = matmul(on(ones(4, 3, 6)), on(ones(3, 5, 1)));
  EXPECT_EQ(c.shape(), (Shape{4, 5, 6}));
  expect_values(c, std::vector<double>(120, 3.0));
  EXPECT_EQ(matmul(on(ones(4, 3, 1)), on(ones(3, 5, 6))).shape(), (Shape{4, 5, 6}));
  // Both stretch, in different dims: (2,3,1,4) × (3,2,5,1) → (2,2,5,4),
  // each batch (i, j) the product of A[:, :, 1, j] and B[:, :, i, 1].
  Tensor A = rand(Float64, 2, 3, 1, 4), B = rand(Float64, 3, 2, 5, 1);
  Tensor C = matmul(on(A), on(B));
  ASSERT_EQ(C.shape(), (Shape{2, 2, 5, 4}));
  auto av = A.to_vector<double>(), bv = B.to_vector<double>();
  std::vector<double> ref;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 5; ++i)
      for (int col = 0; col < 2; ++col)
        for (int row = 0; row < 2; ++row) {
          double acc = 0;
          for (int k = 0; k < 3; ++k) acc += av[size_t(row + 2 * k + 6 * j)] * bv[size_t(k + 3 * col + 6 * i)];
          ref.push_back(acc);
        }
  // ref is ordered (row, col, i, j) with row fastest: C's column-major order.
  expect_values(C, ref, 1e-12);
  // Missing trailing batch dims count as 1: (2,3,4) × (3,2,1,5) → (2,2,4,5).
  EXPECT_EQ(matmul(on(ones(2, 3, 4)), on(ones(3, 2, 1, 5))).shape(), (Shape{2, 2, 4, 5}));
  EXPECT_THROW(matmul(on(ones(2, 3, 4)), on(ones(3, 2, 5))), DimensionMismatch);
  // Gradients sum over the dims an operand was stretched along.
  flx::testing::check_gradients(
      [](const std::vector<Tensor>& v) { return sum(square(matmul(v[0], v[1]))); },
      {on(flx::testing::rand64({2, 3, 1, 4})), on(flx::testing::rand64({3, 2, 5, 1}))}, 1e-6, 1e-6,
      "batched matmul with broadcast batch dims");
}

TEST_P(Ops, GeluErfIsTheExactFormAndGeluTheTanhForm) {
  std::vector<double> xs{-3, -1, -0.25, 0, 0.5, 2};
  std::vector<double> exact, approx;
  for (double v : xs) {
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    approx.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  Tensor x = on(tensor(xs));
  expect_values(gelu_erf(x), exact, 1e-12);
  expect_values(gelu(x), approx, 1e-12);
  expect_values(gelu_erf(on(tensor(std::vector<float>{-1, 0.5}))), {exact[1], exact[4]}, 1e-6);
  EXPECT_GT(std::fabs(gelu(x).to_vector<double>()[0] - exact[0]), 1e-4);  // they do differ
  EXPECT_EQ(Activation(gelu_erf).name(), "gelu_erf");
  flx::testing::check_gradients([](const std::vector<Tensor>& v) { return sum(gelu_erf(v[0]) * v[0]); },
                                {on(flx::testing::rand64({7}, -3, 3))}, 1e-6, 1e-6, "gelu_erf");
}

// softsign came in through the op list alone, with the ABI minor version
// that brought its code (backend_ops.h): the closed form x / (1 + |x|), its
// derivative 1 / (1 + |x|)^2 by finite differences.
TEST_P(Ops, SoftsignMatchesItsClosedForm) {
  std::vector<double> xs{-3, -1, -0.25, 0, 0.5, 2, 1e6};
  std::vector<double> want;
  for (double v : xs) want.push_back(v / (1 + std::fabs(v)));
  expect_values(softsign(on(tensor(xs))), want, 1e-15);
  expect_values(softsign(on(tensor(std::vector<float>{-1, 3}))), {-0.5, 0.75}, 1e-7);
  EXPECT_EQ(Activation(softsign).name(), "softsign");
  flx::testing::check_gradients([](const std::vector<Tensor>& v) { return sum(softsign(v[0]) * v[0]); },
                                {on(flx::testing::rand64({7}, -3, 3))}, 1e-6, 1e-6, "softsign");
}

// celu came in through the op list alone (its body is shared by every
// backend): checked against the closed form, NNlib's default alpha, and
// finite differences.
TEST_P(Ops, CeluMatchesItsClosedForm) {
  std::vector<double> xs{-3, -1, -0.25, 0, 0.5, 2};
  for (double alpha : {1.0, 0.5}) {
    std::vector<double> want;
    for (double v : xs) want.push_back(std::max(0.0, v) + std::min(0.0, alpha * (std::exp(v / alpha) - 1)));
    expect_values(celu(on(tensor(xs)), alpha), want, 1e-12);
  }
  expect_values(celu(on(tensor(std::vector<float>{-1, 0.5}))), {std::exp(-1.0) - 1, 0.5}, 1e-6);
  EXPECT_EQ(Activation(celu).name(), "celu");
  EXPECT_THROW(celu(on(tensor(xs)), 0.0), ArgumentError);
  flx::testing::check_gradients([](const std::vector<Tensor>& v) { return sum(celu(v[0], 0.8) * v[0]); },
                                {on(flx::testing::rand64({7}, -3, 3))}, 1e-6, 1e-6, "celu");
}

TEST_P(Ops, OnecoldAndArgmaxOfA0DimTensorSayWhatIsWrong) {
  Tensor s = on(full(1.0f));
  auto msg = flx::testing::error_message<DimensionMismatch>([&] { onecold(s); });
  EXPECT_NE(msg.find("onecold"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0-dim"), std::string::npos) << msg;
  EXPECT_THROW(argmax(s, 0), DimensionMismatch);
}

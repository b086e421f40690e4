// Array operations (include/flx/arrays.hpp, and sin/cos/erf, logsumexp,
// var/std, batched_mul in ops.hpp) on every available device, against
// closed forms: Julia's and NNlib's documented examples, adapted to 0-based
// dims; which of them are views; their typed errors.
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::expect_values;
using flx::testing::has;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A matrix written row by row, as Julia prints it, in column-major order.
std::vector<double> rows(std::initializer_list<std::vector<double>> r) {
  std::vector<std::vector<double>> m(r);
  std::vector<double> out;
  for (size_t j = 0; j < m[0].size(); ++j)
    for (const auto& row : m) out.push_back(row[j]);
  return out;
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

class ArrayOps : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  // 1, 2, ... in column-major order (Julia's reshape(1:n, dims...)), Float32.
  Tensor iota(const Shape& s, double start = 1) const {
    std::vector<float> v(size_t(s.numel()));
    std::iota(v.begin(), v.end(), float(start));
    return tensor(v, s).to(dev());
  }
  Tensor vec(std::vector<double> v) const { return tensor(v).to(Float32).to(dev()); }
};

INSTANTIATE_TEST_SUITE_P(Devices, ArrayOps, ::testing::ValuesIn(flx::testing::conformance_devices()),
                         [](const auto& info) { return std::string(info.param.backend()) + std::to_string(info.param.ordinal()); });

}  // namespace

TEST_P(ArrayOps, CatVcatHcatFollowJulia) {
  const Tensor a = iota({2, 3}), b = iota({2, 1}, 11), c = iota({1, 3}, 21);
  expect_values(hcat(a, b), {1, 2, 3, 4, 5, 6, 11, 12});
  EXPECT_EQ(hcat(a, b).shape(), (Shape{2, 4}));
  expect_values(vcat(a, c), rows({{1, 3, 5}, {2, 4, 6}, {21, 22, 23}}));
  EXPECT_EQ(cat({a, c, c}, 0).shape(), (Shape{4, 3}));
  expect_values(vcat(iota({2}), iota({3}, 3)), {1, 2, 3, 4, 5});
  // Fewer dims count as trailing 1s: hcat of vectors is a matrix, cat along
  // a new dim stacks.
  expect_values(hcat(iota({2}), iota({2}, 3)), {1, 2, 3, 4});
  EXPECT_EQ(hcat(iota({2}), iota({2}, 3)).shape(), (Shape{2, 2}));
  const Tensor c3 = cat({a, iota({2, 3}, 7)}, 2);
  EXPECT_EQ(c3.shape(), (Shape{2, 3, 2}));
  expect_values(c3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  expect_values(vcat(std::vector<Tensor>{a}), {1, 2, 3, 4, 5, 6});
  // Element types promote; Bool concatenates along any dim.
  const Tensor mixed = vcat(tensor(std::vector<int32_t>{1, 2}).to(dev()), vec({0.5}));
  EXPECT_EQ(mixed.dtype(), Float32);
  expect_values(mixed, {1, 2, 0.5});
  const Tensor bools = vcat(a > 2.5f, c > 21.5f);
  EXPECT_EQ(bools.dtype(), Bool);
  expect_values(bools, rows({{0, 1, 1}, {0, 1, 1}, {0, 1, 1}}));
  // Along a dim that is not the last, x's elements arrive unchanged: -0.0,
  // infinities and NaN included.
  const Tensor special = tensor(std::vector<double>{-0.0, kInf, -kInf, NAN}, {1, 4}).to(Float32).to(dev());
  const auto v = vcat(special, special).to_vector<double>();
  EXPECT_TRUE(v[0] == 0 && std::signbit(v[0]));
  EXPECT_EQ(v[2], kInf);
  EXPECT_EQ(v[5], -kInf);
  EXPECT_TRUE(std::isnan(v[7]));
  // Empty pieces.
  expect_values(vcat(iota({0, 3}), a), {1, 2, 3, 4, 5, 6});
  if (!dev().is_cpu()) {  // one device for all
    const std::string m = error_message<DeviceMismatch>([&] { vcat(a, zeros(1, 3)); });
    EXPECT_TRUE(has(m, "vcat: operands live on different devices")) << m;
  }
  EXPECT_EQ(hcat(iota({2, 0}), iota({2, 0})).shape(), (Shape{2, 0}));
}

TEST_P(ArrayOps, StackAddsADimAndUnstackRemovesIt) {
  const Tensor x = iota({3}), y = iota({3}, 4);
  EXPECT_EQ(stack({x, y}, 0).shape(), (Shape{2, 3}));
  expect_values(stack({x, y}, 0), {1, 4, 2, 5, 3, 6});
  expect_values(stack({x, y}, 1), {1, 2, 3, 4, 5, 6});
  expect_values(stack({x, y}), {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(stack({x, y}).shape(), (Shape{3, 2}));
  const Tensor A = iota({2, 2}), B = iota({2, 2}, 5);
  const Tensor s = stack({A, B}, 1);  // s[i, k, j] = (A, B)[k][i, j]
  EXPECT_EQ(s.shape(), (Shape{2, 2, 2}));
  expect_values(s, {1, 2, 5, 6, 3, 4, 7, 8});
  const auto cols = unstack(iota({2, 3}), 1);
  ASSERT_EQ(cols.size(), 3u);
  for (int j = 0; j < 3; ++j) expect_values(cols[size_t(j)], {2.0 * j + 1, 2.0 * j + 2});
  const auto rws = unstack(iota({2, 3}), 0);
  ASSERT_EQ(rws.size(), 2u);
  expect_values(rws[0], {1, 3, 5});
  expect_values(rws[1], {2, 4, 6});
  for (int d : {0, 1, 2}) {
    const Tensor t = iota({2, 3, 4});
    const auto parts = unstack(t, d);
    flx::testing::expect_close(stack(parts, d), t, 0, "stack(unstack(x, d), d) is x");
  }
}

TEST_P(ArrayOps, ChunkFollowsMLUtils) {
  const Tensor x = iota({5, 4});
  const auto by_rows = chunk(x, 2, 0);
  ASSERT_EQ(by_rows.size(), 2u);
  expect_values(by_rows[0], rows({{1, 6, 11, 16}, {2, 7, 12, 17}, {3, 8, 13, 18}}));
  expect_values(by_rows[1], rows({{4, 9, 14, 19}, {5, 10, 15, 20}}));
  const auto by_cols = chunk(x, 2);  // the last dim: views
  ASSERT_EQ(by_cols.size(), 2u);
  expect_values(by_cols[1], {11, 12, 13, 14, 15, 16, 17, 18, 19, 20});
  EXPECT_TRUE(shares_storage(by_cols[1], x));
  EXPECT_FALSE(shares_storage(by_rows[0], x));
  std::vector<int64_t> sizes;
  for (const Tensor& c : chunk(iota({10}), 3)) sizes.push_back(c.numel());
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(chunk(iota({10}), 6).size(), 5u);  // pieces of cld(10, 6) = 2
  EXPECT_EQ(chunk(iota({10}), 20).size(), 10u);
}

TEST_P(ArrayOps, SelectdimAndSliceAreViewsAlongTheLastDim) {
  const Tensor x = iota({2, 3});
  const Tensor col = selectdim(x, 1, 2);
  EXPECT_EQ(col.shape(), (Shape{2}));
  expect_values(col, {5, 6});
  EXPECT_TRUE(shares_storage(col, x));
  const Tensor row = selectdim(x, 0, 1);
  expect_values(row, {2, 4, 6});
  EXPECT_FALSE(shares_storage(row, x));
  const Tensor s = slice(x, 1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  expect_values(s, {3, 4, 5, 6});
  EXPECT_TRUE(shares_storage(s, x));
  expect_values(slice(x, 0, 1, 2), {2, 4, 6});
  EXPECT_EQ(slice(x, 1, 2, 2).shape(), (Shape{2, 0}));
  // Any dim after which every dim is 1 is contiguous too.
  const Tensor t = iota({3, 4, 1});
  EXPECT_TRUE(shares_storage(slice(t, 1, 1, 3), t));
  expect_values(slice(t, 1, 1, 3), {4, 5, 6, 7, 8, 9});
  expect_values(selectdim(iota({2, 3, 2}), 1, 1), {3, 4, 9, 10});
}

TEST_P(ArrayOps, RepeatAndReverseFollowJulia) {
  // repeat([1 2; 3 4], 2, 3)
  const Tensor x = tensor(rows({{1, 2}, {3, 4}}), {2, 2}).to(dev());
  const Tensor r = repeat(x, {2, 3});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  std::vector<double> want;
  for (int j = 0; j < 6; ++j)
    for (int i = 0; i < 4; ++i) want.push_back(rows({{1, 2}, {3, 4}})[size_t(i % 2 + 2 * (j % 2))]);
  expect_values(r, want);
  expect_values(repeat(iota({2}), {1, 3}), {1, 2, 1, 2, 1, 2});  // more counts than dims
  EXPECT_EQ(repeat(iota({2}), {1, 3}).shape(), (Shape{2, 3}));
  EXPECT_EQ(repeat(x, {0, 2}).shape(), (Shape{0, 4}));
  // Five repeated dims: more than one broadcasting copy can address.
  const Tensor big = iota({2, 1, 2, 1, 2});
  const Tensor rb = repeat(big, {2, 3, 2, 2, 2});
  EXPECT_EQ(rb.shape(), (Shape{4, 3, 4, 2, 4}));
  const auto got = rb.to_vector<double>(), src = big.to_vector<double>();
  for (int64_t e = 0; e < rb.numel(); ++e) {
    int64_t r0 = e, in = 0, stride = 1;
    for (int k = 0; k < 5; ++k) {
      const int64_t o = r0 % rb.shape()[k], d = big.shape()[k];
      r0 /= rb.shape()[k];
      in += (o % d) * stride;
      stride *= d;
    }
    ASSERT_EQ(got[size_t(e)], src[size_t(in)]) << "at " << e;
  }
  expect_values(reverse(iota({2, 3}), 0), {2, 1, 4, 3, 6, 5});
  expect_values(reverse(iota({2, 3}), 1), {5, 6, 3, 4, 1, 2});
  expect_values(reverse(iota({2, 3})), {6, 5, 4, 3, 2, 1});  // every dim
  EXPECT_EQ(reverse(iota({2, 3})).shape(), (Shape{2, 3}));
}

TEST_P(ArrayOps, CumsumAddsAlongADim) {
  expect_values(cumsum(vec({1, 2, 3, 4}), 0), {1, 3, 6, 10});
  expect_values(cumsum(vec({1, 2, 3, 4})), {1, 3, 6, 10});
  expect_values(cumsum(iota({2, 3}), 1), {1, 2, 4, 6, 9, 12});
  expect_values(cumsum(iota({2, 3}), 0), {1, 3, 3, 7, 5, 11});
  // (2, 3, 2) along the middle dim: the dim is neither first nor last.
  expect_values(cumsum(iota({2, 3, 2}), 1), {1, 2, 4, 6, 9, 12, 7, 8, 16, 18, 27, 30});
  expect_values(cumsum(iota({3, 1}), 1), {1, 2, 3});
  // Each sum adds only what it sums: an Inf or NaN spoils what follows it.
  const auto v = cumsum(vec({1, kInf, 2, NAN, 3}), 0).to_vector<double>();
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], kInf);
  EXPECT_EQ(v[2], kInf);
  EXPECT_TRUE(std::isnan(v[3]) && std::isnan(v[4]));
  // Integers and Bool sum in Int64, exactly.
  const Tensor ints = cumsum(tensor(std::vector<int32_t>{1, 2, 2000000000, 2000000000}).to(dev()), 0);
  EXPECT_EQ(ints.dtype(), Int64);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 2000000003, 4000000003}));
  EXPECT_EQ(cumsum(vec({1, 0, 1}) > 0.5f, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
  // A long one against the running sum, in Float64.
  set_seed(3);
  const Tensor x = rand(Float64, {1000, 3}).to(dev());
  const auto xs = x.to_vector<double>(), cs = cumsum(x, 0).to_vector<double>();
  for (int j = 0; j < 3; ++j) {
    double run = 0;
    for (int i = 0; i < 1000; ++i) {
      run += xs[size_t(i + 1000 * j)];
      ASSERT_NEAR(cs[size_t(i + 1000 * j)], run, 1e-10 * run) << i << ", " << j;
    }
  }
}

TEST_P(ArrayOps, PaddingFollowsNNlib) {
  const Tensor r = iota({2, 2});  // [1 3; 2 4]
  const Tensor pc = pad_constant(r, {1, 2, 3, 4}, 8);
  EXPECT_EQ(pc.shape(), (Shape{5, 9}));
  expect_values(pc, rows({{8, 8, 8, 8, 8, 8, 8, 8, 8},
                          {8, 8, 8, 1, 3, 8, 8, 8, 8},
                          {8, 8, 8, 2, 4, 8, 8, 8, 8},
                          {8, 8, 8, 8, 8, 8, 8, 8, 8},
                          {8, 8, 8, 8, 8, 8, 8, 8, 8}}));
  expect_values(pad_constant(r, 1, 8), rows({{8, 8, 8, 8}, {8, 1, 3, 8}, {8, 2, 4, 8}, {8, 8, 8, 8}}));
  expect_values(pad_zeros(r, {0, 0, 1, 0}), {0, 0, 1, 2, 3, 4});
  const auto z = pad_zeros(r, {1, 0}).to_vector<double>();  // the padding is +0.0
  EXPECT_FALSE(std::signbit(z[0]));
  const Tensor q = iota({3, 3});  // [1 4 7; 2 5 8; 3 6 9]
  expect_values(pad_repeat(q, {1, 2, 3, 4}), rows({{1, 1, 1, 1, 4, 7, 7, 7, 7, 7},
                                                   {1, 1, 1, 1, 4, 7, 7, 7, 7, 7},
                                                   {2, 2, 2, 2, 5, 8, 8, 8, 8, 8},
                                                   {3, 3, 3, 3, 6, 9, 9, 9, 9, 9},
                                                   {3, 3, 3, 3, 6, 9, 9, 9, 9, 9},
                                                   {3, 3, 3, 3, 6, 9, 9, 9, 9, 9}}));
  expect_values(pad_reflect(q, {1, 2, 1, 2}), rows({{5, 2, 5, 8, 5, 2},
                                                    {4, 1, 4, 7, 4, 1},
                                                    {5, 2, 5, 8, 5, 2},
                                                    {6, 3, 6, 9, 6, 3},
                                                    {5, 2, 5, 8, 5, 2},
                                                    {4, 1, 4, 7, 4, 1}}));
  expect_values(pad_symmetric(q, {1, 2, 1, 2}), rows({{1, 1, 4, 7, 7, 4},
                                                      {1, 1, 4, 7, 7, 4},
                                                      {2, 2, 5, 8, 8, 5},
                                                      {3, 3, 6, 9, 9, 6},
                                                      {3, 3, 6, 9, 9, 6},
                                                      {2, 2, 5, 8, 8, 5}}));
  expect_values(pad_circular(q, {1, 2, 1, 2}), rows({{9, 3, 6, 9, 3, 6},
                                                     {7, 1, 4, 7, 1, 4},
                                                     {8, 2, 5, 8, 2, 5},
                                                     {9, 3, 6, 9, 3, 6},
                                                     {7, 1, 4, 7, 1, 4},
                                                     {8, 2, 5, 8, 2, 5}}));
  // An integer pads the spatial dims of (W, H, C, N): W and H.
  const Tensor img = iota({3, 2, 2, 1});
  EXPECT_EQ(pad_reflect(img, 1).shape(), (Shape{5, 4, 2, 1}));
  EXPECT_EQ(pad_zeros(img, 1).shape(), (Shape{5, 4, 4, 3}));
  // The 1-d examples of arrays.hpp.
  const Tensor x = iota({3});
  expect_values(pad_reflect(x, {2, 2}), {3, 2, 1, 2, 3, 2, 1});
  expect_values(pad_symmetric(x, {2, 2}), {2, 1, 1, 2, 3, 3, 2});
  expect_values(pad_repeat(x, {2, 2}), {1, 1, 1, 2, 3, 3, 3});
  expect_values(pad_circular(x, {2, 2}), {2, 3, 1, 2, 3, 1, 2});
}

TEST_P(ArrayOps, UpsamplingFollowsNNlib) {
  // upsample_nearest([1 2 3; 4 5 6], (2, 3))
  const Tensor m = tensor(rows({{1, 2, 3}, {4, 5, 6}}), {2, 3}).to(Float32).to(dev());
  const std::vector<double> nearest = rows({{1, 1, 1, 2, 2, 2, 3, 3, 3},
                                            {1, 1, 1, 2, 2, 2, 3, 3, 3},
                                            {4, 4, 4, 5, 5, 5, 6, 6, 6},
                                            {4, 4, 4, 5, 5, 5, 6, 6, 6}});
  expect_values(upsample_nearest(m, {.scale = {2, 3}}), nearest);
  expect_values(upsample_nearest(m, {.size = {4, 9}}), nearest);
  expect_values(upsample_nearest(m, {.scale = {2}}), rows({{1, 2, 3}, {1, 2, 3}, {4, 5, 6}, {4, 5, 6}}));
  // upsample_bilinear(reshape(Float32[1 2 3; 4 5 6], (2, 3, 1, 1)), (2, 3))
  const Tensor x = reshape(m, {2, 3, 1, 1});
  const Tensor b = upsample_bilinear(x, {.scale = {2, 3}});
  EXPECT_EQ(b.shape(), (Shape{4, 9, 1, 1}));
  expect_values(b, rows({{1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0},
                         {2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75, 4.0},
                         {3.0, 3.25, 3.5, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0},
                         {4.0, 4.25, 4.5, 4.75, 5.0, 5.25, 5.5, 5.75, 6.0}}),
                1e-6);
  flx::testing::expect_close(upsample_bilinear(x, {.size = {4, 9}}), b, 0);
  // Real scales: (2.5, 3.5) gives 5×10; its first row and column as NNlib prints them.
  const auto r = upsample_bilinear(x, {.scale = {2.5, 3.5}});
  EXPECT_EQ(r.shape(), (Shape{5, 10, 1, 1}));
  const auto rv = r.to_vector<double>();
  const double row0[] = {1.0, 1.22222, 1.44444, 1.66667, 1.88889}, col0[] = {1.0, 1.75, 2.5, 3.25, 4.0};
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(rv[size_t(5 * j)], row0[j], 1e-5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(rv[size_t(i)], col0[i], 1e-5);
  EXPECT_NEAR(rv[49], 6.0, 1e-6);
  // align_corners = false: PyTorch's default, [1, 2] to 4: 1, 1.25, 1.75, 2.
  const Tensor line = reshape(vec({1, 2}), {2, 1, 1});
  expect_values(upsample_bilinear(line, {.size = {4}, .align_corners = false}), {1, 1.25, 1.75, 2});
  expect_values(upsample_bilinear(line, {.size = {4}}), {1, 4.0 / 3, 5.0 / 3, 2}, 1e-6);
}

TEST_P(ArrayOps, PixelShuffleFollowsNNlib) {
  // x = [10i + j + channel/10 for i in 1:2, j in 1:3, channel in 1:4, batch in 1:1]
  std::vector<double> xv;
  for (int c = 1; c <= 4; ++c)
    for (int j = 1; j <= 3; ++j)
      for (int i = 1; i <= 2; ++i) xv.push_back(10 * i + j + c / 10.0);
  const Tensor y = pixel_shuffle(tensor(xv, {2, 3, 4, 1}).to(dev()), 2);
  EXPECT_EQ(y.shape(), (Shape{4, 6, 1, 1}));
  expect_values(y, rows({{11.1, 11.3, 12.1, 12.3, 13.1, 13.3},
                         {11.2, 11.4, 12.2, 12.4, 13.2, 13.4},
                         {21.1, 21.3, 22.1, 22.3, 23.1, 23.3},
                         {21.2, 21.4, 22.2, 22.4, 23.2, 23.4}}),
                1e-12);
  // y = [i + channel/10 for i in 1:3, channel in 1:6, batch in 1:1]: 1-d
  std::vector<double> zv;
  for (int c = 1; c <= 6; ++c)
    for (int i = 1; i <= 3; ++i) zv.push_back(i + c / 10.0);
  expect_values(pixel_shuffle(tensor(zv, {3, 6, 1}).to(dev()), 2),
                rows({{1.1, 1.3, 1.5}, {1.2, 1.4, 1.6}, {2.1, 2.3, 2.5}, {2.2, 2.4, 2.6}, {3.1, 3.3, 3.5}, {3.2, 3.4, 3.6}}),
                1e-12);
}

TEST_P(ArrayOps, MathAndStatistics) {
  const std::vector<double> xs{-2.5, -0.3, 0, 0.7, 3.1};
  const Tensor x = vec(xs);
  std::vector<double> s, c, e;
  for (double v : xs) s.push_back(std::sin(v)), c.push_back(std::cos(v)), e.push_back(std::erf(v));
  expect_values(flx::sin(x), s, 1e-6);
  expect_values(flx::cos(x), c, 1e-6);
  expect_values(flx::erf(x), e, 1e-6);
  EXPECT_EQ(flx::sin(tensor(std::vector<int32_t>{0}).to(dev())).dtype(), Float32);
  // logsumexp: no overflow; -Inf stays -Inf.
  EXPECT_NEAR(logsumexp(vec({1000, 1000})).item<double>(), 1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(logsumexp(vec({1, 2, 3})).item<double>(), std::log(std::exp(1) + std::exp(2) + std::exp(3)), 1e-6);
  EXPECT_EQ(logsumexp(vec({-kInf, -kInf})).item<double>(), -kInf);
  EXPECT_EQ(logsumexp(vec({1, kInf})).item<double>(), kInf);
  const Tensor l = logsumexp(iota({2, 3}), {1});
  EXPECT_EQ(l.shape(), (Shape{2, 1}));
  expect_values(l, {std::log(std::exp(1) + std::exp(3) + std::exp(5)), std::log(std::exp(2) + std::exp(4) + std::exp(6))},
                1e-6);
  EXPECT_EQ(logsumexp(iota({2, 3})).ndims(), 0);
  // var and std, corrected (Julia: var([1, 2, 3, 4]) == 5/3).
  EXPECT_NEAR(var(vec({1, 2, 3, 4})).item<double>(), 5.0 / 3, 1e-6);
  EXPECT_NEAR(flx::std(vec({1, 2, 3, 4})).item<double>(), std::sqrt(5.0 / 3), 1e-6);
  expect_values(var(iota({2, 3}), {1}), {4, 4}, 1e-6);
  expect_values(var(iota({2, 3}), {0}, false), {0.25, 0.25, 0.25}, 1e-6);
  expect_values(flx::std(iota({2, 3}), {0, 1}), {std::sqrt(3.5)}, 1e-6);
  EXPECT_TRUE(std::isnan(var(vec({3})).item<double>()));  // 0 / 0, as Julia
  EXPECT_EQ(var(vec({3}), {0}, false).item<double>(), 0);
  EXPECT_EQ(var(tensor(std::vector<int32_t>{1, 3}).to(dev())).dtype(), Float32);
}

TEST_P(ArrayOps, BatchedMulMultipliesEachPair) {
  set_seed(4);
  const Tensor a = rand(Float64, {2, 3, 4}).to(dev()), b = rand(Float64, {3, 5, 4}).to(dev());
  const Tensor c = batched_mul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 5, 4}));
  for (int64_t k = 0; k < 4; ++k)
    flx::testing::expect_close(selectdim(c, 2, k), matmul(selectdim(a, 2, k), selectdim(b, 2, k)), 1e-12);
  const Tensor shared = rand(Float64, {3, 5}).to(dev());  // one matrix for every product
  const Tensor cs = batched_mul(a, shared);
  for (int64_t k = 0; k < 4; ++k) flx::testing::expect_close(selectdim(cs, 2, k), matmul(selectdim(a, 2, k), shared), 1e-12);
  EXPECT_EQ(batched_mul(a, rand(Float64, {3, 5, 1}).to(dev())).shape(), (Shape{2, 5, 4}));
}

// ---- errors: typed, naming the op and what was expected and found --------

TEST(ArrayOpErrors, ConcatenationAndStacking) {
  std::string m = error_message<DimensionMismatch>([] { vcat(zeros(2, 3), zeros(2, 2)); });
  EXPECT_TRUE(has(m, "vcat") && has(m, "(2×3)") && has(m, "(2×2)") && has(m, "dim 1: 3 vs 2")) << m;
  m = error_message<DimensionMismatch>([] { cat({zeros(2, 3), zeros(3, 3)}, 1); });
  EXPECT_TRUE(has(m, "cat: along dim 1") && has(m, "dim 0: 2 vs 3")) << m;
  EXPECT_TRUE(has(error_message<ArgumentError>([] { cat({}, 0); }), "cat: no tensors"));
  m = error_message<DimensionMismatch>([] { cat({zeros(2)}, -1); });
  EXPECT_TRUE(has(m, "cat: dim -1 is out of range")) << m;
  m = error_message<DimensionMismatch>([] { stack({zeros(3), zeros(4)}, 0); });
  EXPECT_TRUE(has(m, "stack: every tensor needs the first one's shape (3); tensor 1 has shape (4)")) << m;
  m = error_message<DimensionMismatch>([] { stack({zeros(3)}, 2); });
  EXPECT_TRUE(has(m, "stack: dim 2 is out of range") && has(m, "0 to 1")) << m;
  EXPECT_TRUE(has(error_message<ArgumentError>([] { hcat(zeros(2), Tensor{}); }), "hcat: got an undefined tensor"));
}

TEST(ArrayOpErrors, SlicingAndSplitting) {
  std::string m = error_message<ArgumentError>([] { selectdim(zeros(2, 3), 1, 3); });
  EXPECT_TRUE(has(m, "selectdim: index 3 is out of range for dim 1 (size 3)") && has(m, "0 to 2")) << m;
  m = error_message<DimensionMismatch>([] { selectdim(zeros(2, 3), 2, 0); });
  EXPECT_TRUE(has(m, "selectdim: dim 2 is out of range") && has(m, "(2×3)")) << m;
  m = error_message<ArgumentError>([] { slice(zeros(2, 3), 0, 1, 3); });
  EXPECT_TRUE(has(m, "slice: the range [1, 3) is not within dim 0 (size 2)") && has(m, "start <= stop <= 2")) << m;
  m = error_message<ArgumentError>([] { chunk(zeros(4), 0); });
  EXPECT_TRUE(has(m, "chunk: the number of pieces must be at least 1; got 0")) << m;
  EXPECT_THROW(unstack(zeros(2), 1), DimensionMismatch);
  EXPECT_THROW(chunk(zeros(Shape{}), 2), DimensionMismatch);
}

TEST(ArrayOpErrors, RepeatReverseCumsum) {
  std::string m = error_message<ArgumentError>([] { repeat(zeros(2), {-1}); });
  EXPECT_TRUE(has(m, "repeat: counts must be >= 0; got -1 for dim 0")) << m;
  m = error_message<DimensionMismatch>([] { repeat(zeros(2), std::vector<int64_t>(9, 1)); });
  EXPECT_TRUE(has(m, "repeat: 9 counts")) << m;
  m = error_message<DimensionMismatch>([] { reverse(zeros(2, 2), 2); });
  EXPECT_TRUE(has(m, "reverse: dim 2 is out of range") && has(m, "0 to 1")) << m;
  m = error_message<DimensionMismatch>([] { cumsum(zeros(2, 2)); });
  EXPECT_TRUE(has(m, "cumsum: a tensor of shape (2×2) needs the dim to sum along")) << m;
  m = error_message<DimensionMismatch>([] { cumsum(zeros(3), 1); });
  EXPECT_TRUE(has(m, "cumsum: dim 1 is out of range for a tensor of shape (3)") && has(m, "0 to 0")) << m;
}

TEST(ArrayOpErrors, Padding) {
  std::string m = error_message<ArgumentError>([] { pad_zeros(zeros(2, 2), {1, 2, 3}); });
  EXPECT_TRUE(has(m, "pad_zeros: pad holds (lo, hi) pairs") && has(m, "got 3")) << m;
  m = error_message<DimensionMismatch>([] { pad_constant(zeros(2), {1, 1, 1, 1}, 3); });
  EXPECT_TRUE(has(m, "pad_constant: 2 (lo, hi) pairs for a tensor of shape (2) (1 dims)")) << m;
  m = error_message<ArgumentError>([] { pad_repeat(zeros(2), {-1, 0}); });
  EXPECT_TRUE(has(m, "pad_repeat: padding must be >= 0; got (-1, 0) for dim 0")) << m;
  m = error_message<ArgumentError>([] { pad_reflect(zeros(3, 2), {3, 0}); });
  EXPECT_TRUE(has(m, "pad_reflect: padding (3, 0) of dim 0 does not fit its size 3") && has(m, "size - 1")) << m;
  m = error_message<ArgumentError>([] { pad_circular(zeros(3, 2), {0, 0, 0, 3}); });
  EXPECT_TRUE(has(m, "pad_circular: padding (0, 3) of dim 1 does not fit its size 2")) << m;
  m = error_message<ArgumentError>([] { pad_repeat(zeros(0, 2), {1, 0}); });
  EXPECT_TRUE(has(m, "no edge to repeat")) << m;
}

TEST(ArrayOpErrors, UpsamplingAndPixelShuffle) {
  std::string m = error_message<ArgumentError>([] { upsample_nearest(zeros(2, 3), {.scale = {1.5}}); });
  EXPECT_TRUE(has(m, "upsample_nearest: scales must be whole numbers >= 1; got 1.5 for dim 0")) << m;
  m = error_message<ArgumentError>([] { upsample_nearest(zeros(2, 3), {.size = {5}}); });
  EXPECT_TRUE(has(m, "upsample_nearest: size 5 of dim 0 is not a whole multiple of the input's 2")) << m;
  m = error_message<ArgumentError>([] { upsample_nearest(zeros(2, 3), {}); });
  EXPECT_TRUE(has(m, "neither .scale nor .size")) << m;
  m = error_message<ArgumentError>([] { upsample_bilinear(zeros(2, 3, 1, 1), {.scale = {2, 2}, .size = {4, 6}}); });
  EXPECT_TRUE(has(m, "upsample_bilinear: got both .scale and .size")) << m;
  m = error_message<DimensionMismatch>([] { upsample_bilinear(zeros(2, 3, 1, 1), {.scale = {2}}); });
  EXPECT_TRUE(has(m, "upsample_bilinear: expected 2 scales, one per spatial dim") && has(m, "got 1")) << m;
  m = error_message<DimensionMismatch>([] { upsample_bilinear(zeros(2, 3), {.scale = {2}}); });
  EXPECT_TRUE(has(m, "at least 3 dims; got shape (2×3)")) << m;
  m = error_message<DimensionMismatch>([] { pixel_shuffle(zeros(2, 3, 6, 1), 2); });
  EXPECT_TRUE(has(m, "pixel_shuffle: the channels (dim 2)") && has(m, "6, are not a multiple of r^2 = 4")) << m;
  m = error_message<ArgumentError>([] { pixel_shuffle(zeros(2, 3, 6, 1), 0); });
  EXPECT_TRUE(has(m, "pixel_shuffle: the upscale factor r must be >= 1; got 0")) << m;
}

TEST(ArrayOpErrors, StatisticsAndBatchedMul) {
  std::string m = error_message<ArgumentError>([] { var(zeros(0)); });
  EXPECT_TRUE(has(m, "var: the var of an empty collection")) << m;
  m = error_message<DimensionMismatch>([] { flx::std(zeros(2, 2), {2}); });
  EXPECT_TRUE(has(m, "std: dim 2 is out of range")) << m;
  m = error_message<ArgumentError>([] { logsumexp(zeros(2, 0), {1}); });
  EXPECT_TRUE(has(m, "logsumexp: reducing over an empty dimension (dim 1")) << m;
  m = error_message<DimensionMismatch>([] { batched_mul(zeros(2, 3, 4), zeros(4, 5, 4)); });
  EXPECT_TRUE(has(m, "batched_mul") && has(m, "inner dimensions 3 and 4 differ")) << m;
  m = error_message<DimensionMismatch>([] { batched_mul(zeros(2, 3, 4), zeros(3, 5, 2)); });
  EXPECT_TRUE(has(m, "batched_mul: the batch dims") && has(m, "dim 2: 4 and 2")) << m;
  m = error_message<DimensionMismatch>([] { batched_mul(zeros(2, 3), zeros(3, 5)); });
  EXPECT_TRUE(has(m, "batched_mul: expected batches of matrices") && has(m, "(2×3)")) << m;
}

// Flux's initialisers (include/flx/initialisers.hpp): each against its
// closed form (mean and variance of a large draw within sampling bounds,
// bounds, orthogonality, exact sparsity, exact identities), the same bits
// from the same seed, Flux's nfan, and the layers' `.init` and `.bias`
// options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;

namespace {

struct Moments {
  double mean = 0, var = 0, lo = 0, hi = 0;
  size_t n = 0;
};
Moments moments(const Tensor& t) {
  const auto v = t.to_vector<double>();
  Moments m;
  m.n = v.size();
  m.lo = m.hi = v[0];
  for (double x : v) {
    m.mean += x;
    m.lo = std::min(m.lo, x);
    m.hi = std::max(m.hi, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size());
  return m;
}

// Mean and variance within 5 standard errors: of the mean sqrt(var / n), of
// the variance sqrt((μ4 - σ⁴) / n) with μ4 = kurtosis·σ⁴.
void expect_moments(const Tensor& t, double mean, double var, double kurtosis, const std::string& what) {
  const Moments m = moments(t);
  const double n = double(m.n);
  EXPECT_NEAR(m.mean, mean, 5 * std::sqrt(var / n)) << what << ": mean";
  EXPECT_NEAR(m.var, var, 5 * var * std::sqrt((kurtosis - 1) / n)) << what << ": variance";
}

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }

// AᵀA for a column-major rows × cols matrix.
std::vector<double> gram(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> g(size_t(cols * cols));
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += a[size_t(r + i * rows)] * a[size_t(r + j * rows)];
      g[size_t(i + j * cols)] = s;
    }
  return g;
}
void expect_identity(const std::vector<double>& g, int64_t n, double scale, const std::string& what) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(g[size_t(i + j * n)], i == j ? scale : 0.0, 1e-5 * std::max(1.0, scale)) << what << " " << i << "," << j;
}

std::vector<uint8_t> bits(const Tensor& t) {
  const auto v = t.to_vector<float>();
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST(Initialisers, FansAreFluxsNfan) {
  EXPECT_EQ(nfan(Shape{}), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(nfan(Shape{7}), (std::pair<int64_t, int64_t>{1, 7}));
  EXPECT_EQ(nfan(Shape{20, 10}), (std::pair<int64_t, int64_t>{10, 20}));     // (out, in)
  EXPECT_EQ(nfan(Shape{3, 3, 2, 10}), (std::pair<int64_t, int64_t>{18, 90}));  // Flux's docstring
}

TEST(Initialisers, GlorotUniformAndNormalFollowTheirClosedForms) {
  set_seed(1);
  // N-d, with fans 9·16 and 9·32: uniform on ±a, a = sqrt(6 / (144 + 288)).
  const Tensor w = glorot_uniform(3, 3, 16, 32);
  EXPECT_EQ(w.shape(), (Shape{3, 3, 16, 32}));
  EXPECT_EQ(w.dtype(), Float32);
  const double a = std::sqrt(6.0 / (144 + 288));
  expect_moments(w, 0, a * a / 3, 9.0 / 5, "glorot_uniform");  // uniform: kurtosis 9/5
  const Moments m = moments(w);
  EXPECT_GE(m.lo, -a);
  EXPECT_LE(m.hi, a);
  EXPECT_LT(m.lo, -0.99 * a);
  EXPECT_GT(m.hi, 0.99 * a);
  // gain scales the bound; the 2-d form is (out, in).
  const double a2 = 2.5 * std::sqrt(6.0 / (300 + 200));
  expect_moments(glorot_uniform({300, 200}, {.gain = 2.5}), 0, a2 * a2 / 3, 9.0 / 5, "glorot_uniform gain");
  const double s = 0.5 * std::sqrt(2.0 / (300 + 200));
  expect_moments(glorot_normal({300, 200}, {.gain = 0.5}), 0, s * s, 3, "glorot_normal");
  const double s3 = std::sqrt(2.0 / (5 * 8 * 16 + 5 * 8 * 64));  // fans 40·16 and 40·64
  expect_moments(glorot_normal(5, 8, 16, 64), 0, s3 * s3, 3, "glorot_normal N-d");
}

TEST(Initialisers, KaimingUniformAndNormalUseTheFanIn) {
  set_seed(2);
  const double b = std::sqrt(2.0) * std::sqrt(3.0 / 400);  // gain √2 by default, fan_in 400
  const Tensor u = kaiming_uniform(256, 400);
  expect_moments(u, 0, b * b / 3, 9.0 / 5, "kaiming_uniform");
  EXPECT_LE(moments(u).hi, b);
  EXPECT_GE(moments(u).lo, -b);
  const double s = std::sqrt(2.0) / std::sqrt(3 * 3 * 32.0);  // fan_in 3·3·32
  expect_moments(kaiming_normal(3, 3, 32, 256), 0, s * s, 3, "kaiming_normal");
  const double s1 = 1 / std::sqrt(400.0);
  expect_moments(kaiming_normal({300, 400}, {.gain = 1}), 0, s1 * s1, 3, "kaiming_normal gain 1");
}

TEST(Initialisers, TruncatedNormalStaysInItsBoundsWithTheTruncatedMoments) {
  set_seed(3);
  for (const TruncatedNormalOptions& o : {TruncatedNormalOptions{}, TruncatedNormalOptions{.mean = 1, .std = 2, .lo = 0, .hi = 3},
                                          TruncatedNormalOptions{.std = 0.02, .lo = -0.04, .hi = 0.04}}) {
    SCOPED_TRACE(std::to_string(o.mean) + " " + std::to_string(o.std));
    const Tensor t = truncated_normal({400, 500}, o);
    const Moments m = moments(t);
    EXPECT_GE(m.lo, o.lo);
    EXPECT_LE(m.hi, o.hi);
    const double al = (o.lo - o.mean) / o.std, be = (o.hi - o.mean) / o.std, z = Phi(be) - Phi(al);
    const double d = (phi(al) - phi(be)) / z;
    const double mean = o.mean + o.std * d;
    const double var = o.std * o.std * (1 + (al * phi(al) - be * phi(be)) / z - d * d);
    expect_moments(t, mean, var, 3, "truncated_normal");  // lighter tails than a normal's: kurtosis < 3
  }
  EXPECT_TRUE(has(error_message<ArgumentError>([] { truncated_normal({2}, {.lo = 1, .hi = 0}); }),
                  "truncated_normal: expected std > 0 and lo < hi"));
}

TEST(Initialisers, OrthogonalIsOrthogonalToOneInAHundredThousand) {
  set_seed(4);
  const Tensor tall = orthogonal(50, 30);  // columns orthonormal: WᵀW = I
  expect_identity(gram(tall.to_vector<double>(), 50, 30), 30, 1, "tall");
  // Wide: rows orthonormal, W Wᵀ = I (the transpose of a tall one).
  const Tensor wide = orthogonal({20, 45}, {.gain = 2});
  expect_identity(gram(permutedims(wide, {1, 0}).to_vector<double>(), 45, 20), 20, 4, "wide, gain 2");
  // N-d: prod(dims[0:end-1]) × dims[end], reshaped.
  const Tensor nd = orthogonal(3, 3, 4, 20);
  EXPECT_EQ(nd.shape(), (Shape{3, 3, 4, 20}));
  expect_identity(gram(nd.to_vector<double>(), 36, 20), 20, 1, "N-d");
  const Tensor square = orthogonal(16, 16);
  expect_identity(gram(square.to_vector<double>(), 16, 16), 16, 1, "square");
  EXPECT_TRUE(has(error_message<ArgumentError>([] { orthogonal(5); }), "orthogonal: needs two or more dims"));
}

TEST(Initialisers, SparseInitZeroesExactlyTheFractionOfEachColumn) {
  set_seed(5);
  const Tensor w = sparse_init({20, 300}, {.sparsity = 0.33});
  const auto v = w.to_vector<double>();
  double sq = 0;
  size_t nonzero = 0;
  for (int64_t j = 0; j < 300; ++j) {
    int zeros = 0;
    for (int64_t i = 0; i < 20; ++i) {
      const double x = v[size_t(i + j * 20)];
      if (x == 0) ++zeros;
      else {
        sq += x * x;
        ++nonzero;
      }
    }
    ASSERT_EQ(zeros, 7) << "column " << j;  // ceil(0.33 · 20)
  }
  // The rest normal with std 0.01 (5 standard errors of the variance).
  EXPECT_NEAR(sq / double(nonzero), 1e-4, 5 * 1e-4 * std::sqrt(2.0 / double(nonzero)));
  // Which rows are zero differs from column to column.
  const auto zero_rows = [&](int64_t j) {
    std::vector<int> r;
    for (int64_t i = 0; i < 20; ++i)
      if (v[size_t(i + j * 20)] == 0) r.push_back(int(i));
    return r;
  };
  EXPECT_NE(zero_rows(0), zero_rows(1));
  EXPECT_EQ(sum(abs(sparse_init({4, 3}, {.sparsity = 1.5}))).item<double>(), 0.0);  // min(1, sparsity)
  EXPECT_TRUE(has(error_message<ArgumentError>([] { sparse_init({3, 4}); }), "sparse_init: .sparsity"));
  EXPECT_TRUE(has(error_message<ArgumentError>([] { sparse_init({3, 4, 2}, {.sparsity = 0.5}); }),
                  "only 2-dimensional outputs are supported"));
}

TEST(Initialisers, IdentityInitIsExact) {
  EXPECT_EQ(identity_init(4).to_vector<float>(), std::vector<float>(4, 0.0f));  // a bias: zeros
  EXPECT_EQ(identity_init(3, 5).to_vector<float>(),
            (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));  // column-major 3×5
  // Flux's docstring: identity_init(3, 3, 2; gain=100) has 100 at [2, 1, 1] and [2, 2, 2] (1-based).
  const auto c = identity_init({3, 3, 2}, {.gain = 100}).to_vector<float>();
  for (size_t k = 0; k < c.size(); ++k)
    EXPECT_EQ(c[k], k == 1 + 0 * 3 + 0 * 9 || k == 1 + 1 * 3 + 1 * 9 ? 100.0f : 0.0f) << k;
  // circshift along the first dim.
  EXPECT_EQ(identity_init({3, 3}, {.shift = {1}}).to_vector<float>(), (std::vector<float>{0, 1, 0, 0, 0, 1, 1, 0, 0}));
  // A 3×3 convolution of identity_init is the identity (with SamePad).
  set_seed(6);
  const Tensor x = rand(6, 5, 4, 2);
  const Conv id({3, 3}, 4, 4, {.pad = SamePad(), .init = identity_init});
  flx::testing::expect_close(id(x), x, 1e-6);
}

TEST(Initialisers, TheSameSeedGivesTheSameBits) {
  auto draw = [](auto init, const Shape& s) {
    set_seed(42);
    const Tensor a = init(s);
    set_seed(42);
    const Tensor b = init(s);
    EXPECT_EQ(bits(a), bits(b));
    set_seed(43);
    EXPECT_NE(bits(a), bits(init(s)));
  };
  draw(glorot_uniform, {5, 6});
  draw(glorot_normal, {3, 3, 2, 4});
  draw(kaiming_uniform, {5, 6});
  draw(kaiming_normal, {5, 6});
  draw(truncated_normal, {5, 6});
  draw(orthogonal, {5, 6});
  draw([](const Shape& s) { return sparse_init(s, {.sparsity = 0.5}); }, {6, 5});
}

TEST(Initialisers, LayersTakeInitAndBiasOptions) {
  // The defaults are unchanged: Glorot-uniform from the same draws.
  set_seed(7);
  const Dense d(3, 4);
  set_seed(7);
  EXPECT_EQ(bits(d.weight), bits(glorot_uniform(4, 3)));
  // .init is called with the weight's dims, Flux's: Dense (out, in), Conv
  // (k..., in / groups, out), ConvTranspose (k..., out / groups, in), Embedding (d, n).
  std::vector<Shape> seen;
  auto record = [&](const Shape& s) {
    seen.push_back(s);
    return zeros(s);
  };
  (void)Dense(3, 4, relu, {.init = record});
  (void)Conv({3, 2}, 4, 6, {.groups = 2, .init = record});
  (void)ConvTranspose({3}, 4, 6, {.groups = 2, .init = record});
  (void)CrossCor({2, 2}, 3, 5, {.init = record});
  (void)DepthwiseConv({3, 3}, 3, 6, {.init = record});
  (void)Embedding(10, 4, {.init = record});
  EXPECT_EQ(seen, (std::vector<Shape>{{4, 3}, {3, 2, 2, 6}, {3, 3, 4}, {2, 2, 3, 5}, {3, 3, 1, 6}, {4, 10}}));
  // An initialiser object as it is, and bias = false.
  const Dense e(3, 3, {.init = identity_init, .bias = false});
  EXPECT_EQ(e.weight.to_vector<float>(), identity_init(3, 3).to_vector<float>());
  EXPECT_FALSE(e.bias.defined());
  EXPECT_EQ(flx::testing::shown(e), "Dense(3 => 3; bias=false)  # 9 parameters");
  const Conv c({3, 3}, 2, 4, relu, {.init = kaiming_normal, .bias = false});
  EXPECT_FALSE(c.bias.defined());
  EXPECT_EQ(flx::testing::shown(c), "Conv((3, 3), 2 => 4, relu, bias=false)  # 72 parameters");
  EXPECT_EQ(state(c).size(), 1u);
  const ConvTranspose t({3}, 2, 4, {.bias = false});
  EXPECT_FALSE(t.bias.defined());
  EXPECT_EQ(t(rand(5, 2, 1)).shape(), (Shape{7, 4, 1}));
  const Embedding emb(10, 4, {.init = [](const Shape& s) { return truncated_normal(s, {.std = 0.02}); }});
  EXPECT_LE(maximum(abs(emb.weight)).item<double>(), 0.04);
  // An init that returns the wrong dims is named.
  const std::string msg = error_message<DimensionMismatch>([] { Dense(3, 4, {.init = [](const Shape&) { return zeros(2, 2); }}); });
  EXPECT_TRUE(has(msg, "Dense: the .init function must return an array of the dims it is given, (4×3); got 2×2")) << msg;
  EXPECT_TRUE(has(error_message<DimensionMismatch>([] { Conv({3}, 1, 2, {.init = [](const Shape&) { return zeros(3); }}); }),
                  "Conv: the .init function must return"));
}

// The losses of include/flx/losses.hpp (Flux.Losses and NNlib's ctc_loss)
// against closed forms computed here in Float64 from Flux's formulas (and
// the values of Flux's doctests), their gradients against central
// differences in Float64, their options and aggregates, half widening, and
// their typed errors. The devices: the conformance suite
// (conformance_loss_cases.cpp); PyTorch: test_loss_parity.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::expect_values;
using flx::testing::has;
using flx::testing::rand64;
using V = std::vector<Tensor>;
using D = std::vector<double>;

namespace {

constexpr double kEps64 = std::numeric_limits<double>::epsilon();

Tensor t64(const D& v, Shape s) { return tensor(v, s); }
double value(const Tensor& t) {
  EXPECT_EQ(t.numel(), 1);
  return t.item<double>();
}
double mean_of(const D& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
// f applied to each pair of elements.
D each(const D& a, const D& b, const std::function<double(double, double)>& f) {
  D out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

// The two (3×2) operands of the closed-form checks.
const D kP{0.1, 0.7, 0.2, 0.3, 0.3, 0.4};
const D kT{0.2, 0.5, 0.1, 0.6, 0.3, 0.9};

// fn throws E, whose message holds every part.
template <class E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one with: " << parts.front();
  } catch (const E& e) {
    for (const auto& p : parts) EXPECT_TRUE(has(e.what(), p)) << "\"" << p << "\" not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another exception type: " << e.what();
  }
}

}  // namespace

TEST(Losses, MatchFluxDefinitions) {
  Tensor yhat = tensor(std::vector<double>{0.1, 0.7, 0.2, 0.3, 0.3, 0.4}, {3, 2});
  Tensor y = tensor(std::vector<double>{0, 1, 0, 0, 0, 1}, {3, 2});
  // mse = mean((ŷ - y)^2)
  double m = (0.01 + 0.09 + 0.04 + 0.09 + 0.09 + 0.36) / 6;
  EXPECT_NEAR(mse(yhat, y).item<double>(), m, 1e-12);
  EXPECT_NEAR(mse(yhat, y, {.agg = Agg::sum}).item<double>(), m * 6, 1e-12);
  EXPECT_EQ(mse(yhat, y, {.agg = Agg::none}).shape(), (Shape{3, 2}));
  // crossentropy = mean over columns of -Σ y log(ŷ + ϵ)
  double eps = std::numeric_limits<double>::epsilon();
  double ce = -(std::log(0.7 + eps) + std::log(0.4 + eps)) / 2;
  EXPECT_NEAR(crossentropy(yhat, y).item<double>(), ce, 1e-12);
  // logitcrossentropy = mean over columns of -Σ y logsoftmax(ŷ)
  auto lse = [](double a, double b, double c) { return std::log(std::exp(a) + std::exp(b) + std::exp(c)); };
  double lce = -((0.7 - lse(0.1, 0.7, 0.2)) + (0.4 - lse(0.3, 0.3, 0.4))) / 2;
  EXPECT_NEAR(logitcrossentropy(yhat, y).item<double>(), lce, 1e-12);
  // binarycrossentropy = mean(-y log(ŷ+ϵ) - (1-y) log(1-ŷ+ϵ))
  double bce = 0;
  std::vector<double> p{0.1, 0.7, 0.2, 0.3, 0.3, 0.4}, t{0, 1, 0, 0, 0, 1};
  for (int i = 0; i < 6; ++i) bce += -t[i] * std::log(p[i] + eps) - (1 - t[i]) * std::log(1 - p[i] + eps);
  EXPECT_NEAR(binarycrossentropy(yhat, y).item<double>(), bce / 6, 1e-12);
  // one-hot Bool targets work directly
  EXPECT_NEAR(logitcrossentropy(yhat, onehotbatch({1, 2}, 3)).item<double>(), lce, 1e-12);
  EXPECT_THROW(mse(yhat, ones(Float64, 2, 3)), DimensionMismatch);
}

TEST(Losses, RegressionLossesMatchTheirClosedForms) {
  const Tensor p = t64(kP, {3, 2}), t = t64(kT, {3, 2});
  EXPECT_NEAR(value(mae(p, t)), mean_of(each(kP, kT, [](double a, double b) { return std::fabs(a - b); })), 1e-15);
  EXPECT_NEAR(value(mae(p, t, {.agg = Agg::sum})), 6 * value(mae(p, t)), 1e-15);
  expect_values(mae(p, t, {.agg = Agg::none}), each(kP, kT, [](double a, double b) { return std::fabs(a - b); }),
                1e-15);
  auto msle1 = [](double e) {
    return [e](double a, double b) { return std::pow(std::log(a + e) - std::log(b + e), 2); };
  };
  EXPECT_NEAR(value(msle(p, t)), mean_of(each(kP, kT, msle1(kEps64))), 1e-14);
  EXPECT_NEAR(value(msle(p, t, {.epsilon = 0.1})), mean_of(each(kP, kT, msle1(0.1))), 1e-14);
  // Huber: |ŷ - y| = 0.1 0.2 0.1 0.3 0 0.5; δ = 0.15 takes both branches.
  auto huber1 = [](double d) {
    return [d](double a, double b) {
      const double e = std::fabs(a - b);
      return e < d ? 0.5 * e * e : d * (e - 0.5 * d);
    };
  };
  EXPECT_NEAR(value(huber_loss(p, t)), mean_of(each(kP, kT, huber1(1.0))), 1e-15);
  EXPECT_NEAR(value(huber_loss(p, t, {.delta = 0.15})), mean_of(each(kP, kT, huber1(0.15))), 1e-15);
  EXPECT_NEAR(value(huber_loss(p, t, {.agg = Agg::sum, .delta = 0.15})), 6 * mean_of(each(kP, kT, huber1(0.15))),
              1e-15);
  EXPECT_NEAR(value(poisson_loss(p, t)), mean_of(each(kP, kT, [](double a, double b) { return a - b * std::log(a); })),
              1e-15);
  // Flux's doctests.
  const Tensor r = t64({1, 2, 3}, {3});
  EXPECT_NEAR(value(mae(t64({1.1, 1.9, 3.1}, {3}), r)), 0.10000000000000009, 1e-15);
  EXPECT_NEAR(value(huber_loss(t64({1.1, 2.1, 3.1}, {3}), r)), 0.005000000000000009, 1e-15);
  EXPECT_NEAR(value(huber_loss(t64({1.1, 2.1, 3.1}, {3}), r, {.delta = 0.05})), 0.003750000000000005, 1e-15);
  EXPECT_NEAR(value(msle(tensor({1.1f, 2.2f, 3.3f}), tensor({1.f, 2.f, 3.f}))), 0.009084041, 1e-7);
  EXPECT_NEAR(value(poisson_loss(t64({1, 3, 3}, {3}), r)), 0.5023128522198171, 1e-15);
}

TEST(Losses, ClassificationLossesMatchTheirClosedForms) {
  const Tensor t = t64(kT, {3, 2});
  // logitbinarycrossentropy = binarycrossentropy(σ(ŷ), y) with ϵ = 0.
  auto lbce1 = [](double x, double y) {
    const double s = 1 / (1 + std::exp(-x));
    return -y * std::log(s) - (1 - y) * std::log(1 - s);
  };
  const D x{2.0, -1.0, 0.5, -3.0, 4.0, 0.0};
  EXPECT_NEAR(value(logitbinarycrossentropy(t64(x, {3, 2}), t)), mean_of(each(x, kT, lbce1)), 1e-14);
  EXPECT_NEAR(value(logitbinarycrossentropy(tensor({2.f, -1.f, 3.1415927f}), tensor({1.f, 0.f, 1.f}))), 0.160832,
              1e-6);  // Flux's doctest
  // Stable where σ(ŷ) rounds to 0 or 1 (Float32): the loss is |ŷ| or 0, its gradient σ(ŷ) - y.
  const Tensor big = tensor({-1000.f, 1000.f, 1000.f, -200.f}), yb = tensor({1.f, 1.f, 0.f, 0.f});
  expect_values(logitbinarycrossentropy(big, yb, {.agg = Agg::none}), {1000, 0, 1000, 0}, 1e-7);
  auto [gb] = gradient([&](const Tensor& z) { return logitbinarycrossentropy(z, yb, {.agg = Agg::sum}); }, big);
  expect_values(gb, {-1, 0, 1, 0}, 1e-7);
  // kldivergence: mean over columns of Σ y log y - Σ y log(ŷ + ϵ).
  const D q{0.2, 0.5, 0.3, 0.6, 0.3, 0.1}, pp{0.3, 0.3, 0.4, 0.1, 0.7, 0.2};
  double kl = 0;
  for (int i = 0; i < 6; ++i) kl += q[size_t(i)] * std::log(q[size_t(i)]) - q[size_t(i)] * std::log(pp[size_t(i)] + kEps64);
  EXPECT_NEAR(value(kldivergence(t64(pp, {3, 2}), t64(q, {3, 2}))), kl / 2, 1e-14);
  // Along dim 1 (rows as distributions): Σ over each row, mean over 3 rows.
  const D q2{0.2, 0.5, 0.3, 0.8, 0.5, 0.7}, p2{0.5, 0.9, 0.6, 0.5, 0.1, 0.4};
  double kl2 = 0;
  for (int i = 0; i < 6; ++i) kl2 += q2[size_t(i)] * std::log(q2[size_t(i)] / p2[size_t(i)]);
  EXPECT_NEAR(value(kldivergence(t64(p2, {3, 2}), t64(q2, {3, 2}), {.dim = 1, .epsilon = 0})), kl2 / 3, 1e-14);
  // Flux's doctests: kldivergence(fill(0.5, 2, 2), [1 0; 0 1]) = log 2, and zero for equal ones.
  const Tensor half = full(Float64, 0.5, Shape{2, 2}), eye = t64({1, 0, 0, 1}, {2, 2});
  EXPECT_NEAR(value(kldivergence(half, eye)), std::log(2.0), 1e-15);
  EXPECT_NEAR(value(kldivergence(half, eye, {.agg = Agg::sum})), 2 * std::log(2.0), 1e-15);
  EXPECT_EQ(value(kldivergence(half, half, {.epsilon = 0})), 0.0);
  EXPECT_NEAR(value(kldivergence(half, onehotbatch({0, 1}, 2))), std::log(2.0), 1e-15);  // Bool targets
}

TEST(Losses, LabelSmoothingIsFluxs) {
  // One-hot columns: y (1 - α) + α / size(y, 0); Flux's doctest values.
  const Tensor y = onehotbatch({1, 1, 1, 0, 1, 0}, 2);
  const Tensor s = label_smoothing(y, 0.2);
  EXPECT_EQ(s.dtype(), Float32);
  expect_values(s, {0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.9, 0.1, 0.1, 0.9, 0.9, 0.1}, 1e-7);
  const Tensor y3 = onehotbatch({0, 1, 2, 1, 0}, 3).to(Float64);
  const Tensor s3 = label_smoothing(y3, 0.15);
  EXPECT_EQ(s3.dtype(), Float64);
  expect_values(s3, {0.9, 0.05, 0.05, 0.05, 0.9, 0.05, 0.05, 0.05, 0.9, 0.05, 0.9, 0.05, 0.9, 0.05, 0.05}, 1e-15);
  // ... and Flux's crossentropy doctest with them: 1.5776052.
  const Tensor model = softmax(reshape(tensor(D{-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}), {3, 5}));
  EXPECT_NEAR(value(crossentropy(model, s3)), 1.5776052, 1e-6);
  // Along dim 1 (classes in rows), and binary labels (Flux's dims = 0): y (1 - α) + α / 2.
  expect_values(label_smoothing(t64({1, 0, 0, 0, 0, 1}, {2, 3}), 0.3, {.dim = 1}),
                {0.8, 0.1, 0.1, 0.1, 0.1, 0.8}, 1e-15);
  expect_values(label_smoothing(t64({1, 0, 1}, {3}), 0.2, {.binary = true}), {0.9, 0.1, 0.9}, 1e-15);
}

TEST(Losses, MarginLossesMatchTheirClosedForms) {
  const D yp{0.1, 0.3, 1, 1.5}, yt{1, -1, 1, 1};
  const Tensor p = t64(yp, {4}), t = t64(yt, {4});
  auto hinge1 = [](double a, double b) { return std::max(0.0, 1 - a * b); };
  EXPECT_NEAR(value(hinge_loss(p, t)), mean_of(each(yp, yt, hinge1)), 1e-15);
  EXPECT_NEAR(value(hinge_loss(p, t)), 0.55, 1e-15);  // Flux's doctest
  EXPECT_NEAR(value(squared_hinge_loss(p, t)),
              mean_of(each(yp, yt, [&](double a, double b) { return std::pow(hinge1(a, b), 2); })), 1e-15);
  EXPECT_NEAR(value(squared_hinge_loss(p, t)), 0.625, 1e-15);
  expect_values(hinge_loss(p, t, {.agg = Agg::none}), {0.9, 1.3, 0, 0}, 1e-15);
  // siamese: (1 - y) ŷ² + y max(0, margin - ŷ)²; Flux's doctests use y = 1:3.
  auto siam1 = [](double m) {
    return [m](double d, double y) { return (1 - y) * d * d + y * std::pow(std::max(0.0, m - d), 2); };
  };
  const D d{0.5, 1.5, 2.5, 0.2}, s{0, 1, 1, 0};
  EXPECT_NEAR(value(siamese_contrastive_loss(t64(d, {4}), t64(s, {4}))), mean_of(each(d, s, siam1(1))), 1e-15);
  EXPECT_NEAR(value(siamese_contrastive_loss(t64(d, {4}), t64(s, {4}), {.margin = 2})), mean_of(each(d, s, siam1(2))),
              1e-15);
  const Tensor r = t64({1, 2, 3}, {3}), dd = t64({0.5, 1.5, 2.5}, {3});
  EXPECT_NEAR(value(siamese_contrastive_loss(dd, r)), -4.833333333333333, 1e-14);
  EXPECT_NEAR(value(siamese_contrastive_loss(dd, r, {.margin = 2})), -4.0, 1e-14);
}

TEST(Losses, SegmentationLossesMatchTheirClosedForms) {
  const Tensor p = t64(kP, {3, 2}), t = t64(kT, {3, 2});
  double yp = 0, yy = 0, pp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < 6; ++i) {
    yp += kT[i] * kP[i], yy += kT[i] * kT[i], pp += kP[i] * kP[i];
    fp += (1 - kT[i]) * kP[i], fn += kT[i] * (1 - kP[i]);
  }
  EXPECT_NEAR(value(dice_coeff_loss(p, t)), 1 - (2 * yp + 1) / (yy + pp + 1), 1e-15);
  EXPECT_NEAR(value(dice_coeff_loss(p, t, {.smooth = 0.5})), 1 - (2 * yp + 0.5) / (yy + pp + 0.5), 1e-15);
  EXPECT_NEAR(value(dice_coeff_loss(t64({1.1, 2.1, 3.1}, {3}), t64({1, 2, 3}, {3}))), 0.000992391663909964, 1e-15);
  // Tversky, Flux's code: β on the false positives, 1 - β on the false negatives.
  EXPECT_NEAR(value(tversky_loss(p, t)), 1 - (yp + 1) / (yp + 0.7 * fp + 0.3 * fn + 1), 1e-15);
  EXPECT_NEAR(value(tversky_loss(p, t, {.beta = 0.2})), 1 - (yp + 1) / (yp + 0.2 * fp + 0.8 * fn + 1), 1e-15);
  EXPECT_EQ(dice_coeff_loss(p, t).ndims(), 0);
}

TEST(Losses, FocalLossesMatchTheirClosedForms) {
  // binary_focal_loss: p_t = y ŷϵ + (1 - y)(1 - ŷϵ), mean of -(1 - p_t)^γ log p_t; Flux's doctest.
  const D yh{0.268941, 0.731059, 0.5, 0.5, 0.268941, 0.731059}, yb{0, 1, 1, 0, 0, 1};
  auto bfocal1 = [](double g, double e) {
    return [g, e](double p, double y) {
      const double pt = y * (p + e) + (1 - y) * (1 - p - e);
      return -std::pow(1 - pt, g) * std::log(pt);
    };
  };
  const Tensor ph = t64(yh, {2, 3}), th = t64(yb, {2, 3});
  EXPECT_NEAR(value(binary_focal_loss(ph, th)), mean_of(each(yh, yb, bfocal1(2, kEps64))), 1e-15);
  EXPECT_NEAR(value(binary_focal_loss(ph, th)), 0.0728675615927385, 1e-12);
  EXPECT_NEAR(value(binary_focal_loss(ph, th, {.gamma = 1.5, .epsilon = 1e-3})),
              mean_of(each(yh, yb, bfocal1(1.5, 1e-3))), 1e-15);
  EXPECT_NEAR(value(binary_focal_loss(ph, th, {.gamma = 0})), value(binarycrossentropy(ph, th)), 1e-15);
  // focal_loss: mean over columns of Σ -y (1 - ŷϵ)^γ log ŷϵ; Flux's doctest (softmax of -7:7).
  const Tensor model = softmax(reshape(tensor(D{-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}), {3, 5}));
  const Tensor y = onehotbatch({0, 1, 2, 1, 0}, 3);
  // Flux's doctest checks ≈ 1.1277571935622628 (Float32's rtol); the exact value is 1.12775650337068...
  EXPECT_NEAR(value(focal_loss(model, y)), 1.1277571935622628, 1e-6);
  EXPECT_NEAR(value(focal_loss(model, y)), 1.1277565033706847, 1e-14);
  const D mp = model.to_vector<double>(), my = y.to(Float64).to_vector<double>();
  double f = 0;
  for (size_t i = 0; i < mp.size(); ++i) f += -my[i] * std::pow(1 - mp[i] - kEps64, 3) * std::log(mp[i] + kEps64);
  EXPECT_NEAR(value(focal_loss(model, y, {.gamma = 3})), f / 5, 1e-15);
  EXPECT_NEAR(value(focal_loss(model, y, {.gamma = 0})), value(crossentropy(model, y)), 1e-15);
  // Along dim 1: Σ over each row, mean over the 5 rows of the transpose.
  EXPECT_NEAR(value(focal_loss(transpose(model), transpose(y.to(Float64)), {.dim = 1})), value(focal_loss(model, y)),
              1e-15);
}

namespace {
// -log p(labels | x) by brute force: every path of classes over the T steps
// (C^T of them), collapsed (repeats merged, then blanks removed).
double ctc_brute_force(const D& x, int C, int T, const std::vector<int64_t>& labels) {
  std::vector<double> prob(x.size());
  for (int t = 0; t < T; ++t) {
    double z = 0;
    for (int c = 0; c < C; ++c) z += std::exp(x[size_t(t * C + c)]);
    for (int c = 0; c < C; ++c) prob[size_t(t * C + c)] = std::exp(x[size_t(t * C + c)]) / z;
  }
  double total = 0;
  std::vector<int> path(size_t(T), 0);
  for (long n = 0, paths = std::lround(std::pow(C, T)); n < paths; ++n) {
    long k = n;
    double pr = 1;
    for (int t = 0; t < T; ++t, k /= C) path[size_t(t)] = int(k % C), pr *= prob[size_t(t * C + path[size_t(t)])];
    std::vector<int64_t> out;
    for (int t = 0; t < T; ++t)
      if (path[size_t(t)] != C - 1 && (t == 0 || path[size_t(t)] != path[size_t(t - 1)])) out.push_back(path[size_t(t)]);
    if (out == labels) total += pr;
  }
  return -std::log(total);
}
}  // namespace

TEST(Losses, CtcLossIsTheSumOverEveryAlignment) {
  set_seed(29);
  const int C = 4, T = 5;  // classes 0, 1, 2 and the blank 3
  const Tensor x = randn(Float64, Shape{C, T}) * 2.0;
  const D xv = x.to_vector<double>();
  for (const std::vector<int64_t>& labels : std::vector<std::vector<int64_t>>{
           {0, 2}, {1, 1}, {2, 0, 1}, {1}, {}, {0, 0, 1}, {2, 1, 0, 1, 2}}) {
    const Tensor y = tensor(labels, {int64_t(labels.size())});
    const Tensor l = ctc_loss(x, y);
    EXPECT_EQ(l.ndims(), 0);
    EXPECT_EQ(l.dtype(), Float64);
    EXPECT_NEAR(value(l), ctc_brute_force(xv, C, T, labels), 1e-12) << "labels of length " << labels.size();
  }
  // Int32 labels; Float32 scores give a Float32 loss.
  EXPECT_NEAR(value(ctc_loss(x.to(Float32), tensor(std::vector<int32_t>{0, 2}, {2}))),
              ctc_brute_force(xv, C, T, {0, 2}), 1e-5);
  // No alignment of 5 steps gives 1 1 1 1 (it needs 7: blanks between repeats).
  const Tensor none = tensor(std::vector<int64_t>{1, 1, 1, 1}, {4});
  EXPECT_EQ(value(ctc_loss(x, none)), std::numeric_limits<double>::infinity());
  auto [g] = gradient([&](const Tensor& z) { return ctc_loss(z, none); }, x);
  expect_values(g, D(size_t(C * T), 0.0), 0);
}

TEST(Losses, CtcLossOfHalvesIsFloat32AndItsGradientHalf) {
  const Tensor x = (randn(Float64, Shape{3, 4})).to(Float16), y = tensor(std::vector<int64_t>{0, 1}, {2});
  auto [l, g] = withgradient([&](const Tensor& z) { return ctc_loss(z, y); }, x);
  EXPECT_EQ(l.dtype(), Float32);
  EXPECT_EQ(std::get<0>(g).dtype(), Float16);
  EXPECT_NEAR(l.item<double>(), ctc_brute_force(x.to(Float64).to_vector<double>(), 3, 4, {0, 1}), 1e-5);
}

TEST(GradCheck, NewLosses) {
  set_seed(291);
  const Tensor w = rand64({4, 3}), t = rand64({4, 3}, 0.1, 0.9), pm = sign(rand64({4, 3}));
  auto fd = [](const std::function<Tensor(const V&)>& f, V xs, const std::string& what) {
    check_gradients(f, std::move(xs), 1e-6, 1e-6, what);
  };
  fd([&](const V& v) { return mae(v[0], v[1]); }, {rand64({4, 3}), rand64({4, 3})}, "mae");
  fd([&](const V& v) { return msle(v[0], v[1]); }, {rand64({4, 3}, 0.1, 2), rand64({4, 3}, 0.1, 2)}, "msle");
  fd([&](const V& v) { return huber_loss(v[0], v[1], {.delta = 0.5}); }, {rand64({4, 3}), rand64({4, 3})},
     "huber_loss");
  fd([&](const V& v) { return poisson_loss(v[0], v[1]); }, {rand64({4, 3}, 0.2, 3), rand64({4, 3}, 0, 3)},
     "poisson_loss");
  fd([&](const V& v) { return logitbinarycrossentropy(v[0], v[1]); }, {rand64({4, 3}, -4, 4), rand64({4, 3}, 0, 1)},
     "logitbinarycrossentropy");
  fd([&](const V& v) { return kldivergence(softmax(v[0]), softmax(v[1])); }, {rand64({4, 3}), rand64({4, 3})},
     "kldivergence");
  fd([&](const V& v) { return kldivergence(softmax(v[0], 1), softmax(v[1], 1), {.agg = Agg::sum, .dim = 1}); },
     {rand64({4, 3}), rand64({4, 3})}, "kldivergence dim 1");
  fd([&](const V& v) { return sum(label_smoothing(v[0], 0.1) * w); }, {rand64({4, 3})}, "label_smoothing");
  fd([&](const V& v) { return hinge_loss(v[0], pm); }, {rand64({4, 3}, -2, 2)}, "hinge_loss");
  fd([&](const V& v) { return squared_hinge_loss(v[0], pm); }, {rand64({4, 3}, -2, 2)}, "squared_hinge_loss");
  fd([&](const V& v) { return siamese_contrastive_loss(v[0], v[1], {.margin = 0.8}); },
     {rand64({4, 3}, 0, 1.5), rand64({4, 3}, 0, 1)}, "siamese_contrastive_loss");
  fd([&](const V& v) { return dice_coeff_loss(v[0], v[1]); }, {rand64({4, 3}, 0, 1), rand64({4, 3}, 0, 1)},
     "dice_coeff_loss");
  fd([&](const V& v) { return tversky_loss(v[0], v[1], {.beta = 0.4}); }, {rand64({4, 3}, 0, 1), rand64({4, 3}, 0, 1)},
     "tversky_loss");
  fd([&](const V& v) { return binary_focal_loss(v[0], v[1]); }, {rand64({4, 3}, 0.05, 0.95), t}, "binary_focal_loss");
  fd([&](const V& v) { return binary_focal_loss(v[0], v[1], {.gamma = 1.5}); }, {rand64({4, 3}, 0.05, 0.95), t},
     "binary_focal_loss γ = 1.5");
  fd([&](const V& v) { return focal_loss(softmax(v[0]), v[1]); }, {rand64({4, 3}), softmax(rand64({4, 3}))},
     "focal_loss");
  fd([&](const V& v) { return focal_loss(softmax(v[0], 1), v[1], {.dim = 1, .gamma = 0.5}); },
     {rand64({4, 3}), softmax(rand64({4, 3}), 1)}, "focal_loss dim 1");
  const Tensor labels = tensor(std::vector<int64_t>{0, 2, 2, 1}, {4});
  fd([&](const V& v) { return ctc_loss(v[0], labels); }, {rand64({4, 7}, -2, 2)}, "ctc_loss");
  fd([&](const V& v) { return ctc_loss(v[0], tensor(std::vector<int64_t>{}, {0})); }, {rand64({3, 4})},
     "ctc_loss of no labels");
}

// (eps given where a loss has one: its default is the prediction's type's.)
TEST(Losses, DefaultOptionsGiveOneElementAndHalvesWidenToFloat32) {
  constexpr double kEps16 = 0x1p-10;
  const Tensor p = t64(kP, {3, 2}).to(Float16), t = t64(kT, {3, 2}).to(Float16);
  const std::map<std::string, std::function<Tensor(const Tensor&, const Tensor&)>> all = {
      {"mae", [](auto& a, auto& b) { return mae(a, b); }},
      {"msle", [](auto& a, auto& b) { return msle(a, b, {.epsilon = kEps16}); }},
      {"huber_loss", [](auto& a, auto& b) { return huber_loss(a, b); }},
      {"poisson_loss", [](auto& a, auto& b) { return poisson_loss(a, b); }},
      {"logitbinarycrossentropy", [](auto& a, auto& b) { return logitbinarycrossentropy(a, b); }},
      {"kldivergence", [](auto& a, auto& b) { return kldivergence(a, b, {.epsilon = kEps16}); }},
      {"hinge_loss", [](auto& a, auto& b) { return hinge_loss(a, b); }},
      {"squared_hinge_loss", [](auto& a, auto& b) { return squared_hinge_loss(a, b); }},
      {"siamese_contrastive_loss", [](auto& a, auto& b) { return siamese_contrastive_loss(a, b); }},
      {"dice_coeff_loss", [](auto& a, auto& b) { return dice_coeff_loss(a, b); }},
      {"tversky_loss", [](auto& a, auto& b) { return tversky_loss(a, b); }},
      {"binary_focal_loss", [](auto& a, auto& b) { return binary_focal_loss(a, b, {.epsilon = kEps16}); }},
      {"focal_loss", [](auto& a, auto& b) { return focal_loss(a, b, {.epsilon = kEps16}); }}};
  for (const auto& [name, f] : all) {
    SCOPED_TRACE(name);
    auto [l, g] = withgradient([&](const Tensor& a) { return f(a, t); }, p);
    EXPECT_EQ(l.numel(), 1);
    EXPECT_EQ(l.dtype(), Float32);
    EXPECT_EQ(std::get<0>(g).dtype(), Float16);
    // The Float32 loss of the Float16 operands, as the same loss of their Float32 values.
    EXPECT_NEAR(l.item<double>(), f(p.to(Float32), t.to(Float32)).item<double>(),
                1e-6 * std::max(1.0, std::fabs(l.item<double>())));
  }
}

TEST(Losses, BadArgumentsRaiseTypedErrorsNamingTheLossAndShapes) {
  const Tensor a = zeros(Float64, 3, 2), b = zeros(Float64, 2, 3);
  const std::map<std::string, std::function<Tensor()>> mismatched = {
      {"mae", [&] { return mae(a, b); }},
      {"msle", [&] { return msle(a, b); }},
      {"huber_loss", [&] { return huber_loss(a, b); }},
      {"poisson_loss", [&] { return poisson_loss(a, b); }},
      {"logitbinarycrossentropy", [&] { return logitbinarycrossentropy(a, b); }},
      {"kldivergence", [&] { return kldivergence(a, b); }},
      {"hinge_loss", [&] { return hinge_loss(a, b); }},
      {"squared_hinge_loss", [&] { return squared_hinge_loss(a, b); }},
      {"siamese_contrastive_loss", [&] { return siamese_contrastive_loss(a, b); }},
      {"dice_coeff_loss", [&] { return dice_coeff_loss(a, b); }},
      {"tversky_loss", [&] { return tversky_loss(a, b); }},
      {"binary_focal_loss", [&] { return binary_focal_loss(a, b); }},
      {"focal_loss", [&] { return focal_loss(a, b); }}};
  for (const auto& [name, f] : mismatched)
    expect_error<DimensionMismatch>([&] { f(); }, {name + ": prediction (3×2) and target (2×3)"});
  expect_error<ArgumentError>([&] { huber_loss(a, a, {.delta = 0}); }, {"huber_loss", "delta"});
  expect_error<ArgumentError>([&] { siamese_contrastive_loss(a, a, {.margin = -1}); }, {"siamese_contrastive_loss",
                                                                                        "margin", "-1"});
  expect_error<ArgumentError>([&] { focal_loss(a, a, {.gamma = -2}); }, {"focal_loss", "gamma"});
  expect_error<ArgumentError>([&] { binary_focal_loss(a, a, {.gamma = -2}); }, {"binary_focal_loss", "gamma"});
  expect_error<ArgumentError>([&] { focal_loss(a, a, {.dim = 2}); }, {"focal_loss: dim 2", "(3×2)", "0-based"});
  expect_error<ArgumentError>([&] { kldivergence(a, a, {.dim = -1}); }, {"kldivergence: dim -1", "(3×2)"});
  expect_error<ArgumentError>([&] { crossentropy(a, a, {.dim = 2}); }, {"crossentropy: dim 2", "(3×2)"});
  expect_error<ArgumentError>([&] { label_smoothing(a, 1.0); }, {"label_smoothing", "between 0 and 1"});
  expect_error<ArgumentError>([&] { label_smoothing(a, 0.1, {.dim = 3}); }, {"label_smoothing: dim 3", "(3×2)"});
  // ctc_loss: ŷ (classes, time), integer labels below the blank (the last class).
  const Tensor x = zeros(Float64, 4, 5);
  expect_error<ArgumentError>([&] { ctc_loss(x, tensor(std::vector<int64_t>{0, 3}, {2})); },
                              {"ctc_loss: label 3 at position 1", "(4×5)", "[0, 2]", "3 (the last class) is the blank"});
  expect_error<ArgumentError>([&] { ctc_loss(x, tensor(std::vector<int64_t>{-1}, {1})); }, {"ctc_loss: label -1"});
  expect_error<TypeError>([&] { ctc_loss(x, t64({0, 1}, {2})); }, {"ctc_loss", "integers", "Float64"});
  expect_error<DimensionMismatch>([&] { ctc_loss(zeros(Float64, 4, 5, 2), tensor(std::vector<int64_t>{0}, {1})); },
                                  {"ctc_loss", "(classes, time)", "(4×5×2)"});
  expect_error<DimensionMismatch>([&] { ctc_loss(x, tensor(std::vector<int64_t>{0, 1}, {1, 2})); },
                                  {"ctc_loss", "vector", "(1×2)"});
}

// ctc_loss runs on the CPU only: elsewhere NotImplemented names the CPU as
// the way, and that way (ŷ moved to the CPU) gives the CPU's loss with the
// gradient back on the device.
TEST(Losses, CtcLossOnAnotherDeviceRaisesNotImplementedNamingTheCpu) {
  const auto devs = flx::testing::accelerator_devices();
  if (devs.empty()) GTEST_SKIP() << "no device besides the CPU is functional here";
  const Tensor x = randn(Float32, Shape{3, 4}), y = tensor(std::vector<int64_t>{0, 1}, {2});
  for (const Device& d : devs) {
    SCOPED_TRACE(d.str());
    const Tensor xd = x.to(d);
    expect_error<NotImplemented>([&] { ctc_loss(xd, y); },
                                 {"ctc_loss runs on the CPU only", d.str(), "ctc_loss(yhat.to(Device::cpu()), y)"});
    auto [l, g] = withgradient([&](const Tensor& z) { return ctc_loss(z.to(Device::cpu()), y); }, xd);
    EXPECT_NEAR(l.item<double>(), ctc_loss(x, y).item<double>(), 1e-6);
    EXPECT_EQ(std::get<0>(g).device(), d);
  }
}

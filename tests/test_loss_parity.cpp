// PyTorch parity of the losses that PyTorch also has: l1_loss (mae),
// huber_loss, kl_div (kldivergence), binary_cross_entropy_with_logits
// (logitbinarycrossentropy), poisson_nll_loss (poisson_loss) and ctc_loss:
// the loss and its gradients for every operand against PyTorch's, in
// Float64, read from tests/parity/loss_fixtures.safetensors (written by
// tests/parity/make_loss_fixtures.py with torch, in flx's layout; the
// sizes and options here are the script's). Where PyTorch's loss is not
// Flux's by design, the test says how, and adapts flx's call to compute
// PyTorch's. Tolerance: 1e-10 relative (Float64 both sides; what differs is
// the order of the sums).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_close;

namespace {

constexpr double kTol = 1e-10;

const State& fixtures() {
  static const State s = load(std::string(FLX_TEST_PARITY_DIR) + "/loss_fixtures.safetensors");
  return s;
}
Tensor fx(const std::string& name) { return fixtures().at(name); }

using Loss = std::function<Tensor(const Tensor&, const Tensor&)>;

// f(a, b) against the fixture's loss (a scalar, or unreduced with the
// gradients of sum(loss .* c)) and its gradients d<a_name>, d<b_name>
// (b's only where the fixture has one: PyTorch's integer targets have none).
void expect_parity(const std::string& name, const std::string& a_name, const std::string& b_name, const Loss& f) {
  SCOPED_TRACE(name);
  const Tensor a = fx(name + "." + a_name), b = fx(name + "." + b_name);
  ASSERT_EQ(a.dtype(), Float64);
  const bool reduced = fixtures().contains(name + ".loss");
  const Tensor c = reduced ? Tensor{} : fx(name + ".c");
  auto total = [&](const Tensor& l) { return reduced ? l : sum(l * c); };
  auto [l, g] = withgradient([&](const Tensor& x, const Tensor& y) { return total(f(x, y)); }, a, b);
  if (reduced) expect_close(l, fx(name + ".loss"), kTol, name + " loss");
  else expect_close(f(a, b), fx(name + ".none"), kTol, name + " unreduced loss");
  expect_close(std::get<0>(g), fx(name + ".d" + a_name), kTol, name + " d/d" + a_name);
  if (fixtures().contains(name + ".d" + b_name))
    expect_close(std::get<1>(g), fx(name + ".d" + b_name), kTol, name + " d/d" + b_name);
}

}  // namespace

TEST(LossParity, MaeIsL1Loss) {
  expect_parity("l1_mean", "x", "y", [](const Tensor& x, const Tensor& y) { return mae(x, y); });
  expect_parity("l1_sum", "x", "y", [](const Tensor& x, const Tensor& y) { return mae(x, y, {.agg = Agg::sum}); });
  expect_parity("l1_none", "x", "y", [](const Tensor& x, const Tensor& y) { return mae(x, y, {.agg = Agg::none}); });
}

TEST(LossParity, HuberLossIsPyTorchs) {
  expect_parity("huber", "x", "y", [](const Tensor& x, const Tensor& y) { return huber_loss(x, y, {.delta = 0.8}); });
  expect_parity("huber_default", "x", "y", [](const Tensor& x, const Tensor& y) { return huber_loss(x, y); });
}

// PyTorch's kl_div(input, target) takes the log of the prediction as its
// input, and reduction = "batchmean" divides the sum by the batch size,
// which is Flux's mean over columns. Flux's kldivergence(ŷ, y) takes ŷ
// itself and adds ϵ inside the log: given ϵ = 0 here, it is
// kl_div(log ŷ, y, reduction = "batchmean"), gradients for ŷ and y alike.
TEST(LossParity, KldivergenceIsKlDivOfTheLogPrediction) {
  expect_parity("kl_div", "yhat", "y",
                [](const Tensor& p, const Tensor& y) { return kldivergence(p, y, {.epsilon = 0}); });
}

// Logits up to ±40: the stable form on both sides.
TEST(LossParity, LogitbinarycrossentropyIsBinaryCrossEntropyWithLogits) {
  expect_parity("bce_logits", "x", "y", [](const Tensor& x, const Tensor& y) { return logitbinarycrossentropy(x, y); });
  expect_parity("bce_logits_none", "x", "y", [](const Tensor& x, const Tensor& y) {
    return logitbinarycrossentropy(x, y, {.agg = Agg::none});
  });
}

// PyTorch's poisson_nll_loss(x, y, log_input = true) is exp(x) - y x: Flux's
// poisson_loss(ŷ, y) = ŷ - y log ŷ of the rate ŷ = exp(x). With log_input =
// false it is ŷ - y log(ŷ + 1e-8): PyTorch adds eps = 1e-8 inside the log
// and Flux does not, so flx computes poisson_loss(ŷ + 1e-8, y) - 1e-8.
// Neither adds the Stirling term (PyTorch's full = false).
TEST(LossParity, PoissonLossIsPoissonNllLoss) {
  expect_parity("poisson_log_input", "x", "y",
                [](const Tensor& x, const Tensor& y) { return poisson_loss(exp(x), y); });
  expect_parity("poisson_rate", "yhat", "y",
                [](const Tensor& p, const Tensor& y) { return poisson_loss(p + 1e-8, y) - 1e-8; });
}

// PyTorch's ctc_loss takes log-probabilities (T, N, C) (flx's layout: (C, N,
// T)), a padded batch of targets with their lengths, and the blank's index;
// NNlib's (flx's) takes one sequence's scores (C, T), applies logsoftmax
// itself, and its blank is the last class. So PyTorch is given
// log_softmax(logits) and blank = C - 1, and flx each sequence's scores,
// cut to its length. reduction = "none" is NNlib's loss of each sequence;
// PyTorch's default, "mean", divides each by its target length and then
// averages over the batch, which flx composes here.
TEST(LossParity, CtcLossIsPyTorchsWithTheBlankLast) {
  const Tensor logits = fx("ctc.logits"), targets = fx("ctc.targets"), c = fx("ctc.c");
  const std::vector<int64_t> tlen = fx("ctc.input_lengths").to_vector<int64_t>(),
                             llen = fx("ctc.target_lengths").to_vector<int64_t>();
  ASSERT_EQ(logits.shape(), (Shape{5, 3, 9}));
  const int64_t n = logits.size(1);
  // Sequence k's loss of the (C, N, T) scores.
  auto loss_of = [&](const Tensor& z, int64_t k) {
    const Tensor seq = slice(selectdim(z, 1, k), 1, 0, tlen[size_t(k)]);
    const Tensor labels = slice(selectdim(targets, 1, k), 0, 0, llen[size_t(k)]);
    return ctc_loss(seq, labels);
  };
  std::vector<double> each;
  for (int64_t k = 0; k < n; ++k) each.push_back(loss_of(logits, k).item<double>());
  flx::testing::expect_values(fx("ctc.none"), each, kTol, "ctc loss per sequence");
  // Gradients of Σ c_k loss_k ("none") and of the mean of loss_k / length_k ("mean").
  auto [g_none] = gradient([&](const Tensor& z) {
    Tensor s = zeros(Float64, Shape{});
    for (int64_t k = 0; k < n; ++k) s = s + loss_of(z, k) * selectdim(c, 0, k);
    return s;
  }, logits);
  expect_close(g_none, fx("ctc.dlogits"), kTol, "ctc d/dlogits (none)");
  auto [l_mean, g_mean] = withgradient([&](const Tensor& z) {
    Tensor s = zeros(Float64, Shape{});
    for (int64_t k = 0; k < n; ++k) s = s + loss_of(z, k) / double(llen[size_t(k)]);
    return s / double(n);
  }, logits);
  expect_close(l_mean, fx("ctc_mean.loss"), kTol, "ctc loss (mean)");
  expect_close(std::get<0>(g_mean), fx("ctc_mean.dlogits"), kTol, "ctc d/dlogits (mean)");
}

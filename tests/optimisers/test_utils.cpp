// Optimisers.jl's utilities and Flux's train! (include/flx/optimiser_utils.hpp):
// trainables, destructure and its re, adjust of any field of a rule (typed),
// and train(loss, model, data, state).
#include <cmath>
#include <tuple>
#include <vector>

#include "flx/optimiser_utils.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {
using MLP = decltype(Chain(Dense(3, 4, relu), Dense(4, 2)));
MLP mlp() {
  set_seed(11);
  return Chain(Dense(3, 4, relu), Dense(4, 2));
}
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST(OptimiserUtils, TrainablesAreTheTrainableTensorsOnceInWalkOrder) {
  MLP m = mlp();
  const auto ps = trainables(m);
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].id(), std::get<0>(m.layers).weight.id());
  EXPECT_EQ(ps[3].id(), std::get<1>(m.layers).bias.id());
  // BatchNorm's running statistics are not trainable.
  auto bn = Chain(Dense(3, 4), BatchNorm(4));
  EXPECT_EQ(trainables(bn).size(), 4u);  // weight, bias, β, γ
  EXPECT_GT(leaves(bn).size(), 4u);
  // A tied tensor counts once.
  Tensor w = ones(2, 2);
  std::vector<Tensor> tied = {w, w, zeros(3)};
  EXPECT_EQ(trainables(tied).size(), 2u);
}

TEST(OptimiserUtils, DestructureFlattensColumnMajorAndRebuilds) {
  MLP m = mlp();
  auto [flat, re] = destructure(m);
  EXPECT_EQ(flat.ndims(), 1);
  EXPECT_EQ(flat.numel(), 3 * 4 + 4 + 4 * 2 + 2);
  EXPECT_EQ(re.length(), flat.numel());
  // The leaves one after another, each in its storage (column-major) order.
  std::vector<double> expected;
  for (const Tensor& p : trainables(m))
    for (double v : values(p)) expected.push_back(v);
  EXPECT_EQ(values(flat), expected);
  const Tensor& w = std::get<0>(m.layers).weight;
  EXPECT_EQ(values(flat)[1], values(w)[1]);  // w[1, 0] (column-major: second row, first column)
  // re(flat) is the model again, of its own type; re(flat * 2) doubles it.
  MLP same = re(flat);
  EXPECT_EQ(values(std::get<1>(same.layers).weight), values(std::get<1>(m.layers).weight));
  MLP twice = re(flat * 2.0);
  for (size_t i = 0; i < 4; ++i) {
    auto a = values(trainables(twice)[i]), b = values(trainables(m)[i]);
    for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k], 2 * b[k]);
  }
  // The original is untouched; a flat of another length is refused.
  EXPECT_EQ(values(flat), expected);
  EXPECT_THROW(re(zeros(5)), DimensionMismatch);
}

TEST(OptimiserUtils, DestructureKeepsTiesAndOtherLeavesAndIsDifferentiable) {
  Tensor w = tensor({1.0, 2.0, 3.0, 4.0}, {2, 2});
  auto bn = Chain(Dense(2, 2), BatchNorm(2));
  auto [flat_bn, re_bn] = destructure(bn);
  auto bn2 = re_bn(flat_bn);
  // The running mean (not trainable) is shared with the original.
  const auto all = leaves(bn), all2 = leaves(bn2);
  ASSERT_EQ(all.size(), all2.size());
  size_t shared = 0;
  for (size_t i = 0; i < all.size(); ++i) shared += all[i].id() == all2[i].id();
  EXPECT_EQ(shared, all.size() - trainables(bn).size());

  std::vector<Tensor> tied = {w, w};
  auto [flat, re] = destructure(tied);
  EXPECT_EQ(flat.numel(), 4);
  auto back = re(flat);
  EXPECT_EQ(back[0].id(), back[1].id());
  // d/dflat of sum(re(flat)[0] .* c): c, for each entry, through re.
  const Tensor c = tensor({0.5, -1.0, 2.0, 3.0}, {2, 2});
  auto [g] = gradient([&](const Tensor& f) { return sum(re(f)[0] * c); }, flat);
  EXPECT_EQ(values(g), values(c));
}

TEST(OptimiserUtils, AdjustAnyFieldOfARuleKeepsTheState) {
  // Momentum(η, ρ) for two steps, then ρ' for the third: v keeps its value.
  const double eta = 0.1, rho = 0.9, rho2 = 0.5;
  const std::vector<double> gs = {1.0, -0.5, 2.0};
  Tensor x = tensor({1.0});
  auto st = setup(OptimiserChain(WeightDecay(0.0), Momentum(eta, rho)), x);
  double v = 0, xe = 1.0;
  for (int t = 0; t < 3; ++t) {
    if (t == 2) {
      adjust<Momentum>(st, [&](Momentum& r) { r.rho = rho2; });
      adjust<WeightDecay>(st, [](WeightDecay& r) { r.lambda = 0.25; });
    }
    const double r = t == 2 ? rho2 : rho, g = gs[size_t(t)] + (t == 2 ? 0.25 * xe : 0.0);
    v = r * v + eta * g;
    xe -= v;
    update(st, x, tensor({gs[size_t(t)]}));
    EXPECT_NEAR(x.item<double>(), xe, 1e-15) << "step " << t;
  }
  std::ostringstream shown;
  shown << st.rule();
  EXPECT_EQ(shown.str(), "OptimiserChain(WeightDecay(0.25), Momentum(0.1, 0.5))");
  // Inside MixedPrecision too; a rule the state lacks, or a change that
  // needs another state, is refused and changes nothing.
  Tensor y = tensor({1.0f});
  auto mp = setup(MixedPrecision(Float64, Adam()), y);
  adjust<Adam>(mp, [](Adam& r) { r.beta = {0.8, 0.9}; });
  std::ostringstream mp_shown;
  mp_shown << mp.rule();
  EXPECT_NE(mp_shown.str().find("(0.8, 0.9)"), std::string::npos) << mp_shown.str();
  EXPECT_THROW(adjust<Adam>(st, [](Adam& r) { r.eta = 1; }), ArgumentError);
  auto rms = setup(RMSProp(), x);
  EXPECT_THROW(adjust<RMSProp>(rms, [](RMSProp& r) { r.centred = true; }), ArgumentError);
  std::ostringstream rms_shown;
  rms_shown << rms.rule();
  EXPECT_EQ(rms_shown.str().find("centred"), std::string::npos);
  // AccumGrad's n keeps its state's shape: allowed.
  auto acc = setup(OptimiserChain(AccumGrad(2), Descent()), x);
  adjust<AccumGrad>(acc, [](AccumGrad& r) { r.n = 3; });
}

TEST(OptimiserUtils, TrainStepsOncePerBatchAsGradientAndUpdate) {
  set_seed(2);
  std::vector<std::tuple<Tensor, Tensor>> data;
  for (int i = 0; i < 4; ++i) data.emplace_back(randn(3, 8), randn(2, 8));
  auto loss = [](const MLP& m, const Tensor& x, const Tensor& y) { return mse(m(x), y); };
  MLP a = mlp(), b = mlp();
  auto sa = setup(Adam(0.01), a), sb = setup(Adam(0.01), b);
  const auto losses = train(loss, a, data, sa);
  ASSERT_EQ(losses.size(), data.size());
  for (const auto& [x, y] : data) {
    auto [l, grads] = withgradient([&](const MLP& m) { return loss(m, x, y); }, b);
    update(sb, b, std::get<0>(grads));
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(values(trainables(a)[i]), values(trainables(b)[i])) << "leaf " << i;
  // Data that is not a tuple is passed whole.
  std::vector<Tensor> xs = {randn(3, 8), randn(3, 8)};
  train([](const MLP& m, const Tensor& x) { return sum(square(m(x))); }, a, xs, sa);
  // A loss that is not finite stops before its update.
  const auto before = values(trainables(a)[0]);
  std::vector<Tensor> bad = {randn(3, 8) * NAN};
  EXPECT_THROW(train([](const MLP& m, const Tensor& x) { return sum(m(x)); }, a, bad, sa), Error);
  EXPECT_EQ(values(trainables(a)[0]), before);
}

TEST(OptimiserUtils, FreezeAndThawByDottedPath) {
  MLP m = mlp();
  auto st = setup(Momentum(0.1), m);
  const auto before = trainables(m);
  std::vector<std::vector<double>> start;
  for (const Tensor& p : before) start.push_back(values(p));
  set_seed(3);
  const Tensor x = randn(3, 5), y = randn(2, 5);
  auto step = [&] { update(st, m, std::get<0>(gradient([&](const MLP& mm) { return mse(mm(x), y); }, m))); };
  // Leaf paths as the state names them: "layers.0.weight", ...
  EXPECT_EQ(st.entries()[0].path, "layers.0.weight");
  EXPECT_EQ(freeze(st, "layers.0"), 2u);  // its weight and bias
  step();
  EXPECT_EQ(values(before[0]), start[0]);
  EXPECT_EQ(values(before[1]), start[1]);
  EXPECT_NE(values(before[2]), start[2]);
  // A frozen leaf's state (Momentum's velocity) stays as it was too.
  EXPECT_EQ(values(st.entries()[0].state.tensors[0]), std::vector<double>(12, 0.0));
  EXPECT_EQ(thaw(st, "layers.0.weight"), 1u);
  step();
  EXPECT_NE(values(before[0]), start[0]);
  EXPECT_EQ(values(before[1]), start[1]);
  EXPECT_EQ(thaw(st), 1u);  // "" : everything (the bias was still frozen)
  EXPECT_EQ(freeze(st), 4u);
  const auto frozen_at = values(before[3]);
  step();
  EXPECT_EQ(values(before[3]), frozen_at);
  // "layers.1" is not "layers.10"; a path that names nothing is refused.
  EXPECT_THROW(freeze(st, "layers.2"), ArgumentError);
  EXPECT_THROW(freeze(st, "layers.0.wei"), ArgumentError);
  // adjust keeps the flags.
  adjust<Momentum>(st, [](Momentum& r) { r.rho = 0.5; });
  EXPECT_TRUE(st.entries()[2].frozen);
}

// MixedPrecision (Optimisers.jl's) and LossScaler (PyTorch's GradScaler):
// their steps against closed forms, what a plain rule does in the same
// place, printing, checkpoints that resume to the same bits, and a Float32
// model loading a BFloat16 checkpoint.
#include <gtest/gtest.h>

#include <cmath>

#include "flx/flx.hpp"
#include "test_util.hpp"
#include "ulps.hpp"

using namespace flx;
using flx::testing::TempDir;
using flx::testing::error_message;
using flx::testing::has;
using flx::testing::shown;
using flx::testing::ulp_of;

namespace {

// The bytes of every tensor, to compare states bit for bit.
std::vector<std::vector<double>> values_of(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(t.to(Device::cpu()).to_vector<double>());
  return out;
}
std::vector<Tensor> state_tensors(const OptState& s) {
  std::vector<Tensor> out;
  for (const auto& [name, t] : state(s)) out.push_back(t);
  return out;
}

}  // namespace

// ---- MixedPrecision --------------------------------------------------------------

// Adam(1e-3) with a constant gradient steps by η (its unit step mhat /
// sqrt(vhat) is 1): 100 steps take 1.0 to 0.9. In BFloat16 each step is
// below half an ulp (2^-9 just under 1), so plain Adam rounds every one
// away; MixedPrecision steps the Float32 copy and rounds that.
TEST(MixedPrecision, MovesABFloat16WeightWherePlainAdamCannot) {
  Tensor plain = ones(BFloat16, 1), mixed = ones(BFloat16, 1);
  OptState p = setup(Adam(1e-3), plain), m = setup(MixedPrecision(Float32, Adam(1e-3)), mixed);
  const Tensor g = full(BFloat16, 0.5, Shape{1});
  for (int i = 0; i < 100; ++i) {
    update(p, plain, g);
    update(m, mixed, g);
  }
  EXPECT_EQ(plain.item<double>(), 1.0) << "each step below half an ulp is lost";
  const Tensor copy = m.entries()[0].state.tensors[0];
  EXPECT_EQ(copy.dtype(), Float32);
  // Closed form: 1 - 100 η / (1 + ε / |g|), within Float32's rounding of 100 steps.
  EXPECT_NEAR(copy.item<double>(), 1 - 100 * 1e-3 / (1 + 1e-8 / 0.5), 100 * 0x1p-24);
  // The parameter is the copy rounded once to BFloat16: 0.8984375 (0.9's neighbours are 0.8984375 and 0.90234375).
  EXPECT_EQ(mixed.dtype(), BFloat16);
  EXPECT_EQ(mixed.item<double>(), copy.to(BFloat16).item<double>());
  EXPECT_EQ(mixed.item<double>(), 0.8984375);
}

// Optimisers.jl's own test: the state holds Float32 copies of x and of
// Adam's moments; the new x is the copy rounded; one step moves x by about
// η against the gradient's sign. On a model as on a bare tensor.
TEST(MixedPrecision, KeepsFloat32CopiesOfTheParametersAndTheInnerState) {
  set_seed(2);
  Tensor x = rand(Float16, {2});
  OptState s = setup(MixedPrecision(Adam(1e-3)), x);  // Float32 by default, as Optimisers.jl's
  const RuleState& st = s.entries()[0].state;
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].dtype(), Float32);
  EXPECT_NE(st.tensors[0].id(), x.id());
  ASSERT_EQ(st.children.size(), 1u);
  EXPECT_EQ(st.children[0].tensors[0].dtype(), Float32);  // Adam's m and v
  const auto x0 = x.to_vector<double>();
  const Tensor g = tensor(std::vector<float>{0.25f, -0.5f}).to(Float16);
  update(s, x, g);
  EXPECT_EQ(x.to_vector<double>(), s.entries()[0].state.tensors[0].to(Float16).to_vector<double>());
  const auto x1 = x.to_vector<double>();
  EXPECT_NEAR(x1[0], x0[0] - 1e-3, ulp_of(x0[0], Float16));
  EXPECT_NEAR(x1[1], x0[1] + 1e-3, ulp_of(x0[1], Float16));

  // A model: every trainable leaf gets a copy; BatchNorm's running
  // statistics (not trainable) none.
  auto model = bf16(Chain(Dense(3, 2), BatchNorm(2)));
  OptState ms = setup(MixedPrecision(Float32, Adam(0.1)), model);
  EXPECT_EQ(ms.entries().size(), 4u);
  for (const auto& leaf : ms.entries()) EXPECT_EQ(leaf.state.tensors[0].dtype(), Float32) << leaf.path;
  const Tensor in = randn(3, 4).to(BFloat16), c = randn(2, 4);  // a loss whose gradient reaches the Dense
  auto [l, grads] = withgradient([&](const auto& m) { return sum(trainmode(m)(in).to(Float32) * c); }, model);
  const Tensor w0 = std::get<0>(model.layers).weight.to(Float32);
  update(ms, model, std::get<0>(grads));
  EXPECT_EQ(std::get<0>(model.layers).weight.dtype(), BFloat16);
  EXPECT_NE(std::get<0>(model.layers).weight.to(Float32).to_vector<double>(), w0.to_vector<double>());
  (void)l;
}

// The wider copy of a Float64 parameter is no more precise than it: the
// rule as Optimisers.jl defines it (T.(x)), so MixedPrecision(Float64, ...)
// is the one for Float32 models.
TEST(MixedPrecision, Float64CopiesOfFloat32Parameters) {
  Tensor x = full(Float32, 1.0, Shape{3});
  OptState s = setup(MixedPrecision(Float64, Descent(1e-9)), x);
  for (int i = 0; i < 1000; ++i) update(s, x, ones(3));
  EXPECT_EQ(s.entries()[0].state.tensors[0].dtype(), Float64);
  EXPECT_NEAR(s.entries()[0].state.tensors[0].to_vector<double>()[0], 1 - 1e-6, 1e-12);
  EXPECT_EQ(x.to_vector<double>()[0], double(float(1 - 1e-6)));  // Float32's 1 - 1e-6, where plain Descent stays 1
}

TEST(MixedPrecision, PrintsAsOptimisersJl) {
  EXPECT_EQ(shown(MixedPrecision(Float32, Adam(1e-3))), "MixedPrecision{Float32, Adam}(Adam(0.001, (0.9, 0.999), 1e-08))");
  EXPECT_EQ(shown(MixedPrecision(Float64, OptimiserChain(ClipGrad(1), Descent(0.1)))),
            "MixedPrecision{Float64, OptimiserChain}(OptimiserChain(ClipGrad(1), Descent(0.1)))");
  // Optimisers.jl refuses a MixedPrecision inside a chain; so does flx.
  const std::string m = error_message<ArgumentError>([] { (void)OptimiserChain(ClipGrad(1), MixedPrecision(Adam())); });
  EXPECT_TRUE(has(m, "MixedPrecision must wrap the whole chain")) << m;
  EXPECT_THROW(MixedPrecision(Int32, Adam()), ArgumentError);
}

TEST(MixedPrecision, AdjustChangesTheInnerRuleKeepingTheCopies) {
  Tensor x = ones(BFloat16, 1);
  OptState s = setup(MixedPrecision(Float32, Descent(0.1)), x);
  update(s, x, ones(BFloat16, 1));
  adjust(s, 0.25);
  EXPECT_EQ(shown(s.rule()), "MixedPrecision{Float32, Descent}(Descent(0.25))");
  update(s, x, ones(BFloat16, 1));
  EXPECT_NEAR(s.entries()[0].state.tensors[0].item<double>(), 1 - 0.1 - 0.25, 1e-7);
}

// An inner rule that may refuse a gradient (ClipNorm) runs update()'s staged
// path: every step on copies, then all written; the same bits as the
// direct path, and a refused step changes nothing.
TEST(MixedPrecision, TheStagedPathGivesTheSameBits) {
  set_seed(6);
  const Tensor w0 = randn(5, 4).to(BFloat16);
  Tensor a = w0.to(Float32).to(BFloat16), b = w0.to(Float32).to(BFloat16);
  OptState sa = setup(MixedPrecision(Float32, OptimiserChain(ClipNorm(1.0, 2, false), Adam(1e-2))), a);
  OptState sb = setup(MixedPrecision(Float32, OptimiserChain(ClipNorm(1.0), Adam(1e-2))), b);
  ASSERT_FALSE(sa.rule().may_refuse());
  ASSERT_TRUE(sb.rule().may_refuse());
  for (int i = 0; i < 20; ++i) {
    const Tensor g = randn(5, 4).to(BFloat16);
    update(sa, a, g);
    update(sb, b, g);
  }
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_EQ(values_of(state_tensors(sa)), values_of(state_tensors(sb)));
  const auto before = values_of(state_tensors(sb));
  const auto b0 = b.to_vector<double>();
  EXPECT_THROW(update(sb, b, full(BFloat16, INFINITY, Shape{5, 4})), ArgumentError);
  EXPECT_EQ(values_of(state_tensors(sb)), before);
  EXPECT_EQ(b.to_vector<double>(), b0);
}

// (d): save -> load -> continue gives the bits of the run that never stopped.
TEST(MixedPrecision, StateSavedAndLoadedContinuesToTheSameBits) {
  TempDir tmp;
  set_seed(8);
  const auto model0 = bf16(Chain(Dense(4, 6, relu), Dense(6, 2)));
  const Tensor x = randn(4, 16).to(BFloat16), y = randn(2, 16);
  auto step = [&](auto& model, OptState& opt) {
    auto [l, g] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
    update(opt, model, std::get<0>(g));
  };
  const auto rule = MixedPrecision(Float32, Adam(1e-2));
  auto straight = fmap([](const Tensor& t) { return t.to(Float32).to(t.dtype()); }, model0);  // a copy
  OptState s1 = setup(rule, straight);
  for (int i = 0; i < 10; ++i) step(straight, s1);

  auto cut = fmap([](const Tensor& t) { return t.to(Float32).to(t.dtype()); }, model0);
  OptState s2 = setup(rule, cut);
  for (int i = 0; i < 4; ++i) step(cut, s2);
  save(tmp / "model.safetensors", cut);
  save(tmp / "opt.safetensors", s2);
  auto resumed = bf16(Chain(Dense(4, 6, relu), Dense(6, 2)));  // other values, to be overwritten
  OptState s3 = setup(rule, resumed);
  loadmodel(resumed, load(tmp / "model.safetensors"));
  loadmodel(s3, load(tmp / "opt.safetensors"));
  EXPECT_EQ(load(tmp / "opt.safetensors").metadata().at("flx.rule"), shown(rule));
  for (int i = 4; i < 10; ++i) step(resumed, s3);
  EXPECT_EQ(values_of(leaves(resumed)), values_of(leaves(straight)));
  EXPECT_EQ(values_of(state_tensors(s3)), values_of(state_tensors(s1)));
  // The Adam step counts (β powers) too.
  EXPECT_EQ(s3.entries()[0].state.children[0].scalars, s1.entries()[0].state.children[0].scalars);
  // Another inner rule is refused, naming both.
  OptState other = setup(MixedPrecision(Float32, Descent()), resumed);
  const std::string m = error_message<CheckpointError>([&] { loadmodel(other, load(tmp / "opt.safetensors")); });
  EXPECT_TRUE(has(m, "MixedPrecision{Float32, Adam}")) << m;
}

// A BFloat16 checkpoint loads into the Float32 model (each value widened,
// exactly), and a Float32 one into a BFloat16 model (each rounded).
TEST(MixedPrecision, CheckpointsLoadAcrossPrecisions) {
  TempDir tmp;
  set_seed(9);
  const auto model = Chain(Dense(3, 4), BatchNorm(4));
  const auto low = bf16(model);
  save(tmp / "bf16.safetensors", low);
  EXPECT_EQ(load(tmp / "bf16.safetensors").at("layers.0.weight").dtype(), BFloat16);
  auto wide = Chain(Dense(3, 4), BatchNorm(4));
  loadmodel(wide, load(tmp / "bf16.safetensors"));
  EXPECT_EQ(std::get<0>(wide.layers).weight.dtype(), Float32);
  EXPECT_EQ(std::get<0>(wide.layers).weight.to_vector<double>(), std::get<0>(low.layers).weight.to_vector<double>());
  save(tmp / "f32.safetensors", model);
  auto narrow = bf16(Chain(Dense(3, 4), BatchNorm(4)));
  loadmodel(narrow, load(tmp / "f32.safetensors"));
  EXPECT_EQ(std::get<0>(narrow.layers).weight.to_vector<double>(), std::get<0>(low.layers).weight.to_vector<double>());
}

// ---- LossScaler ----------------------------------------------------------------

TEST(LossScaler, DefaultsArePyTorchGradScalers) {
  const LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.options().growth_factor, 2.0);
  EXPECT_EQ(s.options().backoff_factor, 0.5);
  EXPECT_EQ(s.options().growth_interval, 2000);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_THROW(LossScaler({.init_scale = 0}), ArgumentError);
  EXPECT_THROW(LossScaler({.growth_factor = 1}), ArgumentError);
  EXPECT_THROW(LossScaler({.backoff_factor = 1}), ArgumentError);
  EXPECT_THROW(LossScaler({.growth_interval = 0}), ArgumentError);
  LossScaler r;
  EXPECT_THROW(r.restore(INFINITY, 0), ArgumentError);
  EXPECT_THROW(r.restore(2, -1), ArgumentError);
}

// (b): a step with an infinite gradient changes nothing (parameters, the
// optimiser's copies and moments, Adam's step count) and halves the scale.
TEST(LossScaler, SkipsAStepWhoseGradientsAreNotFiniteAndChangesNothing) {
  set_seed(10);
  auto model = f16(Chain(Dense(3, 2)));
  OptState opt = setup(MixedPrecision(Float32, Adam(1e-3)), model);
  LossScaler scaler({.init_scale = 1024, .growth_interval = 3});
  const Tensor x = randn(3, 5).to(Float16);
  auto grads_of = [&] {
    return std::get<0>(withgradient([&](const auto& m) { return scaler.scale(mse(m(x), zeros(2, 5))); }, model).grad);
  };
  EXPECT_TRUE(scaler.update(opt, model, grads_of()));
  EXPECT_EQ(scaler.good_steps(), 1);
  const auto params = values_of(leaves(model));
  const auto st = values_of(state_tensors(opt));
  const auto powers = opt.entries()[0].state.children[0].scalars;
  for (double bad : {double(INFINITY), double(NAN)}) {
    auto g = grads_of();
    std::get<0>(g.layers).bias = tensor(std::vector<double>{1.0, bad}).to(Float16);
    const double before = scaler.scale();
    EXPECT_FALSE(scaler.update(opt, model, g));
    EXPECT_EQ(scaler.scale(), before * 0.5);
    EXPECT_EQ(scaler.good_steps(), 0);
    EXPECT_EQ(values_of(leaves(model)), params);
    EXPECT_EQ(values_of(state_tensors(opt)), st);
    EXPECT_EQ(opt.entries()[0].state.children[0].scalars, powers);
  }
  EXPECT_EQ(scaler.scale(), 256.0);
}

TEST(LossScaler, GrowsAfterItsIntervalOfGoodStepsAndBacksOffOnAnOverflow) {
  Tensor w = ones(Float16, 2);
  OptState opt = setup(MixedPrecision(Float32, Descent(0.0)), w);
  LossScaler s({.init_scale = 1024, .growth_interval = 3});
  auto step = [&](double g) { return s.update(opt, w, full(Float32, g, Shape{2}).to(Float16)); };
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) {
    EXPECT_TRUE(step(1.0));
    scales.push_back(s.scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 2048, 2048, 2048, 4096, 4096}));
  EXPECT_EQ(s.good_steps(), 1);
  EXPECT_FALSE(step(INFINITY));
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(step(1.0));
  EXPECT_TRUE(step(1.0));
  EXPECT_EQ(s.scale(), 2048);  // the count started again after the overflow
  EXPECT_TRUE(step(1.0));
  EXPECT_EQ(s.scale(), 4096);
  s.restore(0.5, 2);
  EXPECT_TRUE(step(1.0));
  EXPECT_EQ(s.scale(), 1.0);
}

// The gradients are divided by the scale in Float32 before the rule sees
// them: the step equals the plain step on the unscaled gradient, bit for
// bit (the scale is a power of 2).
TEST(LossScaler, TheRuleSeesTheUnscaledGradient) {
  set_seed(11);
  auto m1 = f16(Chain(Dense(4, 3, relu), Dense(3, 2)));
  auto m2 = fmap([](const Tensor& t) { return t.to(Float32).to(Float16); }, m1);
  const auto rule = MixedPrecision(Float32, Adam(1e-2));
  OptState o1 = setup(rule, m1), o2 = setup(rule, m2);
  LossScaler scaler({.init_scale = 1024});
  const Tensor x = randn(4, 8).to(Float16), y = randn(2, 8);
  for (int i = 0; i < 5; ++i) {
    auto [l1, g1] = withgradient([&](const auto& m) { return scaler.scale(mse(m(x), y)); }, m1);
    EXPECT_TRUE(scaler.update(o1, m1, std::get<0>(g1)));
    auto [l2, g2] = withgradient([&](const auto& m) { return mse(m(x), y); }, m2);
    EXPECT_EQ(l1.item<double>(), l2.item<double>() * 1024);
    update(o2, m2, std::get<0>(g2));
  }
  // The Float16 gradients differ (one was 1024 times larger when rounded),
  // so the steps agree to Float16's rounding of the gradient, not its bits.
  const auto a = values_of(leaves(m1)), b = values_of(leaves(m2));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) EXPECT_NEAR(a[i][j], b[i][j], 2 * ulp_of(b[i][j], Float16));
  // A disabled scaler is the plain loop.
  LossScaler off({.enabled = false});
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_EQ(off.scale(ones(Float16, 1)).dtype(), Float32);
}

// Why Float16 needs it: a gradient of 1e-9 flushes to zero in Float16
// (below 2^-25), so without scaling the weight never moves; scaled by 2^16
// it is 6.6e-5, a Float16 normal number, and the Float32 copy moves by
// 1e3 × 1e-9 per step.
TEST(LossScaler, KeepsGradientsThatWouldFlushToZeroInFloat16) {
  for (bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "scaled" : "not scaled");
    Tensor w = ones(Float16, 4);
    OptState opt = setup(MixedPrecision(Float32, Descent(1e3)), w);
    LossScaler scaler({.enabled = scaled});
    auto [l, g] = withgradient([&](const Tensor& p) { return scaler.scale(sum(p.to(Float32) * 1e-9)); }, w);
    (void)l;
    EXPECT_EQ(std::get<0>(g).dtype(), Float16);
    EXPECT_TRUE(scaler.update(opt, w, std::get<0>(g)));
    const double moved = 1 - opt.entries()[0].state.tensors[0].to_vector<double>()[0];
    // 1e-6 within the copy's Float32 rounding (2^-24 just under 1) and the
    // scaled gradient's Float16 rounding (2^-11 of it).
    if (scaled) EXPECT_NEAR(moved, 1e-6, 0x1p-24 + 1e-9);
    else EXPECT_EQ(moved, 0);
  }
}

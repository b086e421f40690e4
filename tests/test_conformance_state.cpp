// The device conformance suite, part two (test_conformance.cpp has the ops,
// layers and losses): each stateful optimiser rule's steps and Adam's
// closed form, random numbers, integer saturation, printing and memory
// accounting on each device besides the CPU, models moving between two
// devices of one backend, and mixed devices rejected.
#include <sstream>

#include "adam_reference.hpp"
#include "conformance_fixture.hpp"
#include "flx/optimiser_rules.hpp"
#include "test_util.hpp"
#include "ulps.hpp"

using namespace flx;
using flx::testing::Conformance;
using flx::testing::is_half;
using flx::testing::skip_without_accelerator;
using flx::testing::tolerance;
using flx::testing::UlpTolerance;

namespace {
// Gradients of shape s in dtype t on device d, one per step, that change from
// step to step (tests/adam_reference.hpp says why), and their values in t.
std::vector<Tensor> gradient_tensors(const std::vector<std::vector<double>>& gs, const Shape& s, DType t, Device d) {
  std::vector<Tensor> out;
  for (const auto& g : gs) out.push_back(tensor(g, s).to(t).to(d));
  return out;
}
std::vector<std::vector<double>> values_in(const std::vector<std::vector<double>>& gs, DType t) {
  std::vector<std::vector<double>> out;
  for (const auto& g : gs) out.push_back(tensor(g).to(t).to_vector<double>());
  return out;
}
}  // namespace

TEST_P(Conformance, OptimiserStepsMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  // Float16/BFloat16 in ulps (see half_ulps): the rules of products and sums
  // round alike everywhere, 0 ulps; those with a float division or square root
  // may differ by 1 ulp a step on OpenCL devices without correctly rounded
  // divide/sqrt, so 1 ulp of the largest parameter per step.
  const std::vector<Tensor> gradients =
      gradient_tensors(flx::testing::changing_gradients(12), {4, 3}, t, Device::cpu());
  const UlpTolerance exact{0}, per_step{double(gradients.size()), true};
  struct Rule {
    std::string name;
    std::shared_ptr<OptRule> rule;
    UlpTolerance half;
  };
  const std::vector<Rule> rules = {
      {"Descent", std::make_shared<Descent>(0.1), exact},
      {"Momentum", std::make_shared<Momentum>(), exact},
      {"Nesterov", std::make_shared<Nesterov>(), exact},
      {"RMSProp", std::make_shared<RMSProp>(), per_step},
      {"Adam (in place)", std::make_shared<Adam>(0.1, std::pair{0.8, 0.95}), per_step},
      {"Adam (defaults)", std::make_shared<Adam>(), per_step},
      {"AdamW", std::make_shared<AdamW>(0.001, std::pair{0.9, 0.999}, 0.1), per_step},
      {"Chain", std::make_shared<OptimiserChain>(ClipNorm(0.5), WeightDecay(0.01), ClipGrad(0.1), Adam()), per_step},
      // Float32 copies stepped by Adam, each rounded to t: the copies may
      // differ by Adam's float rounding, so the parameters by 1 ulp a step.
      {"MixedPrecision", std::make_shared<MixedPrecision>(Float32, Adam(0.01)), per_step},
      // The rules composed of tensor ops (src/optimisers/rules_adaptive.cpp).
      {"NAdam", std::make_shared<NAdam>(0.01), per_step},
      {"RAdam", std::make_shared<RAdam>(0.01, Beta{0.8, 0.9}), per_step},
      {"AdaMax", std::make_shared<AdaMax>(0.01), per_step},
      {"OAdam", std::make_shared<OAdam>(0.01), per_step},
      {"AdaGrad", std::make_shared<AdaGrad>(), per_step},
      {"AdaDelta", std::make_shared<AdaDelta>(), per_step},
      {"AMSGrad", std::make_shared<AMSGrad>(0.01), per_step},
      {"AdaBelief", std::make_shared<AdaBelief>(0.01, Beta{0.9, 0.999}, 1e-8), per_step},
      {"Lion", std::make_shared<Lion>(0.01), exact},
      {"Rprop", std::make_shared<Rprop>(0.01), exact},
      {"SignDecay", std::make_shared<SignDecay>(0.01), exact},
      // A step every 2 gradients, none between.
      {"AccumGrad", std::make_shared<OptimiserChain>(AccumGrad(2), Momentum()), exact}};
  // A plugin older than ABI 2.12 has no rule_step: it runs the rules that
  // predate it as the ops they were composed of then, which round a half
  // between ops (1 ulp a step), and cannot run the later ones (skipped,
  // saying why).
  const std::string abi = backend_status(std::string(dev.backend())).abi;
  const bool before_rule_step = abi != backend_status("CPU").abi;
  for (const auto& [name, rule, half] : rules) {
    SCOPED_TRACE(name);
    set_seed(5);
    Tensor x = rand(t, {4, 3});
    Tensor xd = x.to(dev);
    OptState s_cpu(rule->clone(), {{"x", x}}), s_dev(rule->clone(), {{"x", xd}});
    try {
      for (const Tensor& g : gradients) {
        s_cpu.step({{x, g}});
        s_dev.step({{xd, g.to(dev)}});
      }
    } catch (const NotImplemented& e) {
      if (!before_rule_step || std::string(e.what()).find("came with ABI") == std::string::npos) throw;
      std::printf("  skipped rule %s on %s: the plugin implements ABI %s: %s\n", name.c_str(), dev.str().c_str(),
                  abi.c_str(), e.what());
      continue;
    }
    if (is_half(t)) flx::testing::expect_ulps(xd, x, before_rule_step ? per_step : half, name);
    else flx::testing::expect_close(xd, x, tolerance(t) * 10, name);
  }
}

// Adam's steps on each device against the closed form computed in Float64
// (tests/adam_reference.hpp), so that a bug the device shares with the CPU (in
// the frontend, which fills the kernels' descriptor) shows too. Float16 and
// BFloat16 round m, v and x at each of the 8 steps: x by half an ulp, and the
// step by about 0.15 ulp of x (the moments' rounding, 2^-11 or 2^-8 of them,
// in a step of η|unit| <= 0.1 ~ 0.3 of the largest x), so about 5 ulps at
// worst (1 to 2 measured on PoCL): 8 ulps normwise. Swapped β, or β₁ for both
// moments, move x by 200 to 400 Float16 ulps here (27 to 50 BFloat16 ulps).
TEST_P(Conformance, AdamStepsFollowTheClosedForm) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  using flx::testing::AdamSettings;
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  const Shape shape{4, 3};
  const auto grads = flx::testing::changing_gradients(shape.numel());
  set_seed(5);
  const std::vector<double> x0 = (rand(Float64, shape) * 2.0 - 1.0).to(t).to_vector<double>();
  const AdamSettings adam{.eta = 0.1, .beta1 = 0.8, .beta2 = 0.95, .epsilon = 1e-8};
  AdamSettings adamw = adam;
  adamw.lambda = 0.3;
  const std::vector<std::tuple<std::string, std::shared_ptr<OptRule>, AdamSettings>> runs = {
      {"Adam (in place)", std::make_shared<Adam>(0.1, std::pair{0.8, 0.95}, 1e-8), adam},
      {"OptimiserChain(Adam) (a step tensor)", std::make_shared<OptimiserChain>(Adam(0.1, {0.8, 0.95}, 1e-8)), adam},
      {"AdamW", std::make_shared<AdamW>(0.1, std::pair{0.8, 0.95}, 0.3, 1e-8), adamw}};
  for (const auto& [name, rule, settings] : runs) {
    SCOPED_TRACE(name);
    Tensor x = tensor(x0, shape).to(t).to(dev);
    OptState st(rule->clone(), {{"x", x}});
    for (const Tensor& g : gradient_tensors(grads, shape, t, dev)) st.step({{x, g}});
    EXPECT_EQ(x.device(), dev);
    Tensor expected = tensor(flx::testing::adam_closed_form(x0, values_in(grads, t), settings), shape);
    if (is_half(t)) flx::testing::expect_ulps(x, expected.to(t), {8, true}, name);
    else flx::testing::expect_close(x, expected, t == Float64 ? 1e-12 : 2e-6, name);
  }
}

TEST_P(Conformance, RandomNumbersMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  // Factories fill on the CPU; the device's own generator is checked by the
  // backend ABI suite. Here: moves keep every element type intact.
  const Device dev = GetParam().device;
  for (DType t : {Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8, Bool}) {
    Tensor x = (rand(Float64, {37}) * 100).to(t);
    Tensor back = x.to(dev).to(Device::cpu());
    EXPECT_EQ(back.dtype(), t);
    EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>()) << dtype_name(t);
  }
}

TEST_P(Conformance, IntegerBoundsOutsideTheTypeSaturate) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  // clamp's bounds and a scalar operand outside an integer type's range
  // saturate into it on every device (-1 is UInt8's 0, not 255 as x86's
  // undefined conversion gave, while a GPU gave 0: found on an H100).
  const Device dev = GetParam().device;
  const std::string abi = backend_status(dev.backend()).abi;
  if (abi != backend_status("CPU").abi && std::stoi(abi.substr(abi.find('.') + 1)) < 5)
    GTEST_SKIP() << "the plugin implements ABI " << abi << "; the saturation rule came with 2.5";
  Tensor u8 = tensor(std::vector<uint8_t>{0, 1, 5, 200});
  for (Device d : {Device::cpu(), dev}) {
    EXPECT_EQ(clamp(u8.to(d), -1, 1.5).to_vector<double>(), (std::vector<double>{0, 1, 1, 1})) << d;
    EXPECT_EQ(clamp(u8.to(d), -300, 300).to_vector<double>(), (std::vector<double>{0, 1, 5, 200})) << d;
    Tensor i32 = tensor(std::vector<int32_t>{-7, 0, 7}).to(d);
    EXPECT_EQ(clamp(i32, -1e12, 3.5).to_vector<double>(), (std::vector<double>{-7, 0, 3})) << d;
  }
}

TEST_P(Conformance, PrintingWorksOnTheDevice) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  Tensor x = tensor(std::vector<float>{1, 2.5f, -3, 0.125f}, {2, 2}).to(GetParam().dtype);
  std::ostringstream on_cpu, on_dev;
  on_cpu << x;
  on_dev << x.to(dev);
  std::string expected = on_cpu.str();
  expected.replace(expected.find("on CPU"), 6, "on " + dev.str());
  EXPECT_EQ(on_dev.str(), expected);
  std::ostringstream model;
  model << (Chain(Dense(3, 2, relu), softmax) | dev);
  EXPECT_EQ(model.str(), "Chain(Dense(3 => 2, relu), softmax)  # 8 parameters");
}

TEST_P(Conformance, DeviceMemoryIsCountedAndFreedDeterministically) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  MemoryStats before = memory_stats(dev);
  {
    Tensor t = zeros(1000).to(dev);
    MemoryStats during = memory_stats(dev);
    EXPECT_EQ(during.in_use - before.in_use, 4000);
    EXPECT_EQ(during.allocations - before.allocations, 1);
    EXPECT_EQ(t.to(dev).id(), t.id());  // already there: the same tensor
    EXPECT_EQ((t | dev).id(), t.id());
  }
  EXPECT_EQ(memory_stats(dev).in_use, before.in_use);
  EXPECT_EQ(memory_stats(dev).allocations, before.allocations);
  // Where the backend reports its allocator (CUDA's pool), it holds at least
  // what flx's tensors use, and keeps it for reuse after they go.
  MemoryStats after = memory_stats(dev);
  if (after.reserved >= 0) {
    EXPECT_GE(after.reserved_peak, before.in_use + 4000);
    EXPECT_GE(after.reserved, after.in_use);
  }
}

namespace {
// Two devices of one GPU backend: a model moves from the first to the
// second (a peer copy, or through the host where there is no direct path),
// prints there, computes what it computed on the CPU, and trains there.
void model_moves_between_devices(const char* backend) {
  if (!functional(backend)) GTEST_SKIP() << backend << " is not functional: " << backend_status(backend).reason;
  const auto devs = devices(backend);
  if (devs.size() < 2)
    GTEST_SKIP() << "needs two " << backend << " devices; this machine has " << devs.size();
  const Device d0 = devs[0].device, d1 = devs[1].device;
  auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
  Tensor x = rand(Float32, {3, 5});
  auto on0 = model | d0;
  auto on1 = on0 | d1;
  EXPECT_EQ(get_device(on1), d1);
  std::ostringstream shown;
  shown << on1;
  EXPECT_EQ(shown.str(), "Chain(\n  Dense(3 => 4, relu),                  # 16 parameters\n"
                         "  Dense(4 => 2),                        # 10 parameters\n"
                         ")                   # Total: 4 arrays, 26 parameters, 104 bytes.");
  flx::testing::expect_close(on1(x | d1), model(x), 1e-5, "the model's output on " + d1.str());
  // One training step on the second device matches the same step on the CPU.
  auto loss = [](const auto& m, const Tensor& in) { return sum(square(m(in))); };
  auto [g_cpu] = gradient([&](const auto& m) { return loss(m, x); }, model);
  auto [g_dev] = gradient([&](const auto& m) { return loss(m, x | d1); }, on1);
  EXPECT_EQ(get_device(g_dev), d1);
  flx::testing::expect_close(std::get<0>(g_dev.layers).weight, std::get<0>(g_cpu.layers).weight, 1e-4, "a gradient on " + d1.str());
  // And back, through the first device, to the CPU.
  auto back = (on1 | d0) | cpu;
  flx::testing::expect_close(std::get<1>(back.layers).bias, std::get<1>(model.layers).bias, 0, "parameters after two moves");
}
}  // namespace

TEST(MultiDevice, ModelMovesBetweenTwoCudaGpus) { model_moves_between_devices("CUDA"); }
TEST(MultiDevice, ModelMovesBetweenTwoOpenClDevices) { model_moves_between_devices("OpenCL"); }

TEST_P(Conformance, MixedDevicesAreRejected) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  Tensor a = ones(3), b = ones(3).to(dev);
  EXPECT_THROW((void)(a + b), DeviceMismatch);
  auto m = Chain(Dense(2, 2), Dense(2, 1));
  std::get<1>(m.layers).weight = std::get<1>(m.layers).weight.to(dev);
  EXPECT_THROW(get_device(m), DeviceMismatch);
}

// The rules' element updates (include/flx/backend_rules.h) as each backend
// compiles them: Adam's denormal flush on every device, bit for bit with the
// CPU; and the in-place and step-tensor forms of every rule alike.
#include <cfloat>
#include <cstring>

#include "flx/optimiser_rules.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {
// Bits of a Float32 or Float64 tensor, for exact comparisons (NaN and -0 included).
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to(Device::cpu()).to(Float64).to_vector<double>()) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  return out;
}
}  // namespace

// One step of gradients near the smallest normal number, then zeros: a
// moment that falls below it becomes 0 (not a denormal) on every device,
// and the states and parameters keep the CPU's bits throughout. Entry 0's m
// is born denormal (0.1·g), entry 1's decays into the denormals after a few
// zero-gradient steps, entry 2's v (0.001·g²) is born denormal, and entry
// 3 stays normal.
TEST(RuleBodies, AdamFlushesDenormalMomentsToZeroOnEveryDevice) {
  for (DType t : {Float32, Float64}) {
    SCOPED_TRACE(dtype_name(t));
    const double tiny = t == Float32 ? FLT_MIN : DBL_MIN;  // the smallest normal number
    // Entry 2: 0.001·g² just below `tiny` (g² far below it: in Float32, 1e-39).
    const double g2 = t == Float32 ? 1e-18 : std::sqrt(tiny * 500);
    const std::vector<double> g0 = {tiny * 8, tiny * 12, g2, 1e-3};
    std::vector<std::vector<uint64_t>> cpu_bits;
    for (const Device& dev : flx::testing::conformance_devices()) {
      SCOPED_TRACE(dev.str());
      const Adam adam(0.1);
      Tensor x = tensor(std::vector<double>{0.5, -0.5, 0.25, 1.0}).to(t).to(dev);
      RuleState st = adam.init(x);
      std::vector<std::vector<uint64_t>> seen;
      for (int step = 0; step < 10; ++step) {
        const Tensor g = tensor(step == 0 ? g0 : std::vector<double>(4, 0.0)).to(t).to(dev);
        ASSERT_TRUE(adam.apply_in_place(st, x, g));
        for (const Tensor* s : {&st.tensors[0], &st.tensors[1], &x}) seen.push_back(bits(*s));
        const auto m = st.tensors[0].to(Device::cpu()).to_vector<double>();
        const auto v = st.tensors[1].to(Device::cpu()).to_vector<double>();
        for (size_t i = 0; i < 4; ++i) {
          EXPECT_TRUE(m[i] == 0 || std::abs(m[i]) >= tiny) << "m[" << i << "] = " << m[i] << " after step " << step;
          EXPECT_TRUE(v[i] == 0 || v[i] >= tiny) << "v[" << i << "] = " << v[i] << " after step " << step;
        }
        if (step == 0) {
          EXPECT_EQ(m[0], 0.0) << "0.1·g below the smallest normal number flushes";
          EXPECT_GT(m[1], 0.0) << "0.1·g above it stays";
          EXPECT_EQ(v[2], 0.0) << "0.001·g² below it flushes";
        }
        if (step == 9) {
          EXPECT_EQ(m[1], 0.0) << "m decays by 0.9 a step, through the smallest normal number within 9 steps";
          EXPECT_GT(m[3], 0.0);
        }
      }
      if (cpu_bits.empty()) cpu_bits = seen;
      else EXPECT_EQ(seen, cpu_bits) << "the states and parameters differ from the CPU's bits";
    }
  }
}

// In place (a rule alone: x -= step in the kernel) and as a step tensor (the
// rule inside a chain: the step written out, then subtracted) run the same
// body: the same Float32 bits.
TEST(RuleBodies, InPlaceAndStepTensorFormsGiveTheSameBits) {
  const std::vector<std::shared_ptr<OptRule>> rules = {
      std::make_shared<Momentum>(),  std::make_shared<Nesterov>(), std::make_shared<RMSProp>(0.01, 0.9, 1e-8, true),
      std::make_shared<Adam>(),      std::make_shared<AdamW>(0.01, Beta{0.9, 0.99}, 0.1),
      std::make_shared<NAdam>(),     std::make_shared<RAdam>(),    std::make_shared<AdaMax>(),
      std::make_shared<OAdam>(),     std::make_shared<AdaGrad>(),  std::make_shared<AdaDelta>(),
      std::make_shared<AMSGrad>(),   std::make_shared<AdaBelief>(), std::make_shared<Lion>(),
      std::make_shared<Rprop>()};
  for (const auto& rule : rules) {
    SCOPED_TRACE(flx::testing::shown(*rule));
    set_seed(3);
    Tensor a = rand(Float32, {5, 3}), b = a * 1.0;  // a copy
    auto chain = std::make_shared<OptimiserChain>();
    chain->rules.push_back(rule->clone());
    OptState alone(rule->clone(), {{"x", a}}), chained(chain, {{"x", b}});
    for (int step = 0; step < 4; ++step) {
      const Tensor g = randn(Float32, {5, 3});
      alone.step({{a, g}});
      chained.step({{b, g}});
    }
    EXPECT_EQ(bits(a), bits(b));
  }
}

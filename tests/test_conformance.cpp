// The device conformance suite (ggml's test-backend-ops is the model): every
// op, layer and loss runs on each device besides the CPU and is compared with
// the CPU, forward and backward, with tolerances per element type; the
// optimisers' steps likewise. The CPU itself is checked against closed forms
// and finite differences in the other suites.
#include <functional>
#include <sstream>

#include "test_util.hpp"

using namespace flx;
using V = std::vector<Tensor>;

namespace {

struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const V&)> f;
  bool differentiable = true;
  double lo = -1, hi = 1;  // input range
};

double tolerance(DType t) {
  switch (t) {
    case DType::Float64: return 1e-10;
    case DType::Float16: return 2e-2;
    case DType::BFloat16: return 6e-2;
    default: return 2e-5;
  }
}

std::vector<Case> cases() {
  auto ns = [](const V& v) { return v[0]; };
  (void)ns;
  std::vector<Case> c = {
      {"add_bcast", {{4, 3}, {4}}, [](const V& v) { return v[0] + v[1]; }},
      {"sub_row", {{4, 3}, {1, 3}}, [](const V& v) { return v[0] - v[1]; }},
      {"mul", {{5, 2, 3}, {5, 2, 3}}, [](const V& v) { return v[0] * v[1]; }},
      {"div", {{3, 4}, {3, 4}}, [](const V& v) { return v[0] / v[1]; }, true, 0.5, 2},
      {"scalars", {{7}}, [](const V& v) { return (2.0 - v[0]) * 3.0 / 2.0 + 1.0; }},
      {"neg", {{7}}, [](const V& v) { return -v[0]; }},
      {"pow_scalar", {{6}}, [](const V& v) { return pow(v[0], 3.0); }, true, 0.5, 2},
      {"pow", {{6}, {6}}, [](const V& v) { return pow(v[0], v[1]); }, true, 0.5, 2},
      {"square", {{6}}, [](const V& v) { return square(v[0]); }},
      {"sqrt", {{6}}, [](const V& v) { return sqrt(v[0]); }, true, 0.5, 2},
      {"exp", {{6}}, [](const V& v) { return exp(v[0]); }},
      {"log", {{6}}, [](const V& v) { return log(v[0]); }, true, 0.5, 2},
      {"abs", {{6}}, [](const V& v) { return abs(v[0]); }},
      {"clamp", {{9}}, [](const V& v) { return clamp(v[0], -0.5, 0.5); }},
      {"maximum2", {{6}, {6}}, [](const V& v) { return maximum(v[0], v[1]); }},
      {"minimum2", {{6}, {6}}, [](const V& v) { return minimum(v[0], v[1]); }},
      {"where", {{6}, {6}}, [](const V& v) { return where(v[0] > v[1], v[0], v[1] * 2.0); }},
      {"xlogy", {{6}, {6}}, [](const V& v) { return xlogy(v[0], v[1]); }, true, 0.5, 2},
      {"compare", {{6}, {6}}, [](const V& v) { return (v[0] < v[1]).to(v[0].dtype()); }, false},
      {"sigmoid", {{8}}, [](const V& v) { return sigmoid(v[0]); }},
      {"relu", {{8}}, [](const V& v) { return relu(v[0]); }},
      {"tanh", {{8}}, [](const V& v) { return flx::tanh(v[0]); }},
      {"gelu", {{8}}, [](const V& v) { return gelu(v[0]); }},
      {"leakyrelu", {{8}}, [](const V& v) { return leakyrelu(v[0], 0.1); }},
      {"elu", {{8}}, [](const V& v) { return elu(v[0]); }},
      {"swish", {{8}}, [](const V& v) { return swish(v[0]); }},
      {"softplus", {{8}}, [](const V& v) { return softplus(v[0]); }},
      {"gelu_erf", {{8}}, [](const V& v) { return gelu_erf(v[0]); }},
      {"celu", {{8}}, [](const V& v) { return celu(v[0], 0.7); }},
      {"sum_all", {{4, 5}}, [](const V& v) { return sum(v[0]); }},
      {"sum_dims", {{3, 4, 5}}, [](const V& v) { return sum(v[0], {0, 2}); }},
      {"sum_last", {{3, 40}}, [](const V& v) { return sum(v[0], {1}); }},
      {"mean", {{3, 4}}, [](const V& v) { return mean(v[0], {1}); }},
      {"maximum", {{4, 5}}, [](const V& v) { return maximum(v[0], {0}); }},
      {"minimum", {{4, 5}}, [](const V& v) { return minimum(v[0]); }},
      {"argmax", {{4, 5}}, [](const V& v) { return onecold(v[0]).to(v[0].dtype()); }, false},
      {"matvec", {{3, 4}, {4}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul", {{17, 13}, {13, 9}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_batched", {{3, 4, 2}, {4, 5, 2}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"matmul_bcast", {{3, 4, 2}, {4, 5}}, [](const V& v) { return matmul(v[0], v[1]); }},
      {"reshape", {{4, 6}}, [](const V& v) { return reshape(v[0], {6, 4}) * 2.0; }},
      {"permutedims", {{2, 3, 4}}, [](const V& v) { return permutedims(v[0], {2, 0, 1}); }},
      {"slice_last", {{3, 5}}, [](const V& v) { return v[0].slice_last(1, 4) * 1.0; }},
      {"gather", {{3, 5}},  // repeated indices: their gradients add up
       [](const V& v) { return gather(v[0], tensor(std::vector<int64_t>{4, 0, 4, 2}, {4}).to(v[0].device())); }},
      {"gather_2d_index", {{2, 3, 4}},
       [](const V& v) { return gather(v[0], tensor(std::vector<int64_t>{3, 1, 0, 3, 2, 2}, {2, 3}).to(v[0].device())); }},
      {"softmax", {{5, 3}}, [](const V& v) { return softmax(v[0]); }},
      {"softmax_dim1", {{5, 3}}, [](const V& v) { return softmax(v[0], 1); }},
      {"logsoftmax", {{5, 3}}, [](const V& v) { return logsoftmax(v[0]); }},
      {"dense", {{3, 4}, {3}, {4, 6}}, [](const V& v) { return Dense(v[0], v[1], relu)(v[2]); }},
      {"chain", {{4, 3}, {4}, {2, 4}, {2}, {3, 5}},
       [](const V& v) { return Chain(Dense(v[0], v[1], flx::tanh), Dense(v[2], v[3]), softmax)(v[4]); }},
      {"mse", {{3, 4}, {3, 4}}, [](const V& v) { return mse(v[0], v[1]); }},
      {"crossentropy", {{3, 4}}, [](const V& v) { return crossentropy(softmax(v[0]), onehotbatch({0, 2, 1, 1}, 3).to(v[0].device())); }},
      {"logitcrossentropy", {{3, 4}}, [](const V& v) { return logitcrossentropy(v[0], onehotbatch({0, 2, 1, 1}, 3).to(v[0].device())); }},
      {"cross_device_move", {{3, 4}},  // differentiable: the gradient returns to the device
       [](const V& v) { return (exp(v[0].to(Device::cpu())) * 2.0).to(v[0].device()) + v[0]; }},
      {"binarycrossentropy", {{3, 4}, {3, 4}}, [](const V& v) { return binarycrossentropy(sigmoid(v[0]), sigmoid(v[1])); }},
  };
  return c;
}

V make_inputs(const Case& c, DType t) {
  V xs;
  for (const auto& s : c.shapes) xs.push_back((rand(Float64, s) * (c.hi - c.lo) + c.lo).to(t));
  return xs;
}

V to_device(const V& xs, Device d) {
  V out;
  for (const auto& x : xs) out.push_back(x.to(d));
  return out;
}

struct Param {
  Device device;
  DType dtype;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.device << " " << p.dtype; }

class Conformance : public ::testing::TestWithParam<Param> {};

std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& d : flx::testing::accelerator_devices())
    for (DType t : {Float32, Float64, Float16}) p.push_back({d, t});
  if (p.empty()) p.push_back({Device::cpu(), Float32});  // placeholder: skips with the reason
  return p;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  if (info.param.device.is_cpu()) return "no_accelerator";
  return std::string(info.param.device.backend()) + std::to_string(info.param.device.ordinal()) + "_" +
         std::string(dtype_name(info.param.dtype));
}

void skip_without_accelerator(const Param& p) {
  if (p.device.is_cpu()) {
    std::string why;
    for (const auto& name : supported_devices())
      if (name != "CPU") why += "\n  " + name + ": " + backend_status(name).reason;
    GTEST_SKIP() << "no device besides the CPU is functional, so there is nothing to compare with it:" << why;
  }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Devices, Conformance, ::testing::ValuesIn(params()), param_name);

TEST_P(Conformance, OpsLayersAndLossesMatchTheCpuForwardAndBackward) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  const double tol = tolerance(t);
  set_seed(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name + " on " + dev.str() + " in " + std::string(dtype_name(t)));
    V xs = make_inputs(c, t);
    Tensor ref = c.f(xs);
    Tensor out = c.f(to_device(xs, dev));
    EXPECT_EQ(out.device(), dev);
    flx::testing::expect_close(out, ref, tol, c.name + " forward");
    if (!c.differentiable || t == Float16) continue;  // Float16 gradients: forward only
    Tensor w = rand(Float64, ref.shape()).to(t);       // a random cotangent
    auto loss = [&](const V& v) { return sum(c.f(v) * w.to(v[0].device())); };
    V gref = std::get<0>(gradient(loss, xs));
    V gdev = std::get<0>(gradient(loss, to_device(xs, dev)));
    ASSERT_EQ(gref.size(), gdev.size());
    for (size_t i = 0; i < gref.size(); ++i) {
      ASSERT_EQ(gref[i].defined(), gdev[i].defined()) << "input " << i;
      if (!gref[i].defined()) continue;
      EXPECT_EQ(gdev[i].device(), dev) << "input " << i;
      flx::testing::expect_close(gdev[i], gref[i], tol * 10, c.name + " gradient of input " + std::to_string(i));
    }
  }
}

TEST_P(Conformance, OptimiserStepsMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  if (t == Float16) {
    SUCCEED() << "optimiser steps are compared in Float32 and Float64 (Float16 rounding dominates)";
    return;
  }
  std::vector<std::pair<std::string, std::shared_ptr<OptRule>>> rules = {
      {"Descent", std::make_shared<Descent>(0.1)},       {"Momentum", std::make_shared<Momentum>()},
      {"Nesterov", std::make_shared<Nesterov>()},        {"RMSProp", std::make_shared<RMSProp>()},
      {"Adam", std::make_shared<Adam>()},                {"AdamW", std::make_shared<AdamW>(0.001, std::pair{0.9, 0.999}, 0.1)},
      {"Chain", std::make_shared<OptimiserChain>(ClipNorm(0.5), WeightDecay(0.01), ClipGrad(0.1), Adam())}};
  for (const auto& [name, rule] : rules) {
    SCOPED_TRACE(name);
    set_seed(5);
    Tensor x = rand(t, {4, 3}), g = rand(t, {4, 3}) - 0.5;
    Tensor xd = x.to(dev), gd = g.to(dev);
    OptState s_cpu(rule->clone(), {{"x", x}}), s_dev(rule->clone(), {{"x", xd}});
    for (int i = 0; i < 3; ++i) {
      s_cpu.step({{x, g}});
      s_dev.step({{xd, gd}});
    }
    flx::testing::expect_close(xd, x, tolerance(t) * 10, name);
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
  EXPECT_EQ(shown.str(), "Chain(Dense(3 => 4, relu), Dense(4 => 2))  # 26 parameters");
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

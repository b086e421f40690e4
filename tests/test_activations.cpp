// NNlib's activations that came with issue 29 (hardσ, hardtanh, relu6,
// rrelu, gelu_sigmoid, hardswish, selu, logσ, logcosh, mish, tanhshrink,
// softshrink, trelu, lisht, the aliases gelu_tanh, tanh_fast, sigmoid_fast)
// and glu, on every device: against closed forms written here in Float64
// (edge values included), Float64 finite differences of their gradients,
// their names in a Chain, their use as a Dense activation, and PyTorch's
// outputs and gradients where torch has the function
// (tests/parity/activation_fixtures.safetensors, written by
// tests/parity/make_activation_fixtures.py). The device conformance suite
// has them too (tests/conformance_activation_cases.cpp).
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::expect_close;
using flx::testing::expect_values;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;
using Exact = std::function<double(double)>;

constexpr double kLambda = 1.0507009873554804934193349852946;  // NNlib's selu_λ
constexpr double kAlpha = 1.6732632423543772848170429916717;   // NNlib's selu_α
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

double sig(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_exact(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// An activation, its closed form, and its values at ±Inf where they are
// meaningful (NaN: not asserted).
struct Act {
  std::string name;  // as NNlib prints it
  Fn f;
  Exact exact;
  double at_inf = kNaN, at_minus_inf = kNaN;
};

std::vector<Act> acts() {
  const double rt8pi = std::sqrt(8 / M_PI);
  return {
      {"hardσ", hardsigmoid, [](double x) { return std::max(0.0, std::min(1.0, (x + 3) / 6)); }, 1, 0},
      {"hardtanh", hardtanh, [](double x) { return std::max(-1.0, std::min(1.0, x)); }, 1, -1},
      {"relu6", relu6, [](double x) { return std::max(0.0, std::min(6.0, x)); }, 6, 0},
      {"gelu_sigmoid", gelu_sigmoid,
       [rt8pi](double x) { return x * sig(rt8pi * (x + 0.044715 * x * x * x)); }, kInf, kNaN},
      {"hardswish", hardswish, [](double x) { return x * std::max(0.0, std::min(1.0, (x + 3) / 6)); }, kInf, kNaN},
      {"selu", selu, [](double x) { return kLambda * (x > 0 ? x : kAlpha * (std::exp(x) - 1)); }, kInf,
       -kLambda * kAlpha},
      {"logσ", logsigmoid, [](double x) { return -softplus_exact(-x); }, 0, -kInf},
      {"logcosh", logcosh,
       [](double x) { return std::fabs(x) < 300 ? std::log(std::cosh(x)) : std::fabs(x) - std::log(2.0); }, kInf,
       kInf},
      {"mish", mish, [](double x) { return x * std::tanh(softplus_exact(x)); }, kInf, kNaN},
      {"tanhshrink", tanhshrink, [](double x) { return x - std::tanh(x); }, kInf, -kInf},
      {"softshrink", softshrink, [](double x) { return x > 0.5 ? x - 0.5 : x < -0.5 ? x + 0.5 : 0; }, kInf, -kInf},
      {"trelu", trelu, [](double x) { return x > 1 ? x : 0; }, kInf, 0},
      {"lisht", lisht, [](double x) { return x * std::tanh(x); }, kInf, kInf},
      {"gelu_tanh", gelu_tanh,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); },
       kInf, kNaN},
      {"tanh_fast", tanh_fast, [](double x) { return std::tanh(x); }, 1, -1},
      {"sigmoid_fast", sigmoid_fast, sig, 1, 0},
  };
}

// Points for the closed forms: the kinks (0, ±0.5, ±1, ±3, 6), small and
// large magnitudes.
const std::vector<double> kPoints{-1e30, -40, -7.5, -3, -2.2, -1, -0.5, -0.3, -1e-3, -1e-9, 0,
                                  1e-9,  1e-3, 0.3,  0.5, 0.8,  1,  1.7,  3,    4.4,  6,     9, 40, 1e30};
// Points for finite differences: away from every kink, by more than h.
const std::vector<double> kSmooth{-4.2, -2.7, -1.3, -0.6, -0.2, 0.15, 0.4, 0.8, 1.7, 2.6, 4.2, 7.5};

}  // namespace

class NNlibActivations : public ::testing::TestWithParam<Device> {
 protected:
  Tensor on(const Tensor& t) const { return t.to(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Devices, NNlibActivations, ::testing::ValuesIn(flx::testing::conformance_devices()),
                         [](const auto& info) {
                           return std::string(info.param.backend()) + std::to_string(info.param.ordinal());
                         });

// Each activation against its closed form in Float64, at the kinks and at
// large and tiny magnitudes; NaN stays NaN, ±Inf gives the limit; Float32
// to its precision.
TEST_P(NNlibActivations, MatchTheirClosedForms) {
  const Tensor x = on(tensor(kPoints));
  const Tensor special = on(tensor(std::vector<double>{kNaN, kInf, -kInf}));
  std::vector<float> p32;
  for (double v : kPoints)
    if (std::fabs(v) < 100) p32.push_back(float(v));
  const Tensor x32 = on(tensor(p32));
  for (const Act& a : acts()) {
    SCOPED_TRACE(a.name);
    std::vector<double> want, want32;
    for (double v : kPoints) want.push_back(a.exact(v));
    for (float v : p32) want32.push_back(a.exact(double(v)));
    const Tensor y = a.f(x);
    EXPECT_EQ(y.dtype(), Float64);
    expect_values(y, want, 1e-13, a.name);
    const Tensor y32 = a.f(x32);
    EXPECT_EQ(y32.dtype(), Float32);
    expect_values(y32, want32, 2e-6, a.name + " Float32");
    const std::vector<double> s = a.f(special).to_vector<double>();
    EXPECT_TRUE(std::isnan(s[0])) << "NaN gives " << s[0];
    if (!std::isnan(a.at_inf)) EXPECT_EQ(s[1], a.at_inf);
    if (!std::isnan(a.at_minus_inf)) EXPECT_EQ(s[2], a.at_minus_inf);
  }
  // The aliases compute as the functions they stand for, bit for bit.
  EXPECT_EQ(gelu_tanh(x32).to_vector<float>(), gelu(x32).to_vector<float>());
  EXPECT_EQ(tanh_fast(x32).to_vector<float>(), flx::tanh(x32).to_vector<float>());
  EXPECT_EQ(sigmoid_fast(x32).to_vector<float>(), sigmoid(x32).to_vector<float>());
  // gelu_sigmoid is gelu's tanh form written with σ: equal to rounding.
  expect_close(gelu_sigmoid(x), gelu_tanh(x), 1e-14, "gelu_sigmoid vs gelu_tanh");
  // Integer inputs compute as Float32 (docs/dtypes.md).
  const Tensor xi = on(tensor(std::vector<int32_t>{-4, -1, 0, 2, 7}));
  EXPECT_EQ(relu6(xi).dtype(), Float32);
  expect_values(relu6(xi), {0, 0, 0, 2, 6});
  expect_values(hardtanh(xi), {-1, -1, 0, 1, 1});
}

// The parameters: softshrink's λ and trelu's θ, NNlib's defaults and others
// (a negative θ too, where the gradient is 1 above θ: NNlib's rule, Ω > 0,
// would give 0 between θ and 0).
TEST_P(NNlibActivations, TakeTheirParameters) {
  const Tensor x = on(tensor(kPoints));
  for (double lambda : {0.0, 0.5, 1.2}) {
    std::vector<double> want;
    for (double v : kPoints) want.push_back(v > lambda ? v - lambda : v < -lambda ? v + lambda : 0);
    expect_values(softshrink(x, lambda), want, 1e-13, "softshrink " + std::to_string(lambda));
  }
  EXPECT_THROW(softshrink(x, -0.1), ArgumentError);
  for (double theta : {1.0, 0.0, -0.5, 3.0}) {
    std::vector<double> want;
    for (double v : kPoints) want.push_back(v > theta ? v : 0);
    expect_values(trelu(x, theta), want, 1e-13, "trelu " + std::to_string(theta));
  }
  expect_values(thresholdrelu(on(tensor(std::vector<double>{0.5, 1, 1.5}))), {0, 0, 1.5});
  auto [g] = gradient([](const Tensor& t) { return sum(trelu(t, -0.5)); },
                      on(tensor(std::vector<double>{-0.7, -0.2, 0.3})));
  expect_values(g, {0, 1, 1});
}

// Float64 finite differences of each gradient (the fused derivative ops),
// at points away from the kinks; the parameters too.
TEST_P(NNlibActivations, GradientsMatchFiniteDifferences) {
  const Tensor x = on(tensor(kSmooth));
  for (const Act& a : acts()) {
    const Fn f = a.f;
    check_gradients([f](const std::vector<Tensor>& v) { return sum(f(v[0]) * v[0]); }, {x}, 1e-6, 1e-6, a.name);
  }
  check_gradients([](const std::vector<Tensor>& v) { return sum(softshrink(v[0], 1.1) * v[0]); }, {x}, 1e-6, 1e-6,
                  "softshrink 1.1");
  check_gradients([](const std::vector<Tensor>& v) { return sum(trelu(v[0], -1.0) * v[0]); }, {x}, 1e-6, 1e-6,
                  "trelu -1");
  // rrelu: the mean slope outside training; drawn slopes (the same each
  // call, from the seed) in training.
  check_gradients([](const std::vector<Tensor>& v) { return sum(rrelu(v[0], 0.1, 0.3, false) * v[0]); }, {x}, 1e-6,
                  1e-6, "rrelu");
  check_gradients(
      [](const std::vector<Tensor>& v) {
        set_seed(5);
        return sum(rrelu(v[0], 0.1, 0.3, true) * v[0]);
      },
      {x}, 1e-6, 1e-6, "rrelu training");
  check_gradients([](const std::vector<Tensor>& v) { return sum(glu(v[0], 1) * v[0].slice_last(0, 2)); },
                  {on(flx::testing::rand64({3, 4}, -2, 2))}, 1e-6, 1e-6, "glu");
}

// rrelu: deterministic (the mean slope, PyTorch's evaluation) outside
// gradient; inside it (training, as layers decide), a slope per element
// drawn uniformly from [lo, hi] from the global seed, the same for the same
// seed on every device, with the gradient of the drawn slope.
TEST_P(NNlibActivations, RreluDrawsItsSlopesOnlyWhileTraining) {
  std::vector<double> xs;
  for (int i = 0; i < 400; ++i) xs.push_back(i % 2 ? -1.0 - i * 0.01 : 0.5 + i * 0.01);
  const Tensor x = on(tensor(xs));
  const double lo = 0.125, hi = 1.0 / 3;
  expect_close(rrelu(x), leakyrelu(x, (lo + hi) / 2), 1e-15, "outside gradient: the mean slope");
  expect_close(rrelu(x, 0.2, 0.4), leakyrelu(x, 0.3), 1e-15, "its bounds");
  EXPECT_THROW(rrelu(x, 0.5, 0.2), ArgumentError);
  set_seed(3);
  const std::vector<double> y = rrelu(x, lo, hi, true).to_vector<double>();
  double smin = 1, smax = 0, mean = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] > 0) {
      EXPECT_EQ(y[i], xs[i]);
      continue;
    }
    const double s = y[i] / xs[i];
    smin = std::min(smin, s), smax = std::max(smax, s), mean += s / 200;
  }
  EXPECT_GE(smin, lo - 1e-15);
  EXPECT_LE(smax, hi + 1e-15);
  EXPECT_GT(smax - smin, 0.15);                          // spread over the interval
  EXPECT_NEAR(mean, (lo + hi) / 2, 0.02);                // uniform: its mean
  set_seed(3);
  EXPECT_EQ(rrelu(x, lo, hi, true).to_vector<double>(), y);  // the seed decides
  EXPECT_NE(rrelu(x, lo, hi, true).to_vector<double>(), y);  // the next draw differs
  set_seed(3);  // the CPU draws the same slopes for the seed
  EXPECT_EQ(rrelu(tensor(xs), lo, hi, true).to_vector<double>(), y);
  // Inside gradient: drawn, and the gradient is each element's slope.
  set_seed(3);
  auto [val, grads] = withgradient([&](const Tensor& t) { return sum(rrelu(t) * 1.0); }, x);
  (void)val;
  const std::vector<double> g = std::get<0>(grads).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_DOUBLE_EQ(g[i], xs[i] > 0 ? 1.0 : y[i] / xs[i]) << i;
  // NaN stays NaN; integers compute as Float32.
  EXPECT_TRUE(std::isnan(rrelu(on(tensor(std::vector<double>{kNaN})), lo, hi, true).item<double>()));
  EXPECT_EQ(rrelu(on(tensor(std::vector<int32_t>{-2, 3})), lo, hi, true).dtype(), Float32);
}

// glu: a .* σ(b), a the first half along dim and b the second (NNlib's).
TEST_P(NNlibActivations, GluGatesTheFirstHalfWithTheSecond) {
  const Tensor x = on(flx::testing::rand64({4, 3, 2}, -3, 3));
  const std::vector<double> v = x.to_vector<double>();
  for (int dim : {0, 1, 2}) {
    if (x.shape()[dim] % 2) {
      EXPECT_THROW(glu(x, dim), DimensionMismatch) << dim;
      continue;
    }
    const Tensor y = glu(x, dim);
    Shape s = x.shape();
    s[dim] /= 2;
    EXPECT_EQ(y.shape(), s);
    const int64_t stride = dim == 0 ? 1 : dim == 1 ? 4 : 12, half = s[dim];
    std::vector<double> want;
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t at[3] = {i, j, k};
          if (at[dim] >= half) continue;
          const int64_t e = i + 4 * j + 12 * k;
          want.push_back(v[size_t(e)] * sig(v[size_t(e + half * stride)]));
        }
    expect_values(y, want, 1e-13, "glu dim " + std::to_string(dim));
  }
  expect_close(glu(x), glu(x, 0), 0, "dim 0 by default");
  EXPECT_THROW(glu(x, 3), ArgumentError);
  EXPECT_THROW(glu(x, -1), ArgumentError);
}

// Each prints NNlib's name, alone, as a Dense's activation and in a Chain,
// converts to std::function, and serves as a Dense activation.
TEST(ActivationNames, AreNNlibsInAChain) {
  using flx::testing::shown;
  const std::vector<std::pair<Activation, std::string>> names = {
      {hardsigmoid, "hardσ"},   {hardtanh, "hardtanh"},     {relu6, "relu6"},         {rrelu, "rrelu"},
      {gelu, "gelu_tanh"},      {gelu_tanh, "gelu_tanh"},   {gelu_sigmoid, "gelu_sigmoid"},
      {hardswish, "hardswish"}, {selu, "selu"},             {logsigmoid, "logσ"},     {logcosh, "logcosh"},
      {mish, "mish"},           {tanhshrink, "tanhshrink"}, {softshrink, "softshrink"}, {trelu, "trelu"},
      {thresholdrelu, "trelu"}, {lisht, "lisht"},           {tanh_fast, "tanh_fast"}, {sigmoid_fast, "sigmoid_fast"},
      {glu, "glu"}};
  for (const auto& [a, n] : names) EXPECT_EQ(shown(a), n);
  EXPECT_EQ(shown(Dense(2, 3, hardsigmoid)), "Dense(2 => 3, hardσ)  # 9 parameters");
  EXPECT_EQ(shown(Chain(Dense(4, 4, selu), logsigmoid, softshrink, trelu, rrelu, glu)),
            "Chain(Dense(4 => 4, selu), logσ, softshrink, trelu, rrelu, glu)  # 20 parameters");
  EXPECT_EQ(shown(Chain(Dense(2, 4, mish), glu, Dense(2, 1, hardtanh))),
            "Chain(\n"
            "  Dense(2 => 4, mish),                  # 12 parameters\n"
            "  glu,\n"
            "  Dense(2 => 1, hardtanh),              # 3 parameters\n"
            ")                   # Total: 4 arrays, 15 parameters, 60 bytes.");
  // Tanh's and σ's fast aliases fuse in the recurrent layers as they do.
  EXPECT_EQ(Activation(tanh_fast).kind(), Activation::Kind::Tanh);
  EXPECT_EQ(Activation(sigmoid_fast).kind(), Activation::Kind::Sigmoid);
  EXPECT_EQ(Activation(gelu_tanh).kind(), Activation::Kind::Gelu);
}

TEST(ActivationNames, ServeAsDenseActivationsAndStdFunctions) {
  set_seed(1);
  const Tensor w = flx::testing::rand64({3, 4}), b = flx::testing::rand64({3}), x = flx::testing::rand64({4, 5}, -4, 4);
  const Tensor z = matmul(w, x) + b;
  const std::vector<std::pair<Activation, Fn>> acts = {
      {hardsigmoid, hardsigmoid}, {hardtanh, hardtanh}, {relu6, relu6},     {gelu_sigmoid, gelu_sigmoid},
      {hardswish, hardswish},     {selu, selu},         {logsigmoid, logsigmoid}, {logcosh, logcosh},
      {mish, mish},               {tanhshrink, tanhshrink}, {softshrink, softshrink}, {trelu, trelu},
      {lisht, lisht},             {rrelu, rrelu},       {tanh_fast, tanh_fast}, {sigmoid_fast, sigmoid_fast}};
  for (const auto& [a, f] : acts) {
    SCOPED_TRACE(a.name());
    const Dense d(w, b, a);
    expect_close(d(x), f(z), 1e-13, a.name());
    // And the gradient flows through it into the weights.
    auto [gd] = gradient([&](const Dense& l) { return sum(l(x)); }, d);
    EXPECT_TRUE(gd.weight.defined());
  }
  const std::function<Tensor(const Tensor&)> s = softshrink, t = trelu, g = glu;
  expect_close(s(z), softshrink(z, 0.5), 0);
  expect_close(t(z), trelu(z, 1.0), 0);
  EXPECT_EQ(g(x).shape(), (Shape{2, 5}));
}

// PyTorch's outputs and gradients of sum(y .* c), in Float64, for the
// functions it has (trelu: torch's threshold(x, 1, 0); rrelu: outside
// training); the kinks included, where PyTorch's derivative conventions are
// NNlib's but for hardswish's at ±3: there PyTorch takes the outer pieces'
// slopes (0 at −3, 1 at 3), NNlib (and flx) the inner piece's, x/3 + 1/2
// (−1/2 and 3/2). And PyTorch's Float64 hardsigmoid backward multiplies by
// 1/6 rounded to Float32 (a relative 3e-8 off), so its gradient is compared
// to 1e-7 there.
TEST(ActivationParity, MatchPyTorch) {
  const State fx = load(std::string(FLX_TEST_PARITY_DIR) + "/activation_fixtures.safetensors");
  const Tensor x = fx.at("x"), c = fx.at("c");
  const std::vector<double> xs = x.to_vector<double>(), cs = c.to_vector<double>();
  const std::vector<std::pair<std::string, Fn>> acts = {
      {"hardsigmoid", hardsigmoid},
      {"hardtanh", hardtanh},
      {"relu6", relu6},
      {"gelu_tanh", gelu_tanh},
      {"hardswish", hardswish},
      {"selu", selu},
      {"logsigmoid", logsigmoid},
      {"mish", mish},
      {"tanhshrink", tanhshrink},
      {"softshrink", softshrink},
      {"softshrink_1.2", [](const Tensor& t) { return softshrink(t, 1.2); }},
      {"trelu", trelu},
      {"rrelu_eval", [](const Tensor& t) { return rrelu(t, 1.0 / 8, 1.0 / 3, false); }},
  };
  for (const auto& [name, f] : acts) {
    SCOPED_TRACE(name);
    expect_close(f(x), fx.at(name + ".y"), 1e-12, name + " output");
    auto [g] = gradient([&](const Tensor& t) { return sum(f(t) * c); }, x);
    std::vector<double> want = fx.at(name + ".dx").to_vector<double>();
    if (name == "hardswish")
      for (size_t i = 0; i < xs.size(); ++i)
        if (std::fabs(xs[i]) == 3) {
          EXPECT_EQ(want[i], xs[i] < 0 ? 0.0 : cs[i]) << "PyTorch's convention at " << xs[i];
          want[i] = cs[i] * (xs[i] / 3 + 0.5);  // NNlib's deriv_hardswish
        }
    expect_values(g, want, name == "hardsigmoid" ? 1e-7 : 1e-12, name + " gradient");
  }
  // gelu_sigmoid against torch's tanh-form gelu: the same function.
  expect_close(gelu_sigmoid(x), fx.at("gelu_tanh.y"), 1e-12, "gelu_sigmoid");
  const Tensor gx = fx.at("glu.x"), gc = fx.at("glu.c");
  expect_close(glu(gx), fx.at("glu.y"), 1e-12, "glu output");
  auto [gg] = gradient([&](const Tensor& t) { return sum(glu(t) * gc); }, gx);
  expect_close(gg, fx.at("glu.dx"), 1e-12, "glu gradient");
}

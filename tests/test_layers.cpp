// Layers, activations as values, printing, and the losses against hand
// computations with Flux's definitions.
#include <sstream>

#include "test_util.hpp"

using namespace flx;
using flx::testing::shown;
using flx::testing::expect_values;


TEST(Layers, DenseComputesActOfWxPlusB) {
  Dense d(tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}), tensor({0.5f, -100.0f}), relu);
  expect_values(d(tensor({1.0f, 1.0f, 1.0f})), {9.5, 0});
  Tensor x = tensor(std::vector<float>{1, 0, 0, 0, 1, 0}, {3, 2});  // a batch of 2
  expect_values(d(x), {1.5, 0, 3.5, 0});
  EXPECT_THROW(d(ones(4)), DimensionMismatch);
  EXPECT_THROW(Dense(ones(2, 3), ones(3)), DimensionMismatch);
}

TEST(Layers, DenseGlorotInit) {
  set_seed(1);
  Dense d(300, 100);
  EXPECT_EQ(d.weight.shape(), (Shape{100, 300}));
  EXPECT_EQ(d.bias.shape(), (Shape{100}));
  EXPECT_EQ(d.weight.dtype(), Float32);
  double a = std::sqrt(6.0 / 400.0), mx = 0, var = 0;
  for (float v : d.weight.to_vector<float>()) {
    mx = std::max(mx, double(std::fabs(v)));
    var += double(v) * v;
  }
  var /= 30000.0;
  EXPECT_LE(mx, a);
  EXPECT_GT(mx, 0.95 * a);
  EXPECT_NEAR(var, a * a / 3, 0.05 * a * a / 3);  // uniform(-a, a) variance
  expect_values(d.bias, std::vector<double>(100, 0.0));
}

TEST(Layers, ChainAppliesInOrderAndPrintsLikeFlux) {
  auto m = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  Tensor x = rand(10, 3);
  Tensor h = std::get<1>(m.layers)(std::get<0>(m.layers)(x));
  flx::testing::expect_close(m(x), softmax(h));
  expect_values(sum(m(x), {0}), {1, 1, 1}, 1e-6);
  // Two layers with arrays: one a line, as Flux displays a model.
  EXPECT_EQ(shown(m), "Chain(\n  Dense(10 => 5, σ),                    # 55 parameters\n"
                     "  Dense(5 => 2),                        # 12 parameters\n  softmax,\n"
                     ")                   # Total: 4 arrays, 67 parameters, 268 bytes.");
  EXPECT_EQ(shown(Dense(10, 5)), "Dense(10 => 5)      # 55 parameters");
  EXPECT_EQ(shown(Dense(2, 3, relu)), "Dense(2 => 3, relu)  # 9 parameters");
  EXPECT_EQ(shown(Chain(Chain(Dense(2, 2, flx::tanh)), Dense(2, 1, gelu))),
            "Chain(\n  Chain(\n    Dense(2 => 2, tanh),                # 6 parameters\n  ),\n"
            "  Dense(2 => 1, gelu),                  # 3 parameters\n"
            ")                   # Total: 4 arrays, 9 parameters, 36 bytes.");
  EXPECT_EQ(shown(Chain(Chain(Dense(2, 2, flx::tanh)), gelu)), "Chain(Chain(Dense(2 => 2, tanh)), gelu)  # 6 parameters");
  auto lam = Chain(Dense(2, 2), [](const Tensor& t) { return t * 2.0; });
  expect_values(lam(zeros(2)), {0, 0});
}

TEST(Layers, ActivationNamesAsFluxPrintsThem) {
  EXPECT_EQ(shown(Activation(sigmoid)), "σ");
  for (auto [a, n] : std::vector<std::pair<Activation, std::string>>{
           {relu, "relu"}, {flx::tanh, "tanh"}, {gelu, "gelu"}, {leakyrelu, "leakyrelu"}, {elu, "elu"},
           {swish, "swish"}, {softplus, "softplus"}, {identity, "identity"}})
    EXPECT_EQ(shown(a), n);
  EXPECT_EQ(std::string(Softmax::name()), "softmax");
}

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

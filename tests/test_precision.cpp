// Low precision: the converters f16, bf16, f32 and f64 (Flux's), every layer
// forward and backward in Float16 and BFloat16 after conversion, on every
// device, and the ops that keep their statistics in Float32 for half inputs
// (softmax, logsoftmax, LayerNorm, BatchNorm, sums, the losses), each
// against the Float32 computation and against what a naive half
// accumulation would give. MixedPrecision and LossScaler are in
// test_mixed_precision.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <type_traits>

#include "flx/flx.hpp"
#include "test_util.hpp"
#include "ulps.hpp"

using namespace flx;
using flx::testing::ulp_of;
using flx::testing::ulps_between;

namespace {

struct Mixed {
  Tensor w;      // Float32
  Tensor ids;    // Int32
  Tensor mask;   // Bool
  Tensor wide;   // Float64
  std::vector<Tensor> more;
  BatchNorm bn{3};
};
FLX_FUNCTOR(Mixed, w, ids, mask, wide, more, bn)

Mixed mixed() {
  set_seed(3);
  return Mixed{randn(4, 3), tensor(std::vector<int32_t>{1, 2, 3}), tensor(std::vector<bool>{true, false}),
               randn(Float64, 2), {randn(2), randn(Float16, 3)}};
}

}  // namespace

// ---- converters --------------------------------------------------------------------

TEST(Precision, ConvertersKeepTheTypeAndConvertFloatingLeavesOnly) {
  const Mixed m = mixed();
  static_assert(std::is_same_v<decltype(bf16(m)), Mixed>);
  static_assert(std::is_same_v<decltype(f16(Chain(Dense(2, 3)))), decltype(Chain(Dense(2, 3)))>);
  for (auto [to, convert] : std::vector<std::pair<DType, std::function<Mixed(const Mixed&)>>>{
           {Float16, [](const Mixed& x) { return f16(x); }},
           {BFloat16, [](const Mixed& x) { return bf16(x); }},
           {Float32, [](const Mixed& x) { return f32(x); }},
           {Float64, [](const Mixed& x) { return f64(x); }}}) {
    SCOPED_TRACE(dtype_name(to));
    const Mixed c = convert(m);
    EXPECT_EQ(c.w.dtype(), to);
    EXPECT_EQ(c.wide.dtype(), to);
    EXPECT_EQ(c.more[0].dtype(), to);
    EXPECT_EQ(c.more[1].dtype(), to);
    // Integers and Bool as they were: the same tensors.
    EXPECT_EQ(c.ids.dtype(), Int32);
    EXPECT_EQ(c.ids.id(), m.ids.id());
    EXPECT_EQ(c.mask.id(), m.mask.id());
    // BatchNorm: Float32 in the halves (its op needs so), the precision otherwise.
    const DType bn = to == Float16 || to == BFloat16 ? Float32 : to;
    for (const Tensor& t : {c.bn.scale, c.bn.bias, c.bn.running_mean, c.bn.running_var}) EXPECT_EQ(t.dtype(), bn);
    // Values: the original's rounded to nearest even (a cast).
    EXPECT_EQ(c.w.to_vector<double>(), m.w.to(to).to_vector<double>());
    // Fields other than tensors come along.
    EXPECT_EQ(c.bn.channels, 3);
  }
  // A tensor already of the precision is kept (shared), as Flux's f32 keeps Float32 arrays.
  EXPECT_EQ(f32(m).w.id(), m.w.id());
  EXPECT_NE(f64(m).w.id(), m.w.id());
  // A bare tensor converts too; an integer one is left alone.
  EXPECT_EQ(bf16(ones(2)).dtype(), BFloat16);
  EXPECT_EQ(f16(tensor(std::vector<int64_t>{1, 2})).dtype(), Int64);
  EXPECT_EQ(to_precision(ones(2), Float16).dtype(), Float16);
  EXPECT_THROW(to_precision(ones(2), Int32), ArgumentError);
}

TEST(Precision, RoundTripThroughBFloat16IsWithinAnUlp) {
  set_seed(4);
  auto m = Chain(Dense(30, 20, relu), Dense(20, 10));
  const auto back = f32(bf16(m));
  const std::vector<std::pair<Tensor, Tensor>> pairs = {{std::get<0>(m.layers).weight, std::get<0>(back.layers).weight},
                                                        {std::get<1>(m.layers).weight, std::get<1>(back.layers).weight}};
  for (const auto& [orig, rt] : pairs) {
    EXPECT_EQ(rt.dtype(), Float32);
    const auto o = orig.to_vector<double>(), r = rt.to_vector<double>();
    size_t moved = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      // Rounded to nearest: within half a BFloat16 ulp of the original.
      EXPECT_LE(std::fabs(r[i] - o[i]), 0.5 * ulp_of(o[i], BFloat16)) << i;
      moved += r[i] != o[i];
    }
    EXPECT_GT(moved, o.size() / 2) << "random Float32 values almost never fit BFloat16's 8 bits";
  }
}

TEST(Precision, TiedTensorsStayTied) {
  const Tensor w = randn(3, 3);
  std::vector<Tensor> tied = {w, w};
  const auto c = bf16(tied);
  EXPECT_EQ(c[0].id(), c[1].id());
  EXPECT_EQ(c[0].dtype(), BFloat16);
}

// ---- every layer in the halves, on every device ----------------------------------------

namespace {

struct LayerParam {
  Device device;
  DType dtype;
};
void PrintTo(const LayerParam& p, std::ostream* os) { *os << p.device << " " << p.dtype; }
std::vector<LayerParam> layer_params() {
  std::vector<LayerParam> out;
  for (const Device& d : flx::testing::conformance_devices())
    for (DType t : {BFloat16, Float16}) out.push_back({d, t});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<LayerParam>& info) {
  return std::string(info.param.device.backend()) + std::to_string(info.param.device.ordinal()) + "_" +
         std::string(dtype_name(info.param.dtype));
}

class HalfLayers : public ::testing::TestWithParam<LayerParam> {};

// |a - b| <= tol * max|b| elementwise (a normwise check: the halves' errors
// grow with the layer's sums, not with each element).
void expect_normwise(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.to(Device::cpu()).to_vector<double>(), w = want.to(Device::cpu()).to_vector<double>();
  double scale = 0, worst = 0;
  for (size_t i = 0; i < w.size(); ++i) scale = std::max(scale, std::fabs(w[i]));
  for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::fabs(g[i] - w[i]));
  EXPECT_TRUE(std::isfinite(worst)) << what;
  EXPECT_LE(worst, tol * std::max(scale, 1e-3)) << what << ": off by " << worst << ", largest " << scale;
}

// The model converted to t runs forward and backward on dev: its output and
// every parameter's gradient in t, within tol (normwise) of the Float32
// model's, which it was made from.
template <class M>
void check_layer(const std::string& name, const M& model32, const Tensor& x32, const Device& dev, DType t,
                 double tol, bool x_is_data = true) {
  SCOPED_TRACE(name);
  const M m32 = model32 | dev;
  const M mh = to_precision(model32, t) | dev;
  const Tensor x = x32.to(dev), xh = x_is_data ? x.to(t) : x;
  set_seed(9);
  const Tensor w = rand(Float32, m32(x).shape()).to(dev);  // a fixed cotangent
  auto loss = [&](const M& m, const Tensor& in) { return sum(m(in).to(Float32) * w); };
  auto [l32, g32] = withgradient([&](const M& m) { return loss(m, x); }, m32);
  auto [lh, gh] = withgradient([&](const M& m) { return loss(m, xh); }, mh);
  EXPECT_EQ(mh(xh).dtype(), t);
  expect_normwise(mh(xh).to(Float32), m32(x), tol, name + " forward");
  const auto p32 = leaves(std::get<0>(g32)), ph = leaves(std::get<0>(gh));
  ASSERT_EQ(p32.size(), ph.size());
  EXPECT_FALSE(ph.empty());
  for (size_t i = 0; i < ph.size(); ++i) {
    const std::string what = name + " gradient " + std::to_string(i);
    EXPECT_TRUE(ph[i].dtype() == t || ph[i].dtype() == Float32) << what << ": " << ph[i].dtype();
    expect_normwise(ph[i].to(Float32), p32[i], 2 * tol, what);
  }
}

struct MhaOut {  // MultiHeadAttention as a layer of one output
  MultiHeadAttention mha;
  Tensor operator()(const Tensor& x) const { return mha(x, {.causal = true}).first; }
};
FLX_FUNCTOR(MhaOut, mha)

}  // namespace

INSTANTIATE_TEST_SUITE_P(Devices, HalfLayers, ::testing::ValuesIn(layer_params()), param_name);

// The tolerances: BFloat16 keeps 8 bits (a relative 2^-9 per rounding),
// Float16 11; a layer's output carries a few roundings of each input and
// weight through sums that keep Float32 (products) or double (reductions).
TEST_P(HalfLayers, EveryLayerRunsForwardAndBackwardAfterConversion) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  const double tol = t == BFloat16 ? 3e-2 : 4e-3;
  set_seed(21);
  check_layer("Dense", Chain(Dense(6, 5, relu), Dense(5, 3)), randn(6, 4), dev, t, tol);
  check_layer("Conv, CrossCor, ConvTranspose, pools",
              Chain(Conv({3, 3}, 2, 4, relu, {.pad = 1}), MaxPool({2, 2}), CrossCor({3, 3}, 4, 4, {.pad = 1}),
                    MeanPool({2, 2}), ConvTranspose({2, 2}, 4, 3, {.stride = 2}), GlobalMeanPool(), Flatten()),
              randn(8, 8, 2, 3), dev, t, tol);
  // (BatchNorm first: a bias before it would get a gradient of zero but for rounding noise.)
  check_layer("BatchNorm (training)", trainmode(Chain(BatchNorm(2, relu), Conv({3, 3}, 2, 4))), randn(6, 6, 2, 3),
              dev, t, tol);
  check_layer("BatchNorm (inference)", testmode(Chain(Dense(5, 4), BatchNorm(4))), randn(5, 6), dev, t, tol);
  check_layer("LayerNorm", Chain(Dense(6, 8), LayerNorm(8, relu)), randn(6, 5), dev, t, tol);
  check_layer("Embedding", Chain(Embedding(10, 4), Dense(4, 3)),
              tensor(std::vector<int32_t>{0, 3, 9, 3, 1, 7}, {2, 3}), dev, t, tol, /*x_is_data=*/false);
  check_layer("RNN", RNN(3, 4), randn(3, 5, 2), dev, t, tol * 2);
  check_layer("LSTM", LSTM(3, 4), randn(3, 5, 2), dev, t, tol * 2);
  check_layer("GRU", GRU(3, 4), randn(3, 5, 2), dev, t, tol * 2);
  check_layer("MultiHeadAttention", MhaOut{MultiHeadAttention(8, {.nheads = 2})}, randn(8, 5, 2), dev, t, tol * 2);
}

// Dropout in a half model: the kept elements are x / (1 - p) rounded once,
// and the gradient is the mask's.
TEST_P(HalfLayers, DropoutKeepsItsScaleInHalves) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  const auto model = to_precision(Chain(Dropout(0.25)), t) | dev;
  set_seed(7);
  const Tensor x = (rand(Float32, {64, 8}) + 1.0).to(t).to(dev);
  auto [y, g] = withgradient([&](const Tensor& in) { return sum(model(in).to(Float32)); }, x);
  const Tensor out = trainmode(model)(x);
  (void)y;
  EXPECT_EQ(out.dtype(), t);
  EXPECT_EQ(std::get<0>(g).dtype(), t);
  const auto xs = x.to(Device::cpu()).to_vector<double>(), gs = std::get<0>(g).to(Device::cpu()).to_vector<double>();
  const double keep = tensor(std::vector<double>{1 / 0.75}).to(t).to_vector<double>()[0];
  size_t dropped = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    EXPECT_TRUE(gs[i] == 0 || gs[i] == keep) << i << ": " << gs[i];
    dropped += gs[i] == 0;
  }
  EXPECT_GT(dropped, gs.size() / 8);
  EXPECT_LT(dropped, gs.size() * 3 / 8);
  const auto os = out.to(Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < os.size(); ++i)
    if (os[i] != 0) EXPECT_EQ(os[i], tensor(std::vector<double>{xs[i] * keep}).to(t).to_vector<double>()[0]) << i;
}

// ---- statistics in Float32 --------------------------------------------------------

namespace {

// 4096 values near `offset` (spread `spread`) in the half type t.
Tensor values_near(double offset, double spread, DType t, Shape s = Shape{4096}) {
  return (rand(Float64, s) * spread + offset).to(t);
}

// A naive accumulation in the half type: each partial sum rounded to t, as a
// kernel with a half accumulator would add.
double naive_sum(const std::vector<double>& v, DType t) {
  double acc = 0;
  for (double x : v) acc = tensor(std::vector<double>{acc + x}).to(t).to_vector<double>()[0];
  return acc;
}

class HalfStatistics : public ::testing::TestWithParam<LayerParam> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Devices, HalfStatistics, ::testing::ValuesIn(layer_params()), param_name);

// sum and mean of 4096 halves: the exact sum (the values are exact in
// double) rounded once, where a half accumulator stalls far below it.
TEST_P(HalfStatistics, SumsOf4096HalvesAreTheFloat32SumRounded) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  set_seed(31);
  const Tensor x = values_near(1.0, 1.0, t);
  const auto v = x.to_vector<double>();
  double exact = 0;
  for (double e : v) exact += e;
  const double want = tensor(std::vector<double>{exact}).to(t).to_vector<double>()[0];
  const Tensor s = sum(x.to(dev));
  EXPECT_EQ(s.dtype(), t);
  EXPECT_LE(ulps_between(s.item<double>(), want, t), 1) << s.item<double>() << " vs " << want;
  EXPECT_LE(ulps_between(mean(x.to(dev)).item<double>(), exact / 4096, t), 1);
  // What the test tells apart: a half accumulator is off by many ulps.
  EXPECT_GT(ulps_between(naive_sum(v, t), want, t), 8) << naive_sum(v, t) << " vs " << want;
}

// softmax and logsoftmax over 4096 logits: the Float32 computation rounded
// (1 ulp: exp and log may round either way), where a half sum of the
// exponentials would be off by a large factor.
TEST_P(HalfStatistics, SoftmaxAndLogsoftmaxOf4096HalvesAreTheFloat32ResultRounded) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  set_seed(32);
  const Tensor x = values_near(0.0, 1.0, t, Shape{4096, 2});
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "logsoftmax" : "softmax");
    auto f = [&](const Tensor& in) { return log ? logsoftmax(in) : softmax(in); };
    const Tensor got = f(x.to(dev));
    EXPECT_EQ(got.dtype(), t);
    const Tensor want = f(x.to(Float32)).to(t);
    flx::testing::expect_ulps(got, want, {1}, log ? "logsoftmax" : "softmax");
  }
  // A half accumulator of the exponentials: sum(exp(x - max)) stalls.
  std::vector<double> e;
  const auto v = x.to_vector<double>();
  double mx = -INFINITY;
  for (size_t i = 0; i < 4096; ++i) mx = std::max(mx, v[i]);
  for (size_t i = 0; i < 4096; ++i) e.push_back(tensor(std::vector<double>{std::exp(v[i] - mx)}).to(t).to_vector<double>()[0]);
  double exact = 0;
  for (double a : e) exact += a;
  EXPECT_GT(std::fabs(naive_sum(e, t) - exact) / exact, 0.01) << "a softmax with it would be off by that much";
}

// LayerNorm over 4096 features around 300 (a mean that leaves the spread
// few of the halves' bits): the Float32 computation rounded once. In the
// halves, x - mean alone loses the mean's rounding (BFloat16's ulp at 300
// is 2), which is most of the spread.
TEST_P(HalfStatistics, LayerNormOf4096HalvesIsTheFloat32ResultRounded) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  set_seed(33);
  const Tensor x = values_near(300.0, 8.0, t, Shape{4096, 2});
  const auto ln = to_precision(LayerNorm(4096), t) | dev;
  const Tensor got = ln(x.to(dev));
  EXPECT_EQ(got.dtype(), t);
  const Tensor want = (LayerNorm(4096) | dev)(x.to(Float32).to(dev)).to(t);
  flx::testing::expect_ulps(got, want, {1}, "LayerNorm");
  // The same in half arithmetic throughout (each op rounded to t) is far off.
  const Tensor xd = x.to(dev);
  const Tensor c = xd - mean(xd, {0});
  const Tensor naive = c / sqrt(mean(square(c), {0}) + 1e-5);
  double worst = 0;
  const auto n = naive.to(Device::cpu()).to_vector<double>(), w = want.to(Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < n.size(); ++i) worst = std::max(worst, ulps_between(n[i], w[i], t));
  EXPECT_GT(worst, 4) << "the naive half LayerNorm should differ";
}

// BatchNorm (training) over 4096 values per channel, around 300: its
// statistics are Float32 (backend.h's param_dtype) and the output the
// Float32 computation rounded once.
TEST_P(HalfStatistics, BatchNormOf4096HalvesIsTheFloat32ResultRounded) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  set_seed(34);
  const Tensor x = values_near(300.0, 8.0, t, Shape{64, 2, 64});
  const auto bn32 = trainmode(BatchNorm(2)) | dev;
  const auto bnh = to_precision(trainmode(BatchNorm(2)), t) | dev;
  const Tensor got = bnh(x.to(dev));
  EXPECT_EQ(got.dtype(), t);
  const Tensor want = bn32(x.to(Float32).to(dev)).to(t);
  flx::testing::expect_ulps(got, want, {1}, "BatchNorm");
  // The running statistics moved in Float32, as the Float32 layer's.
  EXPECT_EQ(bnh.running_mean.dtype(), Float32);
  flx::testing::expect_close(bnh.running_mean, bn32.running_mean, 1e-6);
  flx::testing::expect_close(bnh.running_var, bn32.running_var, 1e-5);
}

// The losses of half predictions compute in Float32 and give Float32: the
// loss of the widened tensors exactly, where the mean of 4096 half terms
// accumulated in the half type would be off.
TEST_P(HalfStatistics, LossesOfHalfPredictionsAreTheFloat32Loss) {
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  set_seed(35);
  const Tensor yhat = values_near(0.5, 0.4, t, Shape{8, 512}).to(dev), y = values_near(0.5, 0.4, t, Shape{8, 512}).to(dev);
  std::vector<int64_t> labels(512);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t(i % 8);
  const Tensor onehot = onehotbatch(labels, 8).to(dev);
  // eps defaults to the prediction's type's (Flux's epseltype): given, the
  // Float32 loss of the widened tensors uses the same.
  const double eps = t == Float16 ? 0.0009765625 : 0.0078125;
  using Loss = std::function<Tensor(const Tensor&, const Tensor&, const LossOptions&)>;
  const std::vector<std::pair<std::string, Loss>> losses = {
      {"mse", [](const Tensor& a, const Tensor& b, const LossOptions& o) { return mse(a, b, o); }},
      // softmax runs in the half type (a layer); the loss widens its output
      {"crossentropy",
       [&](const Tensor& a, const Tensor&, const LossOptions& o) { return crossentropy(softmax(a), onehot, o); }},
      {"logitcrossentropy",
       [&](const Tensor& a, const Tensor&, const LossOptions& o) { return logitcrossentropy(a, onehot, o); }},
      {"binarycrossentropy",
       [](const Tensor& a, const Tensor& b, const LossOptions& o) { return binarycrossentropy(a, b, o); }}};
  for (const auto& [name, f] : losses) {
    SCOPED_TRACE(name);
    const Tensor got = f(yhat, y, {});
    EXPECT_EQ(got.dtype(), Float32);
    const Tensor a = name == "crossentropy" ? softmax(yhat) : yhat;  // the half softmax, then widened
    const Tensor want = name == "crossentropy" ? crossentropy(a.to(Float32), onehot, {.epsilon = eps})
                                               : f(yhat.to(Float32), y.to(Float32), {.epsilon = eps});
    EXPECT_EQ(got.item<double>(), want.item<double>());
  }
  // mse's 4096 squared differences summed in the half type instead.
  const Tensor d = square(yhat - y);  // in t
  const double naive = naive_sum(d.to(Device::cpu()).to_vector<double>(), t) / 4096;
  const double right = mse(yhat, y).item<double>();
  EXPECT_GT(std::fabs(naive - right) / right, 0.01) << naive << " vs " << right;
}

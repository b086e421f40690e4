// outputsize(model, Shape): every layer's shape rule gives the shape its
// forward pass gives, refuses what the forward pass refuses with the same
// error, and computes nothing (Flux's outputsize).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;

namespace {

// The message without the throw site's " [src/...:N]".
std::string without_site(const std::string& m) { return m.substr(0, m.rfind(" [")); }

// outputsize(l, x.shape()) is the shape of l(x).
template <class L>
void expect_rule_fits(const L& l, const Tensor& x, const std::string& what) {
  EXPECT_EQ(outputsize(l, x.shape()), l(x).shape()) << what;
}

// The rule refuses shape s with the forward pass's error type and words.
template <class E, class L>
void expect_same_refusal(const L& l, const Tensor& x, const std::string& what) {
  const std::string forward = error_message<E>([&] { (void)l(x); });
  const std::string rule = error_message<E>([&] { (void)outputsize(l, x.shape()); });
  EXPECT_NE(forward, "(no error)") << what;
  EXPECT_EQ(without_site(rule), without_site(forward)) << what;
}

}  // namespace

// A layer of a user's own, with its shape rule beside it (docs/layers.md).
namespace user {
struct Vec {  // every element in one column
  flx::Tensor operator()(const flx::Tensor& x) const { return reshape(x, flx::Shape{x.numel()}); }
};
flx::Shape outputsize(const Vec&, const flx::Shape& x) { return flx::Shape{x.numel()}; }
// A connection with its own rule: a * b + a.
struct MulAdd {
  flx::Tensor operator()(const flx::Tensor& a, const flx::Tensor& b) const { return a * b + a; }
};
flx::Shape outputsize(const MulAdd&, const flx::Shape& a, const flx::Shape& b) {
  return outputsize(std::plus<>{}, a, b);
}
}  // namespace user

TEST(Outputsize, EveryLayerGivesTheShapeOfItsOutput) {
  set_seed(1);
  expect_rule_fits(Dense(3, 4), rand(3, 5), "Dense");
  expect_rule_fits(Dense(3, 4), rand(3, 5, 2), "Dense, two batch dims");
  expect_rule_fits(Scale(3), rand(3, 5), "Scale");
  expect_rule_fits(Scale(rand(1, 4), rand(1, 4)), rand(2), "Scale broadcasting to (2, 4)");
  const Bilinear bl(3, 4, 2);
  EXPECT_EQ(outputsize(bl, Shape{3, 5}, Shape{4, 5}), bl(rand(3, 5), rand(4, 5)).shape());
  EXPECT_EQ(outputsize(bl, std::make_tuple(Shape{3}, Shape{4})), bl(rand(3), rand(4)).shape());
  expect_rule_fits(Bilinear(3, 2), rand(3, 7), "Bilinear, one input");
  expect_rule_fits(Conv({3, 3}, 2, 4, relu, {.stride = 2, .pad = 1, .dilation = 2}), rand(9, 8, 2, 3), "Conv");
  expect_rule_fits(Conv({3}, 4, 4, {.pad = SamePad(), .groups = 2}), rand(7, 4, 2), "Conv, 1-d, groups");
  expect_rule_fits(CrossCor({2, 2, 2}, 1, 2), rand(4, 5, 6, 1, 2), "CrossCor, 3-d");
  expect_rule_fits(ConvTranspose({3, 3}, 2, 3, {.stride = 2, .pad = SamePad()}), rand(5, 4, 2, 1), "ConvTranspose");
  expect_rule_fits(ConvTranspose({4, 4}, 2, 3, {.stride = 3, .pad = 1}), rand(5, 4, 2, 1), "ConvTranspose, padded");
  expect_rule_fits(MaxPool({2, 2}), rand(7, 6, 3, 2), "MaxPool");
  expect_rule_fits(MeanPool({3, 3}, {.stride = 2, .pad = 1}), rand(7, 6, 3, 2), "MeanPool");
  expect_rule_fits(GlobalMaxPool(), rand(7, 6, 3, 2), "GlobalMaxPool");
  expect_rule_fits(GlobalMeanPool(), rand(7, 3, 2), "GlobalMeanPool");
  expect_rule_fits(AdaptiveMaxPool({3, 2}), rand(7, 6, 3, 2), "AdaptiveMaxPool");
  expect_rule_fits(AdaptiveMeanPool({4}), rand(9, 3, 2), "AdaptiveMeanPool");
  expect_rule_fits(Flatten(), rand(4, 3, 2, 5), "Flatten");
  expect_rule_fits(BatchNorm(3), rand(4, 4, 3, 2), "BatchNorm");
  expect_rule_fits(LayerNorm({4, 3}), rand(4, 3, 2), "LayerNorm");
  expect_rule_fits(Dropout(0.5), rand(4, 3), "Dropout");
  expect_rule_fits(AlphaDropout(0.5), rand(4, 3), "AlphaDropout");
  expect_rule_fits(Embedding(10, 3), tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}), "Embedding");
  for (const auto& x : {rand(3), rand(3, 4)}) {
    EXPECT_EQ(outputsize(RNNCell(3, 5), x.shape()), RNNCell(3, 5)(x).output.shape());
    EXPECT_EQ(outputsize(LSTMCell(3, 5), x.shape()), LSTMCell(3, 5)(x).output.shape());
    EXPECT_EQ(outputsize(GRUCell(3, 5), x.shape()), GRUCell(3, 5)(x).output.shape());
  }
  for (const auto& x : {rand(3, 6), rand(3, 6, 2)}) {
    expect_rule_fits(RNN(3, 5), x, "RNN");
    expect_rule_fits(LSTM(3, 5), x, "LSTM");
    expect_rule_fits(GRU(3, 5), x, "GRU");
  }
  const MultiHeadAttention mha(AttentionDims{4, 6, 5, 8, 4, 3}, {.nheads = 2});
  const Tensor q = rand(4, 7, 2), k = rand(6, 9, 2), v = rand(5, 9, 2);
  EXPECT_EQ(outputsize(mha, q.shape(), k.shape(), v.shape()), mha(q, k, v).first.shape());
  const MultiHeadAttention self(8, {.nheads = 4});
  EXPECT_EQ(outputsize(self, Shape{8, 5, 3}), self(rand(8, 5, 3)).first.shape());
  for (const Activation& a : {Activation(relu), Activation(softmax), Activation(flx::tanh)})
    expect_rule_fits(a, rand(3, 2), "an activation");
  expect_rule_fits(relu, rand(3, 2), "relu");
  expect_rule_fits(softmax, rand(3, 2), "softmax");
  expect_rule_fits(leakyrelu, rand(3, 2), "leakyrelu");
}

namespace {
// outputsize of layer l inside a Chain, alone and nested, is the shape of
// the Chain's output: each rule is reached through a container's, not only
// called directly (issue 39: an activation added without a place in a list
// of them, and `flatten`, a plain function, did not compile there).
template <class L>
void expect_chain_rule_fits(const L& l, const Tensor& x, const std::string& what) {
  const auto one = Chain(l);
  EXPECT_EQ(outputsize(one, x.shape()), one(x).shape()) << what;
  const auto nested = Chain(Chain(l), identity);
  EXPECT_EQ(outputsize(nested, x.shape()), nested(x).shape()) << what << ", nested";
}
}  // namespace

TEST(Outputsize, EveryLayerInsideAChainGivesTheShapeOfItsOutput) {
  set_seed(4);
  const Tensor img = rand(8, 6, 4, 2), mat = rand(4, 3), seq = rand(4, 5, 2);
  expect_chain_rule_fits(Dense(4, 2), mat, "Dense");
  expect_chain_rule_fits(Scale(4), mat, "Scale");
  expect_chain_rule_fits(Bilinear(4, 2), mat, "Bilinear");
  expect_chain_rule_fits(Conv({3, 3}, 4, 2), img, "Conv");
  expect_chain_rule_fits(CrossCor({3, 3}, 4, 2), img, "CrossCor");
  expect_chain_rule_fits(ConvTranspose({3, 3}, 4, 2, {.stride = 2}), img, "ConvTranspose");
  expect_chain_rule_fits(DepthwiseConv({3, 3}, 4, 8), img, "DepthwiseConv");
  expect_chain_rule_fits(MaxPool({2, 2}), img, "MaxPool");
  expect_chain_rule_fits(MeanPool({2, 2}), img, "MeanPool");
  expect_chain_rule_fits(GlobalMaxPool(), img, "GlobalMaxPool");
  expect_chain_rule_fits(GlobalMeanPool(), img, "GlobalMeanPool");
  expect_chain_rule_fits(AdaptiveMaxPool({2, 2}), img, "AdaptiveMaxPool");
  expect_chain_rule_fits(AdaptiveMeanPool({1, 1}), img, "AdaptiveMeanPool");
  expect_chain_rule_fits(Flatten(), img, "Flatten()");
  expect_chain_rule_fits(flatten, img, "flatten");
  expect_chain_rule_fits(BatchNorm(4), img, "BatchNorm");
  expect_chain_rule_fits(LayerNorm(8), img, "LayerNorm");
  expect_chain_rule_fits(GroupNorm(4, 2), img, "GroupNorm");
  expect_chain_rule_fits(InstanceNorm(4), img, "InstanceNorm");
  expect_chain_rule_fits(Dropout(0.5), mat, "Dropout");
  expect_chain_rule_fits(AlphaDropout(0.5), mat, "AlphaDropout");
  expect_chain_rule_fits(Embedding(10, 3), tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2}), "Embedding");
  expect_chain_rule_fits(Upsample({.scale = 2}), img, "Upsample");
  expect_chain_rule_fits(Upsample({.mode = "bilinear", .size = {9, 7}}), img, "Upsample bilinear");
  expect_chain_rule_fits(PixelShuffle(2), img, "PixelShuffle");
  expect_chain_rule_fits(WeightNorm(Dense(4, 2)), mat, "WeightNorm");
  expect_chain_rule_fits(RNN(4, 3), seq, "RNN");
  expect_chain_rule_fits(LSTM(4, 3), seq, "LSTM");
  expect_chain_rule_fits(GRU(4, 3), seq, "GRU");
  expect_chain_rule_fits(GRUv3(4, 3), seq, "GRUv3");
  expect_chain_rule_fits(Recurrence(RNNCell(4, 3)), seq, "Recurrence");
  // Every activation, and glu (dim 0 halved), softmax and logsoftmax.
  expect_chain_rule_fits(sigmoid, mat, "sigmoid");
  expect_chain_rule_fits(hardsigmoid, mat, "hardsigmoid");
  expect_chain_rule_fits(hardtanh, mat, "hardtanh");
  expect_chain_rule_fits(relu, mat, "relu");
  expect_chain_rule_fits(leakyrelu, mat, "leakyrelu");
  expect_chain_rule_fits(relu6, mat, "relu6");
  expect_chain_rule_fits(rrelu, mat, "rrelu");
  expect_chain_rule_fits(elu, mat, "elu");
  expect_chain_rule_fits(gelu, mat, "gelu");
  expect_chain_rule_fits(gelu_tanh, mat, "gelu_tanh");
  expect_chain_rule_fits(gelu_sigmoid, mat, "gelu_sigmoid");
  expect_chain_rule_fits(gelu_erf, mat, "gelu_erf");
  expect_chain_rule_fits(swish, mat, "swish");
  expect_chain_rule_fits(hardswish, mat, "hardswish");
  expect_chain_rule_fits(selu, mat, "selu");
  expect_chain_rule_fits(celu, mat, "celu");
  expect_chain_rule_fits(softplus, mat, "softplus");
  expect_chain_rule_fits(softsign, mat, "softsign");
  expect_chain_rule_fits(logsigmoid, mat, "logsigmoid");
  expect_chain_rule_fits(logcosh, mat, "logcosh");
  expect_chain_rule_fits(mish, mat, "mish");
  expect_chain_rule_fits(tanhshrink, mat, "tanhshrink");
  expect_chain_rule_fits(softshrink, mat, "softshrink");
  expect_chain_rule_fits(trelu, mat, "trelu");
  expect_chain_rule_fits(thresholdrelu, mat, "thresholdrelu");
  expect_chain_rule_fits(lisht, mat, "lisht");
  expect_chain_rule_fits(flx::tanh, mat, "tanh");
  expect_chain_rule_fits(tanh_fast, mat, "tanh_fast");
  expect_chain_rule_fits(sigmoid_fast, mat, "sigmoid_fast");
  expect_chain_rule_fits(identity, mat, "identity");
  expect_chain_rule_fits(softmax, mat, "softmax");
  expect_chain_rule_fits(logsoftmax, mat, "logsoftmax");
  expect_chain_rule_fits(glu, mat, "glu");
  expect_same_refusal<DimensionMismatch>(glu, rand(3, 2), "glu of an odd dim 0");
  // The case: torchvision's head after a backbone, flatten as Flux writes it.
  EXPECT_EQ(outputsize(Chain(AdaptiveMeanPool({1, 1})), Shape{4, 4, 512, 1}), (Shape{1, 1, 512, 1}));
  EXPECT_EQ(outputsize(Chain(Conv({3, 3}, 3, 16), Conv({3, 3}, 16, 32), flatten), Shape{10, 10, 3, 64}),
            (Shape{1152, 64}));  // outputsize.hpp's own example
  EXPECT_EQ(outputsize(Chain(SkipConnection(Conv({3, 3}, 8, 8, {.pad = 1}), std::plus<>{}), AdaptiveMeanPool({1, 1}),
                             flatten, Dense(8, 10)),
                       Shape{7, 7, 8, 2}),
            (Shape{10, 2}));
}

TEST(Outputsize, ContainersCombineTheirLayersRules) {
  set_seed(2);
  // Flux's docstring: two convolutions.
  const auto m = Chain(Conv({3, 3}, 3, 16), Conv({3, 3}, 16, 32));
  EXPECT_EQ(outputsize(m, Shape{10, 10, 3, 64}), (Shape{6, 6, 32, 64}));
  EXPECT_EQ(outputsize(m, Shape{10, 10, 3, 1}), (Shape{6, 6, 32, 1}));  // Flux's padbatch=true
  expect_rule_fits(Chain(Conv({3, 3}, 1, 4, relu), MaxPool({2, 2}), Flatten(), Dense(144, 10), softmax),
                   rand(14, 14, 1, 5), "a CNN");
  expect_rule_fits(SkipConnection(Dense(4, 4), std::plus<>{}), rand(4, 3), "SkipConnection");
  expect_rule_fits(SkipConnection(Dense(4, 1), std::multiplies<>{}), rand(4, 3), "SkipConnection, broadcasting");
  expect_rule_fits(SkipConnection(Dense(4, 6), Bilinear(6, 4, 2)), rand(4, 3), "SkipConnection, Bilinear connection");
  expect_rule_fits(SkipConnection(Dense(4, 4), user::MulAdd{}), rand(4, 3), "a connection with its own rule");
  expect_rule_fits(Parallel(std::plus<>{}, Dense(4, 2), Dense(4, 2), Dense(4, 2)), rand(4, 3), "Parallel of three");
  expect_rule_fits(Maxout(Dense(4, 3), Dense(4, 3)), rand(4, 2), "Maxout");
  expect_rule_fits(Maxout([] { return Dense(4, 3); }, 3), rand(4, 2), "Maxout(f, n)");
  expect_rule_fits(Chain(std::vector<Dense>{Dense(4, 3), Dense(3, 2)}), rand(4, 2), "Chain([...])");
  expect_rule_fits(Chain(user::Vec{}, Dense(12, 2)), rand(4, 3), "a layer with its own rule");
  // Flux's docstring: several inputs go to a Parallel as several inputs, to a
  // Chain as one tuple.
  const auto par = Parallel(std::plus<>{}, Dense(5, 9), Dense(7, 9));
  EXPECT_EQ(outputsize(par, Shape{5, 64}, Shape{7, 64}), (Shape{9, 64}));
  EXPECT_EQ(outputsize(Chain(par, Dense(9, 13), softmax), Shape{5, 1}, Shape{7, 1}), (Shape{13, 1}));
  EXPECT_EQ(outputsize(Parallel(std::plus<>{}, Dense(5, 2)), Shape{5, 3}, Shape{5, 3}, Shape{5, 3}), (Shape{2, 3}));
  // PairwiseFusion gives a tuple of shapes, as it gives a tuple of tensors.
  const auto pf = PairwiseFusion(std::plus<>{}, Dense(3, 3), Dense(3, 4));
  const auto [s1, s2] = outputsize(pf, Shape{3, 2});
  const auto [y1, y2] = pf(rand(3, 2));
  EXPECT_EQ(s1, y1.shape());
  EXPECT_EQ(s2, y2.shape());
  EXPECT_EQ(outputsize(Chain(pf, Parallel(std::multiplies<>{}, Dense(3, 1), Dense(4, 1))), Shape{3, 2}), (Shape{1, 2}));
}

TEST(Outputsize, RefusesWhatTheForwardPassRefusesInItsWords) {
  set_seed(3);
  // Flux's docstring: 7 channels into a Conv of 3.
  const auto m = Chain(Conv({3, 3}, 3, 16), Conv({3, 3}, 16, 32));
  const std::string e = error_message<DimensionMismatch>([&] { (void)outputsize(m, Shape{10, 10, 7, 64}); });
  EXPECT_TRUE(has(e, "Conv((3, 3), 3 => 16): expected 3 input channels")) << e;
  expect_same_refusal<DimensionMismatch>(std::get<0>(m.layers), rand(10, 10, 7, 2), "Conv");
  expect_same_refusal<DimensionMismatch>(Conv({3, 3}, 3, 4), rand(2, 2, 3, 1), "Conv, input smaller than the kernel");
  expect_same_refusal<DimensionMismatch>(ConvTranspose({3}, 3, 4), rand(5, 2, 1), "ConvTranspose");
  expect_same_refusal<DimensionMismatch>(Dense(3, 4), rand(5, 2), "Dense");
  expect_same_refusal<DimensionMismatch>(MaxPool({4, 4}), rand(3, 3, 1, 1), "MaxPool");
  expect_same_refusal<DimensionMismatch>(AdaptiveMaxPool({4, 4}), rand(3, 3, 1, 1), "AdaptiveMaxPool");
  expect_same_refusal<DimensionMismatch>(BatchNorm(3), rand(4, 2, 2), "BatchNorm");
  expect_same_refusal<DimensionMismatch>(LayerNorm(3), rand(4, 2), "LayerNorm");
  expect_same_refusal<DimensionMismatch>(LSTM(3, 2), rand(4, 5, 2), "LSTM");
  expect_same_refusal<DimensionMismatch>(GRUCell(3, 2), rand(4, 2), "GRUCell");
  expect_same_refusal<DimensionMismatch>(Scale(3), rand(2, 2), "Scale");
  expect_same_refusal<DimensionMismatch>(SkipConnection(Dense(2, 3), std::plus<>{}), rand(2, 4), "SkipConnection");
  expect_same_refusal<DimensionMismatch>(Maxout(Dense(2, 3), Dense(2, 4)), rand(2, 4), "Maxout");
  const auto bl = Bilinear(3, 4, 2);
  EXPECT_EQ(without_site(error_message<DimensionMismatch>([&] { (void)outputsize(bl, Shape{3, 2}, Shape{4, 5}); })),
            without_site(error_message<DimensionMismatch>([&] { (void)bl(rand(3, 2), rand(4, 5)); })));
  const auto par = Parallel(std::plus<>{}, Dense(2, 3), Dense(2, 3));
  EXPECT_EQ(
      without_site(error_message<ArgumentError>([&] { (void)outputsize(par, Shape{2, 1}, Shape{2, 1}, Shape{2, 1}); })),
      without_site(error_message<ArgumentError>([&] { (void)par(rand(2, 1), rand(2, 1), rand(2, 1)); })));
}

TEST(Outputsize, ComputesNothing) {
  // An input of 2^40 columns (4 TiB in Float32): a forward pass could not
  // even make it; the rules only multiply sizes.
  const int64_t n = int64_t(1) << 40;
  const auto m = Chain(Dense(10, 5, relu), SkipConnection(Dense(5, 5), std::plus<>{}), Dense(5, 3), softmax);
  EXPECT_EQ(outputsize(m, Shape{10, n}), (Shape{3, n}));
  EXPECT_EQ(outputsize(Chain(Conv({3, 3}, 1, 8), GlobalMeanPool(), Flatten()), Shape{1 << 20, 1 << 20, 1, 64}),
            (Shape{8, 64}));
}

// MultiHeadAttention and dot_product_attention of src/layers/attention.cpp
// (include/flx/layers/attention.hpp) on the CPU: against a reference written
// with plain loops, Float64 finite differences, masks, the additive bias,
// dropout, errors and printing as Flux's. The other devices are compared
// with the CPU by the conformance suite; PyTorch's nn.MultiheadAttention by
// tests/interop/mha_interop.py; the path without the scores (src/ops/attention*.cpp)
// by tests/test_attention_linear.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::check_gradients;
using flx::testing::error_message;
using flx::testing::expect_close;
using flx::testing::expect_message;
using flx::testing::has;
using flx::testing::message_of;
using flx::testing::rand64;
using flx::testing::shown;
using flx::testing::weighted;
using V = std::vector<Tensor>;

namespace {


// Column-major element (i0, i1, i2[, i3]) of a tensor's values.
struct Dense3 {
  std::vector<double> v;
  int64_t d0, d1;
  double at(int64_t a, int64_t b, int64_t c) const { return v[size_t(a + d0 * (b + d1 * c))]; }
};
Dense3 values3(const Tensor& t) { return {t.to_vector<double>(), t.shape()[0], t.shape()[1]}; }

// y = W x for a (out, in) weight and one column of x.
std::vector<double> project(const Tensor& w, const Dense3& x, int64_t col, int64_t batch) {
  const auto wv = w.to_vector<double>();
  const int64_t out = w.shape()[0], in = w.shape()[1];
  std::vector<double> y(size_t(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[size_t(o)] += wv[size_t(o + out * i)] * x.at(i, col, batch);
  return y;
}

// The reference: every head, query and key by the definition, in double.
// Returns y (out, q_len, batch) and α (kv_len, q_len, nheads, batch) as
// flat column-major vectors.
std::pair<std::vector<double>, std::vector<double>> reference(const MultiHeadAttention& m, const Tensor& q,
                                                              const Tensor& k, const Tensor& v, bool causal) {
  const Dense3 Q = values3(q), K = values3(k), Vv = values3(v);
  const int64_t qlen = q.shape()[1], kvlen = k.shape()[1], batch = q.shape()[2], h = m.nheads;
  const int64_t qk = m.q_proj.weight.shape()[0], vd = m.v_proj.weight.shape()[0], out = m.out_proj.weight.shape()[0];
  const int64_t dq = qk / h, dv = vd / h;
  std::vector<double> y(size_t(out * qlen * batch)), alpha(size_t(kvlen * qlen * h * batch));
  const auto wo = m.out_proj.weight.to_vector<double>();
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<std::vector<double>> pq, pk, pv;
    for (int64_t i = 0; i < qlen; ++i) pq.push_back(project(m.q_proj.weight, Q, i, b));
    for (int64_t j = 0; j < kvlen; ++j) {
      pk.push_back(project(m.k_proj.weight, K, j, b));
      pv.push_back(project(m.v_proj.weight, Vv, j, b));
    }
    for (int64_t i = 0; i < qlen; ++i) {
      std::vector<double> x(size_t(vd), 0.0);
      for (int64_t hd = 0; hd < h; ++hd) {
        std::vector<double> s(static_cast<size_t>(kvlen));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < kvlen; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dq; ++d) dot += pk[size_t(j)][size_t(hd * dq + d)] * pq[size_t(i)][size_t(hd * dq + d)];
          s[size_t(j)] = causal && j > i ? -std::numeric_limits<double>::infinity() : dot / std::sqrt(double(dq));
          mx = std::max(mx, s[size_t(j)]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j < kvlen; ++j) {
          const double a = s[size_t(j)] / z;
          alpha[size_t(j + kvlen * (i + qlen * (hd + h * b)))] = a;
          for (int64_t d = 0; d < dv; ++d) x[size_t(hd * dv + d)] += a * pv[size_t(j)][size_t(hd * dv + d)];
        }
      }
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0;
        for (int64_t c = 0; c < vd; ++c) acc += wo[size_t(o + out * c)] * x[size_t(c)];
        y[size_t(o + out * (i + qlen * b))] = acc;
      }
    }
  }
  return {y, alpha};
}

// A MultiHeadAttention with Float64 weights drawn from the seed.
MultiHeadAttention f64_mha(const AttentionDims& d, int64_t nheads, uint64_t seed) {
  set_seed(seed);
  MultiHeadAttention m(d, {.nheads = nheads});
  for (Dense* p : {&m.q_proj, &m.k_proj, &m.v_proj, &m.out_proj})
    p->weight = rand64({p->weight.shape()[0], p->weight.shape()[1]});
  return m;
}

}  // namespace

TEST(Attention, MatchesTheDefinition) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "unmasked");
    // (q_in, k_in, v_in) => (qk, v) => out, 2 heads, keys longer than queries unless causal
    const AttentionDims d{5, 3, 4, 6, 8, 7};
    const MultiHeadAttention m = f64_mha(d, 2, 3);
    const int64_t qlen = 4, kvlen = causal ? 4 : 6, batch = 3;
    const Tensor q = rand64({5, qlen, batch}), k = rand64({3, kvlen, batch}), v = rand64({4, kvlen, batch});
    auto [y, alpha] = m(q, k, v, {.causal = causal});
    EXPECT_EQ(y.shape(), (Shape{7, qlen, batch}));
    EXPECT_EQ(alpha.shape(), (Shape{kvlen, qlen, 2, batch}));
    const auto [ry, ralpha] = reference(m, q, k, v, causal);
    flx::testing::expect_values(y, ry, 1e-12, "y");
    flx::testing::expect_values(alpha, ralpha, 1e-12, "alpha");
  }
}

TEST(Attention, SelfAttentionAndSharedKeysAndValues) {
  const MultiHeadAttention m = f64_mha(AttentionDims::all(8), 4, 5);
  const Tensor x = rand64({8, 5, 2}), kv = rand64({8, 3, 2});
  EXPECT_EQ(m(x).first.to_vector<double>(), m(x, x, x).first.to_vector<double>());
  EXPECT_EQ(m(x, kv).first.to_vector<double>(), m(x, kv, kv).first.to_vector<double>());
}

TEST(Attention, CausalMaskSeesOnlyEarlierKeys) {
  const MultiHeadAttention m = f64_mha(AttentionDims::all(4), 2, 6);
  const Tensor x = rand64({4, 5, 2});
  const Tensor mask = make_causal_mask(x);
  EXPECT_EQ(mask.shape(), (Shape{5, 5}));
  EXPECT_EQ(mask.dtype(), Bool);
  const auto mv = mask.to_vector<double>();
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(mv[size_t(j + 5 * i)], j <= i ? 1.0 : 0.0) << j << ", " << i;
  // The option and the explicit mask agree; weights past the query are 0, each query's sum to 1.
  const auto [y1, a1] = m(x, {.causal = true});
  const auto [y2, a2] = m(x, {.mask = mask});
  EXPECT_EQ(y1.to_vector<double>(), y2.to_vector<double>());
  const auto av = a1.to_vector<double>();
  for (int64_t rest = 0; rest < 5 * 2 * 2; ++rest) {  // (query, head, batch)
    const int64_t i = rest % 5;
    double s = 0;
    for (int64_t j = 0; j < 5; ++j) {
      const double a = av[size_t(j + 5 * rest)];
      if (j > i) EXPECT_EQ(a, 0.0);
      s += a;
    }
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
  // A mask and the causal option together: both apply.
  std::vector<uint8_t> keep(5, 1);
  keep[0] = 0;  // no query may see key 0 (query 0 then sees nothing: NaN, as NNlib's softmax of -Inf)
  const Tensor no_first = from_host(keep.data(), Bool, Shape{5, 1});
  const auto a3 = m(x, {.mask = no_first, .causal = true}).second.to_vector<double>();
  EXPECT_EQ(a3[size_t(0 + 5 * 1)], 0.0);             // query 1, key 0: masked
  EXPECT_NEAR(a3[size_t(1 + 5 * 1)], 1.0, 1e-12);    // query 1 sees key 1 alone
  EXPECT_EQ(a3[size_t(2 + 5 * 1)], 0.0);             // key 2 after query 1: causal
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  const AttentionDims d{4, 3, 5, 4, 6, 3};
  const MultiHeadAttention m0 = f64_mha(d, 2, 7);
  const Tensor c = rand64({3, 3, 2});  // random cotangents for y (3, q_len 3, batch 2)
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "unmasked");
    const int64_t kvlen = causal ? 3 : 4;
    const Tensor ca = rand64({kvlen, 3, 2, 2});  // and for the attention weights
    auto f = [&](const V& v) {
      MultiHeadAttention m = m0;
      m.q_proj.weight = v[3];
      m.k_proj.weight = v[4];
      m.v_proj.weight = v[5];
      m.out_proj.weight = v[6];
      auto [y, alpha] = m(v[0], v[1], v[2], {.causal = causal});
      return sum(y * c) + sum(alpha * ca);
    };
    const Tensor q = rand64({4, 3, 2}), k = rand64({3, kvlen, 2}), v = rand64({5, kvlen, 2});
    check_gradients(f, {q, k, v, m0.q_proj.weight, m0.k_proj.weight, m0.v_proj.weight, m0.out_proj.weight}, 1e-6);
  }
  // With biases.
  set_seed(8);
  MultiHeadAttention mb(AttentionDims::all(4), {.nheads = 2, .bias = true});
  for (Dense* p : {&mb.q_proj, &mb.k_proj, &mb.v_proj, &mb.out_proj}) {
    p->weight = rand64({4, 4});
    p->bias = rand64({4});
  }
  const Tensor cb = rand64({4, 3, 2});
  check_gradients(
      [&](const V& v) {
        MultiHeadAttention m = mb;
        m.q_proj.bias = v[1];
        m.k_proj.bias = v[2];
        m.v_proj.bias = v[3];
        m.out_proj.bias = v[4];
        return sum(m(v[0]).first * cb);
      },
      {rand64({4, 3, 2}), mb.q_proj.bias, mb.k_proj.bias, mb.v_proj.bias, mb.out_proj.bias}, 1e-6);
}

TEST(Attention, DropoutOnTheWeightsWhileTraining) {
  set_seed(9);
  MultiHeadAttention m(AttentionDims::all(4), {.nheads = 1, .dropout_prob = 0.5});
  const Tensor x = rand(Float32, {4, 6, 2});
  // Inference (outside gradient): no dropout, the same every call, rows sum to 1.
  const auto a = m(x).second.to_vector<double>();
  EXPECT_EQ(a, m(x).second.to_vector<double>());
  for (size_t col = 0; col < a.size() / 6; ++col) {
    double s = 0;
    for (size_t j = 0; j < 6; ++j) s += a[col * 6 + j];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  // Training: some weights zeroed, the others scaled by 2 (1 / (1 - p)).
  const auto t = trainmode(m)(x).second.to_vector<double>();
  size_t zeros_ = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0) ++zeros_;
    else EXPECT_NEAR(t[i], 2 * a[i], 1e-5) << i;
  }
  EXPECT_GT(zeros_, t.size() / 5);
  EXPECT_LT(zeros_, t.size() * 4 / 5);
}

TEST(Attention, DefaultsAndPrintingAsFlux) {
  const MultiHeadAttention m(64);
  EXPECT_EQ(m.nheads, 8);
  EXPECT_FALSE(m.q_proj.bias.defined());  // Flux's bias = false
  EXPECT_EQ(m.q_proj.weight.shape(), (Shape{64, 64}));
  EXPECT_EQ(shown(m), "MultiHeadAttention(64 => 64 => 64, nheads=8)  # 16_384 parameters");
  EXPECT_EQ(shown(MultiHeadAttention(AttentionDims{6, 4, 5, 8, 12, 3}, {.nheads = 4, .bias = true})),
            "MultiHeadAttention((6, 4, 5) => (8, 12) => 3, nheads=4, bias=true)  # 207 parameters");
  EXPECT_EQ(leaves(m, true).size(), 4u);  // the four weights train
  // Moves with the model, its parameters named as Flux's fields.
  const State s = state(MultiHeadAttention(8, {.nheads = 2, .bias = true}));
  EXPECT_TRUE(s.contains("q_proj.weight") && s.contains("out_proj.bias"));
}

TEST(Attention, ErrorsNameTheLayerAndTheShapes) {
  const MultiHeadAttention m(AttentionDims::all(8), {.nheads = 2});
  std::string e = error_message<DimensionMismatch>([&] { m(rand(Float32, {6, 5, 2})); });
  EXPECT_NE(e.find("MultiHeadAttention(8 => 8 => 8, nheads=2)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected the queries of shape (8, length, batch)"), std::string::npos) << e;
  EXPECT_NE(e.find("6×5×2"), std::string::npos) << e;
  e = error_message<DimensionMismatch>([&] { m(rand(Float32, {8, 5})); });
  EXPECT_NE(e.find("8×5"), std::string::npos) << e;
  e = error_message<DimensionMismatch>([&] { m(rand(Float32, {8, 5, 2}), rand(Float32, {8, 4, 3})); });
  EXPECT_NE(e.find("same batch size"), std::string::npos) << e;
  e = error_message<DimensionMismatch>([&] { m(rand(Float32, {8, 5, 2}), rand(Float32, {8, 4, 2}), AttentionOptions{.causal = true}); });
  EXPECT_NE(e.find("a causal mask needs queries and keys of one length; got 5 and 4"), std::string::npos) << e;
  e = error_message<TypeError>([&] { m(rand(Float32, {8, 5, 2}), AttentionOptions{.mask = ones(Float32, {5, 5})}); });
  EXPECT_NE(e.find("the mask must be Bool"), std::string::npos) << e;
  e = error_message<ArgumentError>([] { MultiHeadAttention(AttentionDims::all(10), {.nheads = 4}); });
  EXPECT_NE(e.find("nheads = 4 must divide qk_dim (10) and v_dim (10)"), std::string::npos) << e;
  e = error_message<ArgumentError>([] { MultiHeadAttention(8, {.nheads = 2, .dropout_prob = 1.5}); });
  EXPECT_NE(e.find("dropout_prob must lie in [0, 1]"), std::string::npos) << e;
  e = error_message<ArgumentError>([] { dot_product_attention(rand(Float32, {6, 2, 1}), rand(Float32, {6, 2, 1}), rand(Float32, {4, 2, 1}), 4); });
  EXPECT_NE(e.find("nheads 4 must divide"), std::string::npos) << e;
}

TEST(Attention, PyTorchStateLoadsThroughTorchToMha) {
  // PyTorch's names and stacked in-projection, made here: the split is
  // row blocks of in_proj_weight [3E, E] (as load() reads it: that shape).
  const int64_t e = 4;
  const Tensor in_w = rand64({3 * e, e}), in_b = rand64({3 * e}), out_w = rand64({e, e}), out_b = rand64({e});
  State s;
  s.insert("attn.in_proj_weight", in_w);
  s.insert("attn.in_proj_bias", in_b);
  s.insert("attn.out_proj.weight", out_w);
  s.insert("attn.out_proj.bias", out_b);
  const State f = torch_to_mha(s, "attn.");
  const auto w = in_w.to_vector<double>(), b = in_b.to_vector<double>();
  const char* names[] = {"attn.q_proj", "attn.k_proj", "attn.v_proj"};
  for (int p = 0; p < 3; ++p) {
    const auto pw = f.at(std::string(names[p]) + ".weight").to_vector<double>();
    const auto pb = f.at(std::string(names[p]) + ".bias").to_vector<double>();
    for (int64_t r = 0; r < e; ++r) {
      EXPECT_EQ(pb[size_t(r)], b[size_t(p * e + r)]);
      for (int64_t c = 0; c < e; ++c)  // column-major (out, in)
        EXPECT_EQ(pw[size_t(r + e * c)], w[size_t(p * e + r + 3 * e * c)]) << p << " " << r << " " << c;
    }
  }
  EXPECT_EQ(f.at("attn.out_proj.weight").to_vector<double>(), out_w.to_vector<double>());
  State kv = s;
  kv.insert("attn.bias_k", rand64({1, 1, e}));
  const std::string m = error_message<ArgumentError>([&] { torch_to_mha(kv, "attn."); });
  EXPECT_NE(m.find("add_bias_kv"), std::string::npos) << m;
}

// ---- MultiHeadAttention's additive bias ---------------------------------------------

TEST(MultiHeadAttentionBias, IsAddedToTheLogitsAsFluxsFourthArgument) {
  set_seed(15);
  const MultiHeadAttention m = f64(MultiHeadAttention(AttentionDims{4, 4, 4, 4, 6, 3}, {.nheads = 2}));
  const Tensor q = rand64({4, 5, 2}), k = rand64({4, 7, 2}), bias = rand64({7, 5, 2, 1}, -2, 2);
  auto [y, a] = m(q, k, k, bias);
  auto [y2, a2] = m(q, k, k, {.bias = bias});
  expect_close(y, y2, 0);
  expect_close(a, a2, 0);
  // The same as dot_product_attention of the projections with that bias, not as without.
  auto [x, alpha] = dot_product_attention(m.q_proj(q), m.k_proj(k), m.v_proj(k), 2, {.bias = bias});
  expect_close(y, m.out_proj(x), 1e-12);
  expect_close(a, alpha, 1e-12);
  EXPECT_GT(sum(abs(m(q, k, k).first - y)).item<double>(), 1e-3);
  // Without the scores (memory linear in the length), the same output.
  expect_close(m(q, k, k, bias, {.scores = false}).first, y, 1e-10);
  // Differentiable in the bias and the weights.
  check_gradients(
      [&](const V& v) {
        MultiHeadAttention mm = m;
        mm.q_proj.weight = v[0];
        return weighted(mm(q, k, k, v[1], {.causal = false}).first, 16);
      },
      {m.q_proj.weight, rand64({7, 5, 2, 1})}, 1e-6, 1e-6, "MultiHeadAttention bias");
}

TEST(MultiHeadAttentionBias, ABadOrDoubledBiasIsATypedError) {
  const MultiHeadAttention m(4, {.nheads = 2});
  const Tensor x = rand({4, 5, 2});
  expect_message<ArgumentError>([&] { m(x, x, x, rand(5, 5), {.bias = rand(5, 5)}); },
                  "MultiHeadAttention(4 => 4 => 4, nheads=2): the bias is given twice");
  const std::string s = message_of<DimensionMismatch>([&] { m(x, x, x, rand(5, 4)); });
  EXPECT_TRUE(has(s, "MultiHeadAttention(4 => 4 => 4, nheads=2): the bias must have the shape (kv_len, q_len, "
                     "nheads, batch) = (5, 5, 2, 2) or broadcast to it")) << s;
  expect_message<TypeError>([&] { m(x, x, x, ones(Int32, Shape{5, 5})); }, "the bias must be a floating");
}

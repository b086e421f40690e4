// dot_product_attention with `.scores = false` (src/ops/attention.hpp): the
// CPU's own kernel (the dnn table's attention_*) and the tiled path through
// the compute table (FLX_ATTENTION_LIBRARY=0; also with tiles of 16 keys, so
// that short sequences end in ragged tiles) against the materialising path,
// forward and every gradient, in Float64; dropout drawn in pieces against
// dropout drawn whole; memory that grows linearly with the sequence; finite
// differences; `.bias`; and the errors of a mask or bias that does not fit.
// Other devices against the CPU: tests/test_conformance.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_attention_math.hpp"
#include "devices/registry.hpp"
#include "flx/flx.hpp"
#include "ops/attention.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;
using flx::testing::rand64;
using V = std::vector<Tensor>;

namespace {

enum class Path { Kernel, Tiled, TiledSmall };
const char* name(Path p) { return p == Path::Kernel ? "the CPU's kernel" : p == Path::Tiled ? "tiles of 256 keys" : "tiles of 16 keys"; }
constexpr Path kPaths[] = {Path::Kernel, Path::Tiled, Path::TiledSmall};

// Runs `.scores = false` on one path while it lives.
struct PathScope {
  explicit PathScope(Path p) {
    ops::set_attention_library(p == Path::Kernel);
    ops::set_attention_key_tile(p == Path::TiledSmall ? 16 : 0);
  }
  ~PathScope() {
    ops::set_attention_library(true);
    ops::set_attention_key_tile(0);
  }
};

// A Bool tensor of `shape` from a predicate of the column-major index.
template <class F>
Tensor bools(const Shape& shape, F&& keep) {
  std::vector<uint8_t> v(static_cast<size_t>(shape.numel()));
  for (size_t e = 0; e < v.size(); ++e) v[e] = keep(int64_t(e)) ? 1 : 0;
  return from_host(v.data(), Bool, shape);
}
// A random mask of `shape` whose first dim is keys; key 0 is always allowed,
// so that no query row is left without keys.
Tensor random_mask(const Shape& shape, uint64_t seed) {
  set_seed(seed);
  const auto r = rand(Float64, shape).to_vector<double>();
  return bools(shape, [&](int64_t e) { return e % shape[0] == 0 || r[size_t(e)] > 0.3; });
}

struct Problem {
  int64_t nheads, q_len, kv_len, batch, dq = 4, dv = 5;
  Tensor mask, bias;
  bool causal = false;
  DType t = Float64;
};

struct Inputs {
  Tensor q, k, v, bias, c;  // c: the output's cotangent
};
Inputs inputs(const Problem& p, uint64_t seed) {
  set_seed(seed);
  auto r = [&](const Shape& s) { return (rand(Float64, s) * 2.0 - 1.0).to(p.t); };
  Inputs in{r({p.dq * p.nheads, p.q_len, p.batch}), r({p.dq * p.nheads, p.kv_len, p.batch}),
            r({p.dv * p.nheads, p.kv_len, p.batch}), p.bias, r({p.dv * p.nheads, p.q_len, p.batch})};
  return in;
}

struct Result {
  Tensor y;
  V grads;  // q, k, v[, bias]
};
Result run(const Problem& p, const Inputs& in, bool scores, const Dropout* drop = nullptr) {
  const bool with_bias = in.bias.defined();
  auto f = [&](const V& x) {
    const AttentionOptions o{.mask = p.mask, .causal = p.causal, .bias = with_bias ? x[3] : Tensor{}, .scores = scores};
    auto [y, alpha] = dot_product_attention(x[0], x[1], x[2], p.nheads, o, drop);
    EXPECT_EQ(alpha.defined(), scores);
    return y;
  };
  V xs{in.q, in.k, in.v};
  if (with_bias) xs.push_back(in.bias);
  Result r;
  r.y = f(xs);
  r.grads = std::get<0>(gradient([&](const V& x) { return sum(f(x) * in.c); }, xs));
  return r;
}

void expect_same(const Result& got, const Result& want, double tol, const std::string& what) {
  flx::testing::expect_close(got.y, want.y, tol, what + ": the output");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  const char* names[] = {"dq", "dk", "dv", "dbias"};
  for (size_t i = 0; i < got.grads.size(); ++i) {
    ASSERT_TRUE(got.grads[i].defined()) << what << " " << names[i];
    EXPECT_EQ(got.grads[i].dtype(), want.grads[i].dtype()) << what << " " << names[i];
    flx::testing::expect_close(got.grads[i], want.grads[i], tol, what + ": " + names[i]);
  }
}

std::string describe(const Problem& p) {
  std::ostringstream os;
  os << "q_len " << p.q_len << ", kv_len " << p.kv_len << ", " << p.nheads << " heads, batch " << p.batch;
  if (p.mask.defined()) os << ", mask " << p.mask.shape();
  if (p.bias.defined()) os << ", bias " << p.bias.shape();
  if (p.causal) os << ", causal";
  return os.str();
}

// Every path against the materialising one.
void expect_paths_match(const Problem& p, double tol = 1e-10) {
  const Inputs in = inputs(p, uint64_t(p.q_len * 131 + p.kv_len * 7 + p.nheads));
  const Result want = run(p, in, true);
  for (Path path : kPaths) {
    PathScope scope(path);
    expect_same(run(p, in, false), want, tol, describe(p) + " on " + name(path));
  }
}

}  // namespace

TEST(AttentionLinear, OptionsSpellAsDesignatedInitialisers) {
  const AttentionOptions o{.causal = true, .scores = false};
  EXPECT_TRUE(o.causal);
  EXPECT_FALSE(o.scores);
  EXPECT_FALSE(o.mask.defined());
  EXPECT_FALSE(o.bias.defined());
  EXPECT_TRUE(AttentionOptions{}.scores);  // α is returned by default, as NNlib's
  set_seed(1);
  const MultiHeadAttention mha(8, {.nheads = 2});
  const Tensor x = rand(Float32, {8, 5, 3});
  auto [y, alpha] = mha(x, {.causal = true, .scores = false});
  EXPECT_EQ(y.shape(), (Shape{8, 5, 3}));
  EXPECT_FALSE(alpha.defined());
  flx::testing::expect_close(y, mha(x, {.causal = true}).first, 1e-5, "MultiHeadAttention without its scores");
}

TEST(AttentionLinear, EqualsTheMaterialisingPathUnmasked) {
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {7, 7}, {33, 33}, {300, 300}, {7, 33}, {33, 7}, {1, 300}, {300, 1}};
  for (auto [lq, lk] : lengths) expect_paths_match({.nheads = 3, .q_len = lq, .kv_len = lk, .batch = 2});
}

TEST(AttentionLinear, EqualsTheMaterialisingPathCausal) {
  for (int64_t len : {1, 7, 33, 300}) expect_paths_match({.nheads = 2, .q_len = len, .kv_len = len, .batch = 2, .causal = true});
}

TEST(AttentionLinear, EqualsTheMaterialisingPathWithMasksAndBiases) {
  set_seed(3);
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{7, 33}, {33, 7}, {300, 300}, {1, 7}}) {
    const int64_t h = 2, b = 2;
    // A mask over (key, query) for every head and sequence; a bias per head
    // broadcast over... the batch, and one per sequence broadcast over heads.
    expect_paths_match({.nheads = h, .q_len = lq, .kv_len = lk, .batch = b, .mask = random_mask({lk, lq}, 5),
                        .bias = rand64({lk, lq, 1, b})});
    expect_paths_match({.nheads = h, .q_len = lq, .kv_len = lk, .batch = b, .mask = random_mask({lk, lq, h, b}, 6),
                        .bias = rand64({lk, lq, h, b})});
    // A padding mask (keys per sequence), a bias per key (ALiBi-like) and per query.
    expect_paths_match({.nheads = h, .q_len = lq, .kv_len = lk, .batch = b, .mask = random_mask({lk, 1, 1, b}, 7),
                        .bias = rand64({lk})});
    expect_paths_match({.nheads = h, .q_len = lq, .kv_len = lk, .batch = b, .bias = rand64({1, lq, h})});
  }
  // With the causal mask as well.
  for (int64_t len : {7, 33, 300})
    expect_paths_match({.nheads = 2, .q_len = len, .kv_len = len, .batch = 2, .mask = random_mask({len, len, 2, 2}, 8),
                        .bias = rand64({len, len, 1, 2}), .causal = true});
}

TEST(AttentionLinear, Float32AndHalvesFollowTheMaterialisingPath) {
  // Float32: a few ulps of the products' sums; halves are computed in float
  // from the half inputs and rounded once, the materialising path rounds at
  // every op: a few half ulps apart.
  for (auto [t, tol] : {std::pair{Float32, 2e-5}, std::pair{Float16, 2e-2}, std::pair{BFloat16, 1e-1}}) {
    SCOPED_TRACE(dtype_name(t));
    Problem p{.nheads = 2, .q_len = 33, .kv_len = 40, .batch = 2, .mask = random_mask({40, 33}, 9), .bias = Tensor{}, .t = t};
    p.bias = (rand64({40, 33, 1, 2}) * 0.5).to(t);
    const Inputs in = inputs(p, 10);
    const Result want = run(p, in, true);
    for (Path path : kPaths) {
      PathScope scope(path);
      expect_same(run(p, in, false), want, tol, std::string(dtype_name(t)) + " on " + name(path));
    }
  }
}

TEST(AttentionLinear, RowsWithoutKeysAreNaNAsTheSoftmaxOfNothing) {
  // Query 2 may see no key: its output is NaN on every path (NNlib's
  // softmax of a row of -Inf), the other queries are unaffected.
  const int64_t lq = 5, lk = 6;
  const Tensor mask = bools({lk, lq}, [&](int64_t e) { return e / lk != 2; });
  set_seed(11);
  const Tensor q = rand64({4, lq, 1}), k = rand64({4, lk, 1}), v = rand64({3, lk, 1});
  const auto want = dot_product_attention(q, k, v, 1, {.mask = mask}).first.to_vector<double>();
  for (Path path : kPaths) {
    PathScope scope(path);
    const auto got = dot_product_attention(q, k, v, 1, {.mask = mask, .scores = false}).first.to_vector<double>();
    for (size_t e = 0; e < got.size(); ++e) {
      if (e / 3 == 2) EXPECT_TRUE(std::isnan(got[e])) << name(path) << " " << e;
      else EXPECT_NEAR(got[e], want[e], 1e-12) << name(path) << " " << e;
    }
  }
}

TEST(AttentionLinear, DropoutDropsWhatTheMaterialisingPathDrops) {
  // One seed, the same weights dropped: the uniform draws of each tile are
  // elements of the one fill the materialising path's Dropout makes, and the
  // generator moves on by one fill in both.
  const Dropout drop(0.3);
  for (bool causal : {false, true}) {
    const int64_t len = 37;
    const Problem p{.nheads = 2, .q_len = len, .kv_len = causal ? len : 45, .batch = 2,
                    .mask = causal ? Tensor{} : random_mask({45, len}, 12), .bias = rand64({causal ? len : 45, len, 2, 1}),
                    .causal = causal};
    const Inputs in = inputs(p, 13);
    auto training = [&](bool scores) {
      set_seed(77);
      auto [l, g] = withgradient([&](const V& x) {
        const AttentionOptions o{.mask = p.mask, .causal = p.causal, .bias = x[3], .scores = scores};
        return sum(dot_product_attention(x[0], x[1], x[2], p.nheads, o, &drop).first * in.c);
      }, V{in.q, in.k, in.v, in.bias});
      const double next = rand(Float64, {1}).item<double>();  // where the generator went on
      return std::tuple{l.item<double>(), std::get<0>(g), next};
    };
    const auto [l0, g0, next0] = training(true);
    // Dropout changed the result (the test would pass without it otherwise).
    set_seed(77);
    const double undropped = sum(dot_product_attention(in.q, in.k, in.v, p.nheads,
                                                       {.mask = p.mask, .causal = p.causal, .bias = in.bias}).first * in.c).item<double>();
    EXPECT_GT(std::fabs(undropped - l0), 1e-3);
    for (Path path : kPaths) {
      PathScope scope(path);
      const auto [l1, g1, next1] = training(false);
      const std::string what = std::string(causal ? "causal" : "masked") + " on " + name(path);
      EXPECT_NEAR(l1, l0, 1e-10 * std::max(1.0, std::fabs(l0))) << what;
      EXPECT_EQ(next1, next0) << what << ": the generator moved on differently";
      const char* names[] = {"dq", "dk", "dv", "dbias"};
      for (size_t i = 0; i < 4; ++i) flx::testing::expect_close(g1[i], g0[i], 1e-10, what + " " + names[i]);
    }
  }
  // Outside gradient (inference) Dropout does nothing, and draws nothing.
  set_seed(5);
  const Tensor q = rand64({4, 6, 1});
  const auto plain = dot_product_attention(q, q, q, 2, {.scores = false}).first.to_vector<double>();
  EXPECT_EQ(dot_product_attention(q, q, q, 2, {.scores = false}, &drop).first.to_vector<double>(), plain);
}

TEST(AttentionLinear, EmptySizesGiveWhatTheMaterialisingPathGives) {
  // No query, no key (the empty product: zeros), no sequence, no feature.
  const Problem problems[] = {{.nheads = 2, .q_len = 0, .kv_len = 5, .batch = 2},
                              {.nheads = 2, .q_len = 4, .kv_len = 0, .batch = 2},
                              {.nheads = 2, .q_len = 4, .kv_len = 5, .batch = 0},
                              {.nheads = 2, .q_len = 4, .kv_len = 5, .batch = 2, .dq = 0},
                              {.nheads = 2, .q_len = 4, .kv_len = 5, .batch = 2, .dv = 0}};
  for (const Problem& p : problems) {
    const Inputs in = inputs(p, 14);
    const Result want = run(p, in, true);
    for (Path path : kPaths) {
      PathScope scope(path);
      expect_same(run(p, in, false), want, 1e-12, describe(p) + ", dq " + std::to_string(p.dq) + ", dv " +
                                                      std::to_string(p.dv) + " on " + name(path));
    }
  }
}

TEST(AttentionLinear, GradientsMatchFiniteDifferences) {
  set_seed(15);
  const Tensor mask = random_mask({6, 5, 1, 2}, 16);
  const Tensor c = rand64({6, 5, 2});
  for (Path path : {Path::Kernel, Path::TiledSmall}) {
    PathScope scope(path);
    ops::set_attention_key_tile(path == Path::TiledSmall ? 4 : 0);  // two tiles, the second ragged
    for (bool causal : {false, true}) {
      const int64_t lk = causal ? 5 : 6;
      const Tensor m = causal ? Tensor{} : mask;
      flx::testing::check_gradients(
          [&](const V& x) {
            return sum(dot_product_attention(x[0], x[1], x[2], 2, {.mask = m, .causal = causal, .bias = x[3], .scores = false}).first * c);
          },
          {rand64({4, 5, 2}), rand64({4, lk, 2}), rand64({6, lk, 2}), rand64({lk, 5, 1, 2})}, 1e-7, 1e-6,
          std::string(name(path)) + (causal ? ", causal" : ", masked"));
    }
  }
}

TEST(AttentionLinear, PeakMemoryGrowsLinearlyWithTheSequence) {
  // Forward and backward of 4 heads of 16 features, batch 2, Float32: the
  // CPU's peak bytes in use during the step, at 512 and 2048 keys and
  // queries. α alone would be 16× larger at 2048; without it, inputs,
  // outputs, gradients and the log-sum-exp grow 4×, and the tiled path's
  // tiles (256 keys × every query) too.
  const Device cpu = Device::cpu();
  auto peak = [&](int64_t len) {
    set_seed(17);
    const Tensor q = rand(Float32, {64, len, 2}), k = rand(Float32, {64, len, 2}), v = rand(Float32, {64, len, 2});
    const Tensor c = rand(Float32, {64, len, 2});
    detail::reset_memory_peak(cpu);
    const int64_t before = memory_stats(cpu).in_use;
    auto g = gradient([&](const Tensor& a, const Tensor& b, const Tensor& d) {
      return sum(dot_product_attention(a, b, d, 4, {.causal = true, .scores = false}).first * c);
    }, q, k, v);
    EXPECT_TRUE(std::get<0>(g).defined());
    return memory_stats(cpu).peak - before;
  };
  for (Path path : {Path::Kernel, Path::Tiled}) {
    PathScope scope(path);
    const int64_t small = peak(512), large = peak(2048);
    const int64_t alpha = 2048 * 2048 * 4 * 2 * 4;  // α of the long sequence, in bytes
    EXPECT_LT(double(large) / double(small), 6.0) << name(path) << ": " << small << " and " << large << " bytes";
    EXPECT_LT(large, path == Path::Kernel ? alpha / 20 : alpha / 2) << name(path) << ": " << large << " bytes";
    RecordProperty(std::string("peak_bytes_") + (path == Path::Kernel ? "kernel" : "tiled"),
                   std::to_string(small) + " at 512, " + std::to_string(large) + " at 2048");
  }
}

TEST(AttentionLinear, MasksAndBiasesThatDoNotFitSayWhatWasExpected) {
  set_seed(18);
  const Tensor q = rand(Float32, {8, 5, 3}), k = rand(Float32, {8, 6, 3}), v = rand(Float32, {8, 6, 3});
  for (bool scores : {true, false}) {
    SCOPED_TRACE(scores ? "with scores" : "without");
    auto msg = [&]<class E>(E*, const AttentionOptions& o) {
      AttentionOptions oo = o;
      oo.scores = scores;
      return error_message<E>([&] { dot_product_attention(q, k, v, 2, oo); });
    };
    // Expected (kv_len, q_len, nheads, batch) = (6, 5, 2, 3).
    std::string e = msg((DimensionMismatch*)nullptr, {.mask = ones(Bool, {6, 5, 2, 3, 1}) > 0});
    EXPECT_TRUE(has(e, "dot_product_attention: the mask must have the shape (kv_len, q_len, nheads, batch) = (6, 5, 2, 3)")) << e;
    EXPECT_TRUE(has(e, "got shape (6×5×2×3×1)")) << e;
    e = msg((DimensionMismatch*)nullptr, {.mask = ones(Bool, {5, 6}) > 0});  // (q_len, kv_len): transposed
    EXPECT_TRUE(has(e, "the mask must have the shape (kv_len, q_len, nheads, batch) = (6, 5, 2, 3)") && has(e, "got shape (5×6)")) << e;
    e = msg((TypeError*)nullptr, {.mask = ones(Float32, {6, 5})});
    EXPECT_TRUE(has(e, "dot_product_attention: the mask must be Bool") && has(e, "(6, 5, 2, 3)") && has(e, "Float32 of shape (6×5)")) << e;
    e = msg((DimensionMismatch*)nullptr, {.bias = ones(Float32, {6, 5, 3})});  // batch where the heads go
    EXPECT_TRUE(has(e, "dot_product_attention: the bias must have the shape (kv_len, q_len, nheads, batch) = (6, 5, 2, 3)") &&
                has(e, "got shape (6×5×3)")) << e;
    e = msg((TypeError*)nullptr, {.bias = ones(Int32, {6, 5})});
    EXPECT_TRUE(has(e, "dot_product_attention: the bias must be a floating tensor") && has(e, "Int32 of shape (6×5)")) << e;
    e = msg((TypeError*)nullptr, {.bias = ones(Bool, {6})});
    EXPECT_TRUE(has(e, "the bias must be a floating tensor")) << e;
  }
  // The layer names itself.
  const MultiHeadAttention m(8, {.nheads = 2});
  std::string e = error_message<DimensionMismatch>([&] { m(q, {.bias = ones(Float32, {5, 5, 4}), .scores = false}); });
  EXPECT_TRUE(has(e, "MultiHeadAttention(8 => 8 => 8, nheads=2): the bias must have the shape (kv_len, q_len, nheads, batch) = (5, 5, 2, 3)")) << e;
  EXPECT_TRUE(has(e, "got shape (5×5×4)")) << e;
  e = error_message<DimensionMismatch>([&] { m(q, {.mask = ones(Bool, {5, 5, 2, 3, 2}) > 0}); });
  EXPECT_TRUE(has(e, "MultiHeadAttention(8 => 8 => 8, nheads=2): the mask must have the shape") && has(e, "(5×5×2×3×2)")) << e;
  // Another device: a mask or bias there is a DeviceMismatch naming both devices.
  for (const Device& d : flx::testing::accelerator_devices()) {
    e = error_message<DeviceMismatch>([&] { dot_product_attention(q, k, v, 2, {.bias = ones(Float32, {6, 5}).to(d), .scores = false}); });
    EXPECT_TRUE(has(e, "dot_product_attention: the bias is on " + d.str() + " but q is on CPU")) << e;
    e = error_message<DeviceMismatch>([&] { dot_product_attention(q, k, v, 2, {.mask = (ones(Float32, {6, 5}) > 0).to(d)}); });
    EXPECT_TRUE(has(e, "dot_product_attention: the mask is on " + d.str() + " but q is on CPU")) << e;
  }
}

TEST(AttentionLinear, BiasIsAddedToTheLogits) {
  // NNlib's meaning: softmax over keys of kᵀq/√d + bias. A bias of -Inf
  // on a key hides it as a mask does; a constant bias changes nothing.
  set_seed(19);
  const Tensor q = rand64({4, 3, 2}), k = rand64({4, 5, 2}), v = rand64({2, 5, 2});
  const Tensor hide = bools({5, 3}, [](int64_t e) { return e % 5 != 1; });
  std::vector<double> b(15, 0.0);
  for (int64_t i = 0; i < 3; ++i) b[size_t(1 + 5 * i)] = -std::numeric_limits<double>::infinity();
  const Tensor bias = tensor(b, {5, 3});
  for (bool scores : {true, false}) {
    const auto masked = dot_product_attention(q, k, v, 2, {.mask = hide, .scores = scores}).first;
    flx::testing::expect_close(dot_product_attention(q, k, v, 2, {.bias = bias, .scores = scores}).first, masked, 1e-12,
                               "a bias of -Inf as a mask");
    flx::testing::expect_close(dot_product_attention(q, k, v, 2, {.bias = full(Float64, 3.0, {1}), .scores = scores}).first,
                               dot_product_attention(q, k, v, 2, {.scores = scores}).first, 1e-12, "a constant bias");
  }
}

TEST(AttentionLinear, ASecondDerivativeIsRefusedByName) {
  // The op's backward runs fused kernels: first order only. A gradient of a
  // gradient through it is an error naming it, never a wrong number.
  set_seed(20);
  const Tensor q = rand64({4, 3, 1}), k = rand64({4, 5, 1}), v = rand64({2, 5, 1});
  for (Path path : kPaths) {
    PathScope scope(path);
    const std::string e = error_message<ArgumentError>([&] {
      gradient([&](const Tensor& x) {
        const Tensor dq = std::get<0>(gradient([&](const Tensor& y) {
          return sum(square(dot_product_attention(y, k, v, 2, {.scores = false}).first));
        }, x));
        return sum(dq);
      }, q);
    });
    EXPECT_TRUE(has(e, "the backward rule of dot_product_attention is first order only")) << name(path) << ": " << e;
  }
}

TEST(AttentionLinear, TheCpuKernelsExponentialsAreTheSameBitsOnEveryInstructionSet) {
  // The CPU kernel's softmax columns: e^(x - shift) and their sum, 16 lanes
  // with AVX-512, 8 with AVX2 or without: the same bits (so a machine's
  // results do not depend on which it has), within 2 ulps of libm's, exact
  // zeros for -Inf, NaN kept. Lengths with tails of every size.
  namespace am = cpu_backend::attention_math;
  set_seed(21);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 128, 131}) {
    std::vector<double> r = rand(Float64, {n}).to_vector<double>();
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) x[size_t(j)] = float(-90.0 * r[size_t(j)] * r[size_t(j)]);
    x[0] = -std::numeric_limits<float>::infinity();
    if (n > 2) x[2] = std::nanf("");
    const float shift = 0.25f;
    std::vector<float> ref = x;
    const float ref_sum = am::exp_shifted_on(0, ref.data(), n, shift);
    for (int isa = 1; isa < am::exp_isas(); ++isa) {
      std::vector<float> y = x;
      const float sum = am::exp_shifted_on(isa, y.data(), n, shift);
      EXPECT_EQ(std::memcmp(y.data(), ref.data(), size_t(n) * sizeof(float)), 0) << "isa " << isa << ", n " << n;
      EXPECT_EQ(std::memcmp(&sum, &ref_sum, sizeof sum), 0) << "isa " << isa << ", n " << n;
    }
    EXPECT_EQ(ref[0], 0.0f);
    for (int64_t j = 1; j < n; ++j) {
      if (j == 2) {
        EXPECT_TRUE(std::isnan(ref[2]));
        continue;
      }
      const double exact = std::exp(double(x[size_t(j)] - shift));  // of the difference as rounded to float
      if (exact < double(std::numeric_limits<float>::min())) EXPECT_EQ(ref[size_t(j)], 0.0f) << x[size_t(j)];
      else EXPECT_NEAR(ref[size_t(j)], exact, 2 * exact * 0x1p-23) << x[size_t(j)];
    }
  }
}

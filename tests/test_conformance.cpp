// The device conformance suite (ggml's test-backend-ops is the model): every
// op, layer and loss runs on each device besides the CPU and is compared with
// the CPU, forward and backward, with tolerances per element type (Float16
// and BFloat16 in ulps); the optimisers' steps likewise, and Adam's also
// against its closed form. The CPU itself is checked against closed forms and
// finite differences in the other suites.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include <gtest/gtest-spi.h>

#include "conformance_case.hpp"
#include "conformance_fixture.hpp"
#include "test_util.hpp"
#include "ulps.hpp"

using namespace flx;
using V = std::vector<Tensor>;
using flx::testing::UlpTolerance;

namespace {

using flx::testing::Case;
using flx::testing::Conformance;
using flx::testing::HalfUlps;
using flx::testing::is_half;
using flx::testing::params;
using flx::testing::param_name;
using flx::testing::skip_without_accelerator;
using flx::testing::tolerance;

// Why case c may be skipped on device d, which raised e; empty when it must
// pass there.
std::string skip_reason(const Case& c, const Device& d, const NotImplemented& e) {
  const std::string backend(d.backend());
  if (std::find(c.not_required_on.begin(), c.not_required_on.end(), backend) != c.not_required_on.end())
    return backend + " need not pass it yet: " + e.what();
  const std::string abi = backend_status(backend).abi, now = backend_status("CPU").abi;  // the CPU is built in
  if (abi != now && std::string(e.what()).find("came with ABI") != std::string::npos)
    return "the plugin implements ABI " + abi + ", older than what the case needs: " + e.what();
  return "";
}


// Float16 and BFloat16: ulps of the type itself (tests/ulps.hpp). Every
// backend computes a half op in float and rounds that float once to the
// storage type, to nearest even, with the CPU's compute types and order
// (contraction off; sums accumulated in double, where these small sums of
// halves are exact; the suite's Float64 cases need fp64 devices anyway). So:
//  - by default, 0 ulps: correctly rounded float arithmetic (+ - *,
//    comparisons, selections, copies, sums) gives the same float on every
//    device, hence the same half. A rounding other than to nearest even
//    (toward zero, say) shows in about half of the elements.
//  - kLibm, 1 ulp: a math-library function (exp, log, tanh, pow, erf, ...), or
//    a float division or square root (OpenCL allows 2.5 float ulps for them
//    on devices without correctly rounded divide/sqrt), gives a float a few
//    float ulps from the CPU's, each 2^-13 (Float16) or 2^-16 (BFloat16) of
//    an ulp of the result: at most the rounding picks the neighbouring value.
//  - kProducts, 1 ulp of the largest output (normwise): matrix products sum
//    in float in each device's own order. The difference, k 2^-24 sum|a_i b_i|
//    with k <= 13 here, is a few hundredths of an ulp of the largest output,
//    but an output near a rounding boundary may round the other way, and one
//    that cancels to near zero has ulps far below that difference.
//  - kComposed, 2 ulps normwise: one more function (a log, a softmax, a
//    second layer) of results that may already differ by 1 ulp, passing that
//    on with a condition number near 1, then rounding once more.
// Gradients: 0 ulps where the forward case is exact and so is every backward
// rule it uses (products, sums, selections). Otherwise a rule reuses a
// forward result that may differ by 1 ulp (the output of exp, sqrt,
// sigmoid, ...) or evaluates a library function again, then rounds two or
// three times more: 4 ulps normwise (a product can turn 1 ulp of a factor at
// the bottom of its binade into 2 ulps of a result at the top of its own).
// Softmax's backward, y (dy - sum(dy y)), cancels: the cases through it, 8.
// The chain's gradients pass that cancellation back through a second
// product and tanh's derivative, which can double it once more at a binade
// edge: 12 (an H200 gave 9 for the first layer's bias, in Float16).
const std::map<std::string, HalfUlps>& half_ulps() {
  const HalfUlps kLibm{{1}, {4, true}}, kProducts{{1, true}, {4, true}}, kComposed{{2, true}, {8, true}},
      kSoftmax{{1}, {8, true}}, kChain{{2, true}, {12, true}}, kTensorCores{{4, true}, {16, true}};
  static const std::map<std::string, HalfUlps> m = {
      {"div", kLibm},         {"pow_scalar", kLibm},    {"pow", kLibm},           {"sqrt", kLibm},
      {"exp", kLibm},         {"log", kLibm},           {"xlogy", kLibm},         {"sigmoid", kLibm},
      {"tanh", kLibm},        {"gelu", kLibm},          {"elu", kLibm},           {"swish", kLibm},
      {"softplus", kLibm},    {"gelu_erf", kLibm},      {"celu", kLibm},          {"softsign", kLibm},
      {"softmax", kSoftmax},
      {"softmax_dim1", kSoftmax}, {"logsoftmax", kSoftmax}, {"matvec", kProducts}, {"matmul", kProducts},
      {"matmul_batched", kProducts}, {"matmul_bcast", kProducts}, {"dense", kProducts}, {"chain", kChain},
      {"crossentropy", kComposed}, {"logitcrossentropy", kComposed}, {"binarycrossentropy", kComposed},
      // A division by a square root (1 ulp each where they are not correctly
      // rounded), then scale and bias; the backward cancels as softmax's does.
      {"layernorm", kComposed}, {"layernorm_2d_tanh", kComposed}, {"multihead_attention", kComposed},
      // Computed in float from the half inputs and rounded once on every
      // device (the CPU's kernel, the tiled path), in each device's order of
      // the products' sums and the softmax's exponentials: as a composed op.
      {"attention_linear", kComposed}, {"attention_linear_causal", kComposed},
      // Heads of 16 features: CUDA's tensor-core kernels, which round the
      // probabilities (and, backward, ds) to the storage type before their
      // products with v (k, q), as FlashAttention does: half an ulp of each
      // of n terms, summed, against the largest output: a few ulps forward,
      // and the backward's ds = p (dp - D) cancels first.
      {"attention_linear_wide", kTensorCores}};
  return m;
}
HalfUlps half_tolerance(const std::string& name) {
  auto it = half_ulps().find(name);
  return it == half_ulps().end() ? HalfUlps{} : it->second;
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
      {"softsign", {{8}}, [](const V& v) { return softsign(v[0]); }, true, -3, 3},
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
      // Embedding: its weight's gradient is scatter_add of repeated indices,
      // few (the backends' loop over the indices in order) and many into one
      // feature (their parallel path, on GPUs and on CPU devices alike: the
      // indices sorted, then each row summed in order).
      {"embedding", {{3, 5}}, [](const V& v) {
         return Embedding(v[0])(tensor(std::vector<int64_t>{4, 0, 4, 2, 4, 1}, {3, 2}).to(v[0].device()));
       }},
      {"embedding_many_repeats", {{1, 9}}, [](const V& v) {
         std::vector<int64_t> idx(600);
         for (size_t j = 0; j < idx.size(); ++j) idx[j] = int64_t((j * j + 3 * j) % 9 % (j % 4 + 6));
         return Embedding(v[0])(tensor(idx, {20, 30}).to(v[0].device()));
       }},
      {"embedding_onehot", {{3, 4}},
       [](const V& v) { return Embedding(v[0])(onehotbatch({3, 0, 3, 1}, 4).to(v[0].device())); }},
      {"layernorm", {{6, 4}, {6}, {6}}, [](const V& v) {
         LayerNorm ln(6);
         ln.scale = v[1];
         ln.bias = v[2];
         return ln(v[0]);
       }},
      {"layernorm_2d_tanh", {{3, 2, 2, 2}, {3, 2}, {3, 2}}, [](const V& v) {
         LayerNorm ln({3, 2}, flx::tanh);
         ln.scale = v[1];
         ln.bias = v[2];
         return ln(v[0]);
       }},
      {"softmax", {{5, 3}}, [](const V& v) { return softmax(v[0]); }},
      {"softmax_dim1", {{5, 3}}, [](const V& v) { return softmax(v[0], 1); }},
      {"logsoftmax", {{5, 3}}, [](const V& v) { return logsoftmax(v[0]); }},
      {"dense", {{3, 4}, {3}, {4, 6}}, [](const V& v) { return Dense(v[0], v[1], relu)(v[2]); }},
      {"multihead_attention", {{4, 4}, {4, 4}, {6, 4}, {3, 6}, {4, 5, 2}},  // causal self-attention, 2 heads
       [](const V& v) {
         MultiHeadAttention m(AttentionDims{4, 4, 4, 4, 6, 3}, {.nheads = 2});
         m.q_proj.weight = v[0];
         m.k_proj.weight = v[1];
         m.v_proj.weight = v[2];
         m.out_proj.weight = v[3];
         auto [y, alpha] = m(v[4], {.causal = true});
         return y + sum(square(alpha));  // through the attention weights too
       }},
      // Attention without its scores (.scores = false): the CPU's own kernel
      // (the dnn table's attention_*) is the reference; a device runs its own
      // (CUDA) or tiles of keys through its compute table (OpenCL). A mask
      // with a query that sees one key only, a bias per head and sequence;
      // then causal with a bias broadcast over the batch.
      {"attention_linear", {{8, 5, 2}, {8, 6, 2}, {6, 6, 2}, {6, 5, 2, 1}},
       [](const V& v) {
         std::vector<uint8_t> m(6 * 5 * 2);
         for (size_t e = 0; e < m.size(); ++e) m[e] = (e % 6 == 0) || ((e / 6) % 5 != 3 && e % 4 != 1);
         const Tensor mask = from_host(m.data(), Bool, {6, 5, 1, 2}).to(v[0].device());
         return dot_product_attention(v[0], v[1], v[2], 2, {.mask = mask, .bias = v[3], .scores = false}).first;
       }},
      {"attention_linear_causal", {{6, 7, 2}, {6, 7, 2}, {3, 7, 2}, {7, 7, 3}},
       [](const V& v) {
         return dot_product_attention(v[0], v[1], v[2], 3, {.causal = true, .bias = v[3], .scores = false}).first;
       }},
      // Two heads of 16 features (CUDA's tensor cores), 67 queries and keys
      // (a tile of 64 and a ragged one), causal, a bias broadcast over heads.
      {"attention_linear_wide", {{32, 67, 2}, {32, 67, 2}, {32, 67, 2}, {67, 67, 1, 2}},
       [](const V& v) {
         return dot_product_attention(v[0], v[1], v[2], 2, {.causal = true, .bias = v[3], .scores = false}).first;
       }},
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

}  // namespace

// The ulp counts the half tolerances rest on (tests/ulps.hpp).
TEST(UlpDistances, CountTheRepresentableValuesBetween) {
  using flx::testing::ulp_of;
  using flx::testing::ulps_between;
  EXPECT_EQ(ulps_between(1.0, 1.0 + 0x1p-10, Float16), 1);
  EXPECT_EQ(ulps_between(1.0, 1.0 - 0x1p-11, Float16), 1);  // the binade below is twice as fine
  EXPECT_EQ(ulps_between(0x1p-24, -0x1p-24, Float16), 2);   // the smallest subnormals, across zero
  EXPECT_EQ(ulps_between(0.0, -0.0, Float16), 0);
  EXPECT_EQ(ulps_between(1.0, 1.0 + 0x1p-7, BFloat16), 1);
  EXPECT_EQ(ulps_between(1.0, 1.0 + 0x1p-23, Float32), 1);
  EXPECT_EQ(ulps_between(NAN, 1.0, Float16), INFINITY);
  EXPECT_EQ(ulp_of(1.0, Float16), 0x1p-10);
  EXPECT_EQ(ulp_of(-1.99, Float16), 0x1p-10);
  EXPECT_EQ(ulp_of(0.0, Float16), 0x1p-24);
  EXPECT_EQ(ulp_of(1e-6, Float16), 0x1p-24);
  EXPECT_EQ(ulp_of(1.5, BFloat16), 0x1p-7);
  EXPECT_EQ(ulp_of(3.0, Float32), 0x1p-22);
  // 0.5 and its neighbour: 1 ulp apart, a quarter of an ulp of the largest value, 2.
  Tensor a = tensor(std::vector<float>{1, 2, 0.5f}, {3}).to(Float16);
  Tensor b = tensor(std::vector<float>{1, 2, 0.5f + 0x1p-11f}, {3}).to(Float16);
  flx::testing::expect_ulps(b, a, {1}, "one ulp apart");
  EXPECT_NONFATAL_FAILURE(flx::testing::expect_ulps(b, a, {0}, "one ulp apart"), "1 ulps at index 2");
  flx::testing::expect_ulps(b, a, {0.25, true}, "normwise");
  EXPECT_NONFATAL_FAILURE(flx::testing::expect_ulps(b, a, {0.2, true}, "normwise"), "0.25 ulps of the largest magnitude");
}

// A case says which backends must pass it; NotImplemented from any other is
// a skip with the reason.
TEST(ConformanceCases, SayWhichBackendsMustPassThem) {
  const Case optional_on_opencl{"x", {{2}}, [](const V& v) { return v[0]; }, true, -1, 1, {"OpenCL"}};
  const Case everywhere{"x", {{2}}, [](const V& v) { return v[0]; }};
  const NotImplemented lacks("x of Float32 cannot run on OpenCL: its backend has no `x` in its \"dnn\" table");
  const Device opencl(BackendId::OpenCL, 0), cuda(BackendId::CUDA, 0);
  const std::string why = skip_reason(optional_on_opencl, opencl, lacks);
  EXPECT_EQ(why, std::string("OpenCL need not pass it yet: ") + lacks.what());
  EXPECT_EQ(skip_reason(optional_on_opencl, cuda, lacks), "");
  EXPECT_EQ(skip_reason(everywhere, opencl, lacks), "");
  // The CPU implements this libflx's minor: nothing it lacks is for its age.
  const NotImplemented newer("x of Float32 cannot run on CPU: ... predates op code 400, which came with ABI 2.99");
  EXPECT_EQ(skip_reason(everywhere, Device::cpu(), newer), "");
}

// Case c on device dev in dtype t against the CPU, forward and backward.
void check_case(const Case& c, const Device& dev, DType t, double tol, const HalfUlps* half = nullptr) {
  SCOPED_TRACE(c.name + " on " + dev.str() + " in " + std::string(dtype_name(t)));
  const HalfUlps ulps = half ? *half : half_tolerance(c.name);
  V xs = make_inputs(c, t);
  Tensor ref = c.f(xs);
  Tensor out;
  try {
    out = c.f(to_device(xs, dev));
  } catch (const NotImplemented& e) {
    const std::string why = skip_reason(c, dev, e);
    if (why.empty()) {
      ADD_FAILURE() << c.name << " must pass on " << dev.backend() << ": " << e.what();
    } else {
      std::printf("  skipped case %s on %s: %s\n", c.name.c_str(), dev.str().c_str(), why.c_str());
      ::testing::Test::RecordProperty("skipped_" + c.name, why);
    }
    return;
  }
  EXPECT_EQ(out.device(), dev);
  // A loss of half inputs is Float32 (computed in it): Float32's tolerance.
  if (is_half(t) && out.dtype() == t) flx::testing::expect_ulps(out, ref, ulps.forward, c.name + " forward");
  else flx::testing::expect_close(out, ref, is_half(t) ? tolerance(out.dtype()) : tol, c.name + " forward");
  if (!c.differentiable) return;
  Tensor w = rand(Float64, ref.shape()).to(t);       // a random cotangent
  auto loss = [&](const V& v) { return sum(c.f(v) * w.to(v[0].device())); };
  V gref = std::get<0>(gradient(loss, xs));
  V gdev = std::get<0>(gradient(loss, to_device(xs, dev)));
  ASSERT_EQ(gref.size(), gdev.size());
  for (size_t i = 0; i < gref.size(); ++i) {
    ASSERT_EQ(gref[i].defined(), gdev[i].defined()) << "input " << i;
    if (!gref[i].defined()) continue;
    EXPECT_EQ(gdev[i].device(), dev) << "input " << i;
    const std::string what = c.name + " gradient of input " + std::to_string(i);
    if (is_half(t)) flx::testing::expect_ulps(gdev[i], gref[i], ulps.gradient, what);
    else flx::testing::expect_close(gdev[i], gref[i], tol * 10, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Conformance, ::testing::ValuesIn(params()), param_name);

TEST_P(Conformance, OpsLayersAndLossesMatchTheCpuForwardAndBackward) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const Device dev = GetParam().device;
  const DType t = GetParam().dtype;
  const double tol = tolerance(t);
  set_seed(11);
  const auto all = cases();
  for (const auto& entry : half_ulps())  // every entry names a case: none is dead
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const Case& c) { return c.name == entry.first; }))
        << entry.first;
  for (const Case& c : all) check_case(c, dev, t, tol);
}

// The array operations (tests/conformance_array_cases.cpp, which argues
// their half tolerances).
TEST_P(Conformance, ArrayOpsMatchTheCpuForwardAndBackward) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  const auto& ulps = flx::testing::array_op_half_ulps();
  const auto all = flx::testing::array_op_cases();
  for (const auto& entry : ulps)  // every entry names a case
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const Case& c) { return c.name == entry.first; }))
        << entry.first;
  set_seed(14);
  for (const Case& c : all) {
    const auto it = ulps.find(c.name);
    const HalfUlps half = it == ulps.end() ? HalfUlps{} : it->second;
    check_case(c, GetParam().device, t, tolerance(t), &half);
  }
}

// NNlib's activations of issue 29 and glu (tests/conformance_activation_cases.cpp,
// which argues their half tolerances).
TEST_P(Conformance, ActivationsMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  set_seed(16);
  for (const Case& c : flx::testing::activation_cases())
    check_case(c, GetParam().device, t, tolerance(t), &flx::testing::activation_half_ulps().at(c.name));
}

// GroupNorm, InstanceNorm, Upsample, PixelShuffle, DepthwiseConv and
// ConvTranspose's outpad (tests/conformance_layer_cases.cpp, which argues
// their half tolerances).
TEST_P(Conformance, NormUpsampleAndConvLayersMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  const auto& ulps = flx::testing::layer_half_ulps();
  const auto all = flx::testing::layer_cases();
  for (const auto& entry : ulps)  // every entry names a case
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const Case& c) { return c.name == entry.first; }))
        << entry.first;
  set_seed(15);
  for (const Case& c : all) {
    const auto it = ulps.find(c.name);
    const HalfUlps half = it == ulps.end() ? HalfUlps{} : it->second;
    check_case(c, GetParam().device, t, tolerance(t) * 5, &half);
  }
}

namespace {
// Convolution, pooling and batch normalisation (the dnn table), and
// dropout, in every floating type. Float16 and BFloat16 are optional in the
// dnn table: the CPU, the reference, runs them through its Float32 paths
// (each output rounded once), and a backend that lacks them answers
// NotImplemented, which fails here as anywhere. Batch normalisation of
// halves takes Float32 parameters (backend.h's param_dtype).
Tensor bn_param(const Tensor& p, const Tensor& x) { return is_half(x.dtype()) ? p.to(Float32) : p; }
std::vector<Case> dnn_cases() {
  const Tensor none;
  return {
      {"conv2d", {{6, 5, 4, 2}, {3, 2, 2, 6}, {6}},
       [none](const V& v) { return conv(v[0], v[1], v[2], {.stride = {2, 1}, .pad = {1, 0, 2, 1}, .groups = 2}); }},
      {"conv2d_dilated_same", {{7, 6, 3, 2}, {3, 3, 3, 4}},
       [none](const V& v) { return conv(v[0], v[1], none, {.pad = SamePad(), .dilation = 2}); }},
      {"depthwise1d", {{9, 4, 3}, {3, 1, 4}, {4}},
       [](const V& v) { return crosscor(v[0], v[1], v[2], {.stride = 2, .pad = 1, .groups = 4}); }},
      {"conv3d", {{4, 4, 3, 2, 2}, {2, 2, 2, 2, 3}},
       [none](const V& v) { return crosscor(v[0], v[1], none, {.pad = {1, 0, 0}}); }},
      {"conv_transpose", {{4, 3, 4, 2}, {3, 3, 3, 4}, {3}},
       [](const V& v) { return conv_transpose(v[0], v[1], v[2], {.stride = 2, .pad = 1}); }},
      {"maxpool", {{7, 6, 3, 2}}, [](const V& v) { return maxpool(v[0], {3, 2}, {.stride = 2, .pad = {1, 0}}); }},
      {"meanpool", {{6, 5, 2, 2}}, [](const V& v) { return meanpool(v[0], {2, 3}, {.pad = 1}); }},
      {"batchnorm_train", {{5, 4, 3, 2}, {3}, {3}},
       [none](const V& v) { return batchnorm(v[0], bn_param(v[1], v[0]), bn_param(v[2], v[0]), none, none, true); }},
      {"batchnorm_infer", {{5, 3, 4}, {3}, {3}}, [](const V& v) {
         const Tensor scale = bn_param(v[1], v[0]), bias = bn_param(v[2], v[0]);
         const Tensor mu = bias * 0.5, var = scale * scale + 0.5;  // from the inputs: on their device
         return batchnorm(v[0], scale, bias, mu.detach(), var.detach(), false);
       }},
      // Masks drawn on the device: Philox gives every device the CPU's
      // numbers for one seed (the plugin suite checks the generator), so the
      // seed is set inside, for the forward and the gradient's call alike.
      {"dropout_dims", {{5, 4, 3}}, [](const V& v) {
         set_seed(21);
         return dropout(v[0], 0.4, {1});
       }},
      {"alphadropout", {{6, 5}}, [](const V& v) {
         set_seed(22);
         return alphadropout(v[0], 0.3);
       }},
      // Attention's dropout drawn tile by tile (the CPU's kernel, a device's
      // own or its tiles) drops the weights one fill drawn whole would.
      {"attention_linear_dropout", {{4, 5, 2}, {4, 6, 2}, {6, 6, 2}}, [](const V& v) {
         set_seed(23);
         Dropout drop(0.4);
         drop.active = true;
         return dot_product_attention(v[0], v[1], v[2], 2, {.scores = false}, &drop).first;
       }},
      // Heads of 32 features (CUDA's tensor cores), 9 queries, 70 keys, a
      // mask, and dropout.
      {"attention_linear_wide_dropout", {{64, 9, 1}, {64, 70, 1}, {64, 70, 1}}, [](const V& v) {
         set_seed(24);
         Dropout drop(0.3);
         drop.active = true;
         std::vector<uint8_t> m(70 * 9);
         for (size_t e = 0; e < m.size(); ++e) m[e] = e % 7 != 3;
         const Tensor mask = from_host(m.data(), Bool, {70, 9}).to(v[0].device());
         return dot_product_attention(v[0], v[1], v[2], 2, {.mask = mask, .scores = false}, &drop).first;
       }},
  };
}
}  // namespace

TEST_P(Conformance, ConvolutionPoolingAndBatchNormMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  // Halves (see half_ulps): the products and sums of a convolution, and the
  // division of mean pooling, run in float in each device's own order: 1 ulp
  // (normwise for the sums); max pooling and dropout select and scale
  // exactly: 0; batch normalisation divides by a square root of sums, then
  // its backward cancels as softmax's does.
  // Attention with dropout as the attention cases of half_ulps: composed,
  // and on CUDA's tensor cores (heads of 32) its rounded weights.
  const HalfUlps kProducts{{1, true}, {4, true}}, kExact{{0}, {0}}, kMean{{1}, {1}},
      kNorm{{2, true}, {8, true}};
  const std::map<std::string, HalfUlps> ulps = {
      {"conv2d", kProducts},  {"conv2d_dilated_same", kProducts}, {"depthwise1d", kProducts},
      {"conv3d", kProducts},  {"conv_transpose", kProducts},      {"maxpool", kExact},
      {"meanpool", kMean},    {"batchnorm_train", kNorm},         {"batchnorm_infer", kNorm},
      {"dropout_dims", kExact}, {"alphadropout", kMean},
      {"attention_linear_dropout", half_tolerance("attention_linear")},
      {"attention_linear_wide_dropout", half_tolerance("attention_linear_wide")}};
  set_seed(12);
  for (const Case& c : dnn_cases()) check_case(c, GetParam().device, t, tolerance(t) * 5, &ulps.at(c.name));
}

namespace {
// The recurrent cells and layers. In Float32 and Float64 the layers run
// each sequence as one fused op of GEMMs and strided map kernels
// (src/ops/recurrent_scan.cpp) on every device, the cells their ops one by
// one; in Float16 and BFloat16 the layers run their cells step by step.
// Each case returns the outputs and, where a layer has one, its final cell
// state, so that gradients flow back through every time step from both.
std::vector<Case> recurrent_cases() {
  return {
      {"rnn_cell", {{4, 3}, {4, 4}, {4}, {3, 5}, {4, 5}},
       [](const V& v) { return RNNCell(v[0], v[1], v[2])(v[3], v[4]).output; }},
      {"lstm_cell", {{8, 3}, {8, 2}, {8}, {3, 5}, {2, 5}, {2}}, [](const V& v) {
         auto [h, s] = LSTMCell(v[0], v[1], v[2])(v[3], {v[4], v[5]});
         return h + s.c;
       }},
      {"gru_cell", {{6, 3}, {6, 2}, {6}, {2}, {3, 5}, {2, 5}},
       [](const V& v) { return GRUCell(v[0], v[1], v[2], v[3])(v[4], v[5]).output; }},
      {"rnn", {{4, 3}, {4, 4}, {4}, {3, 6, 5}, {4, 5}},
       [](const V& v) { return RNN(RNNCell(v[0], v[1], v[2]))(v[3], v[4]); }},
      {"rnn_relu_no_bias", {{4, 3}, {4, 4}, {3, 6, 5}},
       [](const V& v) { return RNN(RNNCell(v[0], v[1], Tensor{}, relu))(v[2]); }},
      {"lstm", {{12, 3}, {12, 3}, {12}, {3, 6, 5}, {3, 5}, {3, 5}}, [](const V& v) {
         auto [y, s] = LSTM(LSTMCell(v[0], v[1], v[2])).with_state(v[3], {v[4], v[5]});
         return y + reshape(s.c, {3, 1, 5});
       }},
      {"lstm_learned_state_unbatched", {{12, 3}, {12, 3}, {12}, {3}, {3}, {3, 6}}, [](const V& v) {
         return LSTM(LSTMCell(v[0], v[1], v[2]), {v[3], v[4]})(v[5]);
       }},
      {"gru", {{9, 3}, {9, 3}, {9}, {3, 6, 5}, {3, 5}},
       [](const V& v) { return GRU(GRUCell(v[0], v[1], v[2]))(v[3], v[4]); }},
      {"gru_recurrent_bias", {{9, 3}, {9, 3}, {9}, {3}, {3, 6, 5}, {3}},
       [](const V& v) { return GRU(GRUCell(v[0], v[1], v[2], v[3]))(v[4], v[5]); }},
  };
}
}  // namespace

TEST_P(Conformance, RecurrentLayersMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  // Halves: each case composes many ops over several steps, each op 0 or 1
  // ulp (half_ulps), and the state is rounded to the half type at each of
  // the 6 steps, so a difference of one step's rounding is carried into the
  // next step's product and may round the other way there: 4 ulps normwise
  // forward (an H200 gave 2.5 for the RNN in Float16), 8 backward.
  const HalfUlps half{{4, true}, {8, true}};
  set_seed(13);
  for (const Case& c : recurrent_cases()) check_case(c, GetParam().device, t, tolerance(t) * 5, &half);
}

// GRUv3, Recurrence, EmbeddingBag, WeightNorm and MultiHeadAttention's bias
// (tests/conformance_seq_cases.cpp, which argues their half tolerances).
TEST_P(Conformance, SequenceLayersMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  const auto& ulps = flx::testing::sequence_layer_half_ulps();
  set_seed(14);
  for (const Case& c : flx::testing::sequence_layer_cases())
    check_case(c, GetParam().device, t, tolerance(t) * 5, &ulps.at(c.name));
}

// The losses of tests/conformance_loss_cases.cpp (which argues their half
// tolerances).
TEST_P(Conformance, LossesMatchTheCpu) {
  skip_without_accelerator(GetParam());
  if (IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
  const DType t = GetParam().dtype;
  const auto& ulps = flx::testing::loss_half_ulps();
  set_seed(29);
  for (const Case& c : flx::testing::loss_cases())
    check_case(c, GetParam().device, t, tolerance(t), &ulps.at(c.name));
}

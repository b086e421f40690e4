// Dense layers through a GEMM with a fused epilogue (ABI minor 2,
// gemm_epilogue): bias + activation forward, the bias gradient fused into
// the weight gradient backward. On every device (the CPU fuses; a backend
// without gemm_epilogue runs the unfused ops) the layer must give what
// matmul, + and the activation give, forward and backward, and a backend
// answering FLX_ERR_UNSUPPORTED must lead to the unfused ops with the same
// results. Own executable: it mounts a test backend as "Metal".
#include "backend/backend.hpp"
#include "cpu/cpu_backend.hpp"
#include "devices/registry.hpp"
#include "test_util.hpp"

using namespace flx;
using V = std::vector<Tensor>;

// The test backend of tests/plugins/counting_backend.c.
extern "C" {
const flx_backend* flx_test_counting_backend(const flx_backend* cpu, const char* name);
int flx_test_counting_calls(int kind);
void flx_test_counting_reset(unsigned refuse_mask);
void flx_test_counting_fail(unsigned fail_mask);
}

namespace {

enum class Act { Identity, Relu, Gelu };
const char* act_name(Act a) { return a == Act::Identity ? "identity" : a == Act::Relu ? "relu" : "gelu"; }
Activation activation(Act a) {
  if (a == Act::Relu) return relu;
  if (a == Act::Gelu) return gelu;
  return identity;
}

// The unfused computation, op by op (matmul, broadcast +, the activation).
Tensor unfused(const Tensor& w, const Tensor& b, const Tensor& x, Act a) {
  Tensor h = matmul(w, x) + b;
  return a == Act::Relu ? relu(h) : a == Act::Gelu ? gelu(h) : h;
}

double tol(DType t) { return t == Float64 ? 1e-12 : 2e-5; }

struct Shapes {
  int64_t out, in, batch;
};
// Small, and large enough for the CPU to cut the product into tiles.
constexpr Shapes kShapes[] = {{5, 7, 9}, {64, 300, 70}, {3, 1, 1}};

// Forward and the gradients of weight, bias and input of
// sum(Dense(w, b, act)(x) .* c) against the unfused ops on `dev`.
void expect_fused_matches_unfused(Device dev, DType t, Act a, const Shapes& s) {
  SCOPED_TRACE(dev.str() + " " + std::string(dtype_name(t)) + " " + act_name(a) + " " + std::to_string(s.out) + "x" +
               std::to_string(s.in) + "x" + std::to_string(s.batch));
  set_seed(3);
  Tensor w = (rand(Float64, {s.out, s.in}) * 2.0 - 1.0).to(t).to(dev);
  Tensor b = (rand(Float64, {s.out}) - 0.5).to(t).to(dev);
  Tensor x = (rand(Float64, {s.in, s.batch}) * 2.0 - 1.0).to(t).to(dev);
  Tensor c = (rand(Float64, {s.out, s.batch}) - 0.5).to(t).to(dev);
  const Activation act = activation(a);
  Tensor y = Dense(w, b, act)(x);
  Tensor ref = unfused(w, b, x, a);
  EXPECT_EQ(y.device(), dev);
  EXPECT_EQ(y.dtype(), t);
  flx::testing::expect_close(y, ref, tol(t), "forward");

  auto fused_loss = [&](const V& v) { return sum(Dense(v[0], v[1], act)(v[2]) * c); };
  auto unfused_loss = [&](const V& v) { return sum(unfused(v[0], v[1], v[2], a) * c); };
  V g = std::get<0>(gradient(fused_loss, V{w, b, x}));
  V gref = std::get<0>(gradient(unfused_loss, V{w, b, x}));
  const char* names[] = {"weight", "bias", "input"};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(g[size_t(i)].defined()) << names[i];
    EXPECT_EQ(g[size_t(i)].device(), dev) << names[i];
    flx::testing::expect_close(g[size_t(i)], gref[size_t(i)], tol(t) * 10, std::string("gradient of the ") + names[i]);
  }
  // Only the weight's gradient (the bias gradient not fused in) and only the
  // input's: the rule handles each alone.
  auto only_w = [&](const Tensor& wv) { return sum(Dense(wv, b, act)(x) * c); };
  auto only_x = [&](const Tensor& xv) { return sum(Dense(w, b, act)(xv) * c); };
  flx::testing::expect_close(std::get<0>(gradient(only_w, w)), gref[0], tol(t) * 10, "weight alone");
  flx::testing::expect_close(std::get<0>(gradient(only_x, x)), gref[2], tol(t) * 10, "input alone");
}

// ---- a test backend (tests/plugins/counting_backend.c): the CPU's tables
// with gemm_epilogue counting its calls per epilogue kind and refusing
// (FLX_ERR_UNSUPPORTED) the kinds in a mask.
int calls(int kind) { return flx_test_counting_calls(kind); }

class CountingBackend : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (detail::find_backend(BackendId::Metal)) return;
    const flx_backend* core = flx_test_counting_backend(cpu_backend::core(), "Metal");
    ASSERT_NE(core, nullptr) << "the CPU backend has gemm_epilogue";
    detail::register_backend(BackendId::Metal, core);
  }
  void SetUp() override { flx_test_counting_reset(0); }
  void TearDown() override { flx_test_counting_reset(0); }
  Device dev{BackendId::Metal, 0};
};

}  // namespace

TEST(DenseFused, MatchesTheUnfusedOpsOnEveryDevice) {
  for (const Device& dev : flx::testing::conformance_devices())
    for (DType t : {Float32, Float64})
      for (Act a : {Act::Identity, Act::Relu, Act::Gelu})
        for (const Shapes& s : kShapes) expect_fused_matches_unfused(dev, t, a, s);
}

TEST(DenseFused, CudaIsCoveredWhereAGpuIsPresent) {
  if (!functional("CUDA")) GTEST_SKIP() << "CUDA is not functional here: " << backend_status("CUDA").reason;
  bool found = false;
  for (const Device& dev : flx::testing::conformance_devices()) found |= std::string(dev.backend()) == "CUDA";
  EXPECT_TRUE(found) << "a functional CUDA backend's devices are in the suite";
}

TEST(DenseFused, GradientsMatchFiniteDifferencesInFloat64) {
  for (Act a : {Act::Identity, Act::Relu, Act::Gelu}) {
    SCOPED_TRACE(act_name(a));
    set_seed(8);
    Tensor c = flx::testing::rand64({4, 6});
    // relu's kink: keep pre-activations away from 0 so differences are smooth there.
    Tensor w = flx::testing::rand64({4, 3}), b = flx::testing::rand64({4}, 0.3, 0.6);
    Tensor x = flx::testing::rand64({3, 6}, 0.1, 1.0);
    if (a == Act::Relu) w = abs(w) + 0.1;  // all pre-activations positive but for the sign of c
    flx::testing::check_gradients(
        [&](const V& v) { return sum(Dense(v[0], v[1], activation(a))(v[2]) * c); }, {w, b, x}, 1e-6, 1e-6,
        std::string("Dense ") + act_name(a));
    // relu with units switched off: their gradients are 0.
    if (a == Act::Relu) {
      Tensor wn = -(abs(w) + 0.1);
      flx::testing::check_gradients([&](const V& v) { return sum(Dense(v[0], v[1], relu)(v[2]) * c); },
                                    {wn, b - 2.0, x}, 1e-6, 1e-6, "Dense relu, inactive");
    }
  }
}

TEST(DenseFused, SecondDerivativesMatchTheUnfusedOps) {
  // The gradient of a gradient through Dense (identity and relu rules are
  // built of recorded ops when an enclosing call records the backward pass;
  // gelu's rule, fused or not, differentiates once).
  for (Act a : {Act::Identity, Act::Relu}) {
    SCOPED_TRACE(act_name(a));
    set_seed(9);
    Tensor w = flx::testing::rand64({4, 3}), b = flx::testing::rand64({4}), x = flx::testing::rand64({3, 5});
    auto inner = [&](bool fused) {
      return [&, fused](const Tensor& wv) {
        auto f = [&](const Tensor& xv) {
          Tensor y = fused ? Dense(wv, b, activation(a))(xv) : unfused(wv, b, xv, a);
          return sum(square(y));
        };
        return sum(square(std::get<0>(gradient(f, x))));
      };
    };
    Tensor g_fused = std::get<0>(gradient(inner(true), w));
    Tensor g_ref = std::get<0>(gradient(inner(false), w));
    ASSERT_TRUE(g_fused.defined());
    flx::testing::expect_close(g_fused, g_ref, 1e-12, "second derivative");
  }
}

TEST(DenseFused, OtherActivationsAndShapesTakeTheUnfusedOpsWithTheSameErrors) {
  Tensor w = flx::testing::rand64({4, 3}), b = flx::testing::rand64({4}), x = flx::testing::rand64({3, 5});
  flx::testing::expect_close(Dense(w, b, flx::tanh)(x), flx::tanh(matmul(w, x) + b), 1e-14, "tanh");
  flx::testing::expect_close(Dense(w, b, relu)(x.to(Float32)), relu(matmul(w, x.to(Float32)) + b), 1e-14,
                             "mixed dtypes promote as the ops do");
  Tensor v = flx::testing::rand64({3});
  flx::testing::expect_close(Dense(w, b, relu)(v), relu(matmul(w, v) + b), 1e-14, "a vector input");
  Tensor x3 = flx::testing::rand64({3, 2, 2});
  flx::testing::expect_close(Dense(w, b, relu)(x3), relu(matmul(w, x3) + b), 1e-14, "a batch of matrices");
  EXPECT_THROW((void)Dense(w, b, relu)(flx::testing::rand64({2, 5})), DimensionMismatch);
  Tensor empty_batch = zeros(Float64, {3, 0});
  EXPECT_EQ(Dense(w, b, relu)(empty_batch).shape(), (Shape{4, 0}));
}

TEST_F(CountingBackend, TheFusedPathRunsWhereTheBackendHasIt) {
  expect_fused_matches_unfused(dev, Float64, Act::Relu, kShapes[0]);
  EXPECT_GT(calls(FLX_EPILOGUE_BIAS_RELU), 0) << "forward through gemm_epilogue";
  EXPECT_GT(calls(FLX_EPILOGUE_BGRADA), 0) << "bias gradient fused into the weight gradient";
  flx_test_counting_reset(0);
  expect_fused_matches_unfused(dev, Float32, Act::Gelu, kShapes[1]);
  EXPECT_GT(calls(FLX_EPILOGUE_BIAS_GELU), 0);
  expect_fused_matches_unfused(dev, Float32, Act::Identity, kShapes[0]);
  EXPECT_GT(calls(FLX_EPILOGUE_BIAS), 0);
  // Results equal the CPU's.
  set_seed(4);
  Tensor w = flx::testing::rand64({6, 5}), b = flx::testing::rand64({6}), x = flx::testing::rand64({5, 7});
  Dense layer(w, b, gelu);
  flx::testing::expect_close(layer(x), (layer | dev)(x.to(dev)), 1e-13, "Metal against the CPU");
}

TEST_F(CountingBackend, AnUnsupportedAnswerLeadsToTheUnfusedOps) {
  flx_test_counting_reset(0xF);  // every kind refused
  for (Act a : {Act::Identity, Act::Relu, Act::Gelu})
    for (DType t : {Float32, Float64}) expect_fused_matches_unfused(dev, t, a, kShapes[0]);
  EXPECT_GT(calls(FLX_EPILOGUE_BIAS) + calls(FLX_EPILOGUE_BIAS_RELU) +
                calls(FLX_EPILOGUE_BIAS_GELU),
            0)
      << "the backend was asked";
  // Only the bias gradient refused: forward fused, backward unfused sum.
  flx_test_counting_reset(1u << FLX_EPILOGUE_BGRADA);
  expect_fused_matches_unfused(dev, Float64, Act::Relu, kShapes[1]);
  EXPECT_GT(calls(FLX_EPILOGUE_BIAS_RELU), 0);
  EXPECT_GT(calls(FLX_EPILOGUE_BGRADA), 0);
}

// A failure other than "unsupported" (a cublasLtMatmul that fails) also
// leads to the unfused ops on the same device, with the same results, and
// is reported once on stderr with the status and the backend's message.
TEST_F(CountingBackend, AFailureLeadsToTheUnfusedOpsAndIsReportedOnce) {
  flx_test_counting_fail(0xF);  // every kind fails
  ::testing::internal::CaptureStderr();
  for (Act a : {Act::Identity, Act::Relu, Act::Gelu}) expect_fused_matches_unfused(dev, Float32, a, kShapes[0]);
  expect_fused_matches_unfused(dev, Float64, Act::Relu, kShapes[1]);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const int asked = calls(FLX_EPILOGUE_BIAS) + calls(FLX_EPILOGUE_BIAS_RELU) + calls(FLX_EPILOGUE_BIAS_GELU) +
                    calls(FLX_EPILOGUE_BGRADA);
  EXPECT_GT(asked, 4) << "the backend was asked, and failed, several times";
  const std::string line = "Metal backend: a fused Dense product (gemm_epilogue) failed (device error): "
                           "cublasLtMatmul failed: CUBLAS_STATUS_EXECUTION_FAILED (the test backend)";
  size_t n = 0;
  for (size_t at = err.find(line); at != std::string::npos; at = err.find(line, at + 1)) ++n;
  EXPECT_EQ(n, 1u) << "reported once, with the status and the message; stderr:\n" << err;
}

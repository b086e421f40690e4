// The CPU's half GEMMs and convolutions (cpu_native_halves.hpp): BFloat16
// in oneDNN's own kernels where oneDNN's ISA has BFloat16 arithmetic
// (avx512_core_bf16, AMX), Float32 on widened copies elsewhere; either way
// the products are summed in Float32 and each output is rounded once. And
// what the CPU answers to precision_paths (flx-info's listing).
//
// The tolerance, from BFloat16's format: the inputs are BFloat16, so every
// product a*b (8 + 8 significant bits) is exact in Float32 (24); a sum of k
// of them in Float32, in any order, is within k * 2^-24 * S of the exact
// sum (S = sum of |a*b|, the reference computed in Float64 on |a| and |b|);
// rounding that once to BFloat16 (8 significant bits, round to nearest)
// adds at most 2^-8 of the value. So |c - exact| <= 2^-8 |exact| +
// (1 + 2^-8) k 2^-24 S, for every element. A BFloat16 accumulator (k
// roundings at 2^-8) or a second rounding would be far outside it for the
// k used here, and almost every output (99 %) must be exactly the exact
// sum rounded to BFloat16: Float32's summation error is 2^16 times smaller
// than BFloat16's half ulp, so only outputs within that of a rounding
// boundary may round the other way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_native_halves.hpp"
#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {

// a and b as Float64 vectors (exact: every floating dtype converts exactly).
std::vector<double> f64(const Tensor& t) { return t.to(Float64).to(Device::cpu()).to_vector<double>(); }

// x rounded to BFloat16 (or Float16), as flx converts.
double rounded(double x, DType t) { return tensor(std::vector<double>{x}).to(t).to_vector<double>()[0]; }

// Checks got (dtype t) against exact (Float64) with the bound of the file's
// comment, k terms whose absolute values sum to abs_sum.
void expect_rounded_once(const std::string& what, const Tensor& got, const Tensor& exact, const Tensor& abs_sum,
                         int64_t k, DType t) {
  ASSERT_EQ(got.dtype(), t) << what;
  ASSERT_EQ(got.shape(), exact.shape()) << what;
  const std::vector<double> g = f64(got), e = f64(exact), s = f64(abs_sum);
  const double u = t == BFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);  // half an ulp, relative
  const double sum_err = double(k) * std::ldexp(1.0, -24);
  std::vector<double> as_rounded(e.size());
  {
    const std::vector<double> r = f64(exact.to(t));  // each exact value rounded once, in one conversion
    as_rounded = r;
  }
  size_t same = 0, bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = u * std::fabs(e[i]) + (1 + u) * sum_err * s[i] + 1e-30;
    if (!(std::fabs(g[i] - e[i]) <= bound) && ++bad <= 5)
      ADD_FAILURE() << what << " element " << i << ": " << g[i] << " against exact " << e[i] << " (bound " << bound
                    << ")";
    same += g[i] == as_rounded[i];
  }
  EXPECT_EQ(bad, 0u) << what;
  EXPECT_GE(double(same), 0.99 * double(g.size())) << what << ": only " << same << " of " << g.size()
                                                    << " outputs are the exact result rounded once";
}

// Values in [-0.5, 0.5) made exact in t.
Tensor values(Shape s, DType t) { return (rand(Float64, s) - 0.5).to(t); }

// t's values as the bits of their (exact) Float32 forms: a half's bits,
// NaNs' signs included, compared through one type.
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float f : t.to(Float32).to_vector<float>()) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out.push_back(u);
  }
  return out;
}

struct GemmCase {
  int64_t m, n, k, batch;
};

}  // namespace

// Max pooling of the halves on their own bits (cpu_dnn_direct.cpp: unpadded
// windows forward, 2x2 windows at stride 2 backward; BFloat16's 2x2 windows
// two neighbours per 32-bit word) must give the Float32 pass's result
// rounded, bit for bit: values drawn from ties, ±0, ±Inf and NaNs of both
// signs (the first NaN of a window is its result, sign included), on odd
// planes (a last row and column in no window).
TEST(CpuHalves, MaxPoolingIsTheFloat32PoolRoundedBitForBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> pick = {0.f, -0.f, 1.f, -1.f, 2.f, 2.f, 3.f, -3.f, inf, -inf, nan, -nan, 0.5f, -0.5f, 7.f};
  std::vector<float> v(size_t(9 * 7 * 3 * 2)), c(v.size());
  uint64_t state = 12345;
  for (size_t i = 0; i < v.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = pick[(state >> 33) % pick.size()];
    c[i] = float(int((state >> 20) % 17) - 8);  // the loss's weights: exact, distinct
  }
  // Two windows of the first plane (9 wide) with NaNs of both signs: -NaN first, then +NaN first.
  for (auto [i, value] : {std::pair{0, -nan}, {1, nan}, {9, 3.f}, {10, 4.f}, {2, 1.f}, {3, 2.f}, {11, nan}, {12, -nan}})
    v[size_t(i)] = value;
  for (DType t : {BFloat16, Float16})
    for (auto [kernel, stride] : {std::pair{int64_t(2), int64_t(2)}, std::pair{int64_t(3), int64_t(2)}}) {
      const Tensor x = tensor(v, Shape{9, 7, 3, 2}).to(t), x32 = x.to(Float32);
      const PoolOptions o{.stride = PerDim(stride)};
      const Shape out_shape = maxpool(x32, {kernel, kernel}, o).shape();
      const Tensor w = tensor(std::vector<float>(c.begin(), c.begin() + out_shape.numel()), out_shape);
      const std::string what = std::string(dtype_name(t)) + " maxpool " + std::to_string(kernel) + "x" +
                               std::to_string(kernel) + " stride " + std::to_string(stride);
      EXPECT_EQ(bits(maxpool(x, {kernel, kernel}, o)), bits(maxpool(x32, {kernel, kernel}, o).to(t)))
          << what << " forward";
      auto grad = [&](const Tensor& in) {
        const Tensor wt = w.to(in.dtype());
        return std::get<0>(gradient([&](const Tensor& u) { return sum(maxpool(u, {kernel, kernel}, o) * wt); }, in));
      };
      EXPECT_EQ(bits(grad(x)), bits(grad(x32).to(t))) << what << " backward";
    }
}

// Batch normalisation of the halves reads and writes them directly
// (cpu_dnn_direct.cpp), with Float32 statistics and parameters: forward and
// backward must give the bits of the Float32 loops on the widened values,
// each output rounded once, and the same Float32 parameter gradients.
TEST(CpuHalves, BatchNormIsTheFloat32LoopsRoundedBitForBit) {
  set_seed(9);
  const Tensor x32 = randn(5, 3, 2, 4) * 3 + 1, w32 = randn(5, 3, 2, 4);
  const Tensor scale = randn(2) + 1, bias = randn(2);
  for (DType t : {BFloat16, Float16}) {
    const Tensor x = x32.to(t), w = w32.to(t);
    // training mode (in inference the gradients are the autodiff's elementwise
    // ops, in the half type), with running statistics of its own per call
    auto run = [&](const Tensor& in, const Tensor& weights) {
      const Tensor mean = tensor(std::vector<float>{0.5f, -0.25f}), var = tensor(std::vector<float>{2.f, 0.75f});
      return withgradient(
          [&](const Tensor& u, const Tensor& g, const Tensor& b) {
            return sum(batchnorm(u, g, b, mean, var, true) * weights);
          },
          in, scale, bias);
    };
    const std::string what(dtype_name(t));
    EXPECT_EQ(bits(batchnorm(x, scale, bias, Tensor(), Tensor(), true)),
              bits(batchnorm(x.to(Float32), scale, bias, Tensor(), Tensor(), true).to(t)))
        << what << " forward";
    const auto [lh, gh] = run(x, w);
    const auto [l32, g32] = run(x.to(Float32), w.to(Float32));
    EXPECT_EQ(bits(std::get<0>(gh)), bits(std::get<0>(g32).to(t))) << what << " dx";
    EXPECT_EQ(std::get<1>(gh).dtype(), Float32) << what;
    EXPECT_EQ(bits(std::get<1>(gh)), bits(std::get<1>(g32))) << what << " dscale";
    EXPECT_EQ(bits(std::get<2>(gh)), bits(std::get<2>(g32))) << what << " dbias";
  }
}

// matmul in BFloat16 on the CPU (oneDNN's matmul on flx's tiles where the
// CPU computes BFloat16, else sgemm on widened copies), and the backward
// rule's transposed products, against the exact product in Float64.
// exp, tanh, σ, gelu and gelu's gradient on contiguous Float16 and BFloat16
// rows take the Float32 vector rows a block at a time (cpu_map.cpp). The
// halves compute in float and round once, so each result must be the
// Float32 op's on the widened value, rounded: the same bits for every value
// of the type (NaNs as NaN).
TEST(CpuHalves, VectorisedActivationRowsAreTheFloat32ResultRoundedOnce) {
  for (DType t : {BFloat16, Float16}) {
    std::vector<float> all(65536);
    for (uint32_t b = 0; b < 65536; ++b)
      all[b] = t == BFloat16 ? flx::bf16_to_float(uint16_t(b)) : flx::half_to_float(uint16_t(b));
    const Tensor x = tensor(all, Shape{256, 256}).to(t), x32 = x.to(Float32);
    auto same_bits = [&](const Tensor& got, const Tensor& want, const char* what) {
      ASSERT_EQ(got.dtype(), t) << what;
      const std::vector<float> g = got.to(Float32).to_vector<float>(), w = want.to(t).to(Float32).to_vector<float>();
      size_t bad = 0;
      for (size_t i = 0; i < g.size(); ++i)
        if (!(std::isnan(g[i]) && std::isnan(w[i])) && std::memcmp(&g[i], &w[i], 4) != 0 && bad++ < 3)
          ADD_FAILURE() << t << " " << what << " at " << i << " (input " << all[i] << "): " << g[i]
                        << ", Float32's rounded " << w[i];
      EXPECT_EQ(bad, 0u) << t << " " << what;
    };
    same_bits(flx::exp(x), flx::exp(x32), "exp");
    same_bits(flx::tanh(x), flx::tanh(x32), "tanh");
    same_bits(sigmoid(x), sigmoid(x32), "sigmoid");
    same_bits(gelu(x), gelu(x32), "gelu");
    const auto grad = [&](const Tensor& v) {  // gelu'(v) .* 1
      const Tensor w = ones(v.shape()).to(v.dtype());
      return std::get<0>(gradient([&](const Tensor& u) { return sum(gelu(u) * w); }, v));
    };
    same_bits(grad(x), grad(x32), "gelu's gradient");
    // The other maps' contiguous rows take Float32 blocks too (half_block_row):
    // binary ops on two rows, on a row and a broadcast value (stride 0), relu's gradient.
    const Tensor y = flx::reverse(x, 0), y32 = y.to(Float32);
    const Tensor col = tensor(std::vector<float>(all.begin() + 1000, all.begin() + 1256), Shape{1, 256}).to(t),
                 col32 = col.to(Float32);  // one value per row, broadcast along it (stride 0)
    same_bits(x + y, x32 + y32, "x + y");
    same_bits(x * y, x32 * y32, "x .* y");
    same_bits(x / y, x32 / y32, "x ./ y");
    same_bits(x - col, x32 - col32, "x .- a column");
    same_bits(relu(x), relu(x32), "relu");
    const auto relu_grad = [&](const Tensor& v, const Tensor& w) {
      return std::get<0>(gradient([&](const Tensor& u) { return sum(relu(u) * w); }, v));
    };
    same_bits(relu_grad(x, y), relu_grad(x32, y32), "relu's gradient");
  }
}

TEST(CpuHalves, BFloat16GemmIsTheExactProductRoundedOnce) {
  const DType t = BFloat16;
  // The MLP's layers at batch 64 (flx-train), products cut into several
  // tiles, odd and thin shapes, and batched products.
  for (const GemmCase& c : {GemmCase{256, 64, 784, 1}, GemmCase{784, 256, 512, 1}, GemmCase{10, 64, 256, 1},
                            GemmCase{300, 30, 3000, 1}, GemmCase{37, 53, 71, 1}, GemmCase{517, 3, 130, 1},
                            GemmCase{64, 80, 96, 5}, GemmCase{16, 16, 64, 40}}) {
    set_seed(uint64_t(c.m * 7 + c.n * 5 + c.k * 3 + c.batch));
    const bool batched = c.batch > 1;
    const Shape sa = batched ? Shape{c.m, c.k, c.batch} : Shape{c.m, c.k};
    const Shape sb = batched ? Shape{c.k, c.n, c.batch} : Shape{c.k, c.n};
    const Shape sc = batched ? Shape{c.m, c.n, c.batch} : Shape{c.m, c.n};
    const Tensor a = values(sa, t), b = values(sb, t), g = values(sc, t);
    const std::string name = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                             (batched ? " batch " + std::to_string(c.batch) : "");
    const Tensor a64 = a.to(Float64), b64 = b.to(Float64), g64 = g.to(Float64);
    expect_rounded_once(name + " A*B", matmul(a, b), matmul(a64, b64), matmul(abs(a64), abs(b64)), c.k, t);
    // The backward rule's products: dA = G Bᵀ (sums of n terms), dB = Aᵀ G (m terms).
    auto [da, db] = gradient([&](const Tensor& x, const Tensor& y) { return sum(matmul(x, y) * g); }, a, b);
    auto [da64, db64] = gradient([&](const Tensor& x, const Tensor& y) { return sum(matmul(x, y) * g64); }, a64, b64);
    auto [sa64, sb64] =
        gradient([&](const Tensor& x, const Tensor& y) { return sum(matmul(x, y) * abs(g64)); }, abs(a64), abs(b64));
    expect_rounded_once(name + " G*B'", da, da64, sa64, c.n, t);
    expect_rounded_once(name + " A'*G", db, db64, sb64, c.m, t);
  }
}

// Dense in BFloat16 (its GEMM, the bias added after the product's one
// rounding: a second rounding, so half an ulp more).
TEST(CpuHalves, BFloat16DenseIsCloseToTheExactLayer) {
  set_seed(5);
  const DType t = BFloat16;
  const Tensor w = values({256, 784}, t), b = values({256}, t), x = values({784, 64}, t);
  const Tensor y = Dense(w, b)(x);
  const Tensor y64 = Dense(w.to(Float64), b.to(Float64))(x.to(Float64));
  const Tensor s64 = Dense(abs(w.to(Float64)), abs(b.to(Float64)))(abs(x.to(Float64)));
  const std::vector<double> g = f64(y), e = f64(y64), s = f64(s64);
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::fabs(g[i] - e[i]), std::ldexp(1.0, -7) * std::fabs(e[i]) + 785 * std::ldexp(1.0, -23) * s[i])
        << i;
}

// conv in BFloat16 (oneDNN's BFloat16 convolution on pieces of the batch
// where the CPU computes BFloat16, else oneDNN's Float32 one on widened
// copies), forward with a bias and both gradients, against Float64 (the
// CPU's direct loops). A forward output sums cin * kernel products and the
// bias; dx sums cout * kernel; dw sums batch * output points (in Float32
// per piece of the batch, the pieces added in Float32, rounded once); db
// sums batch * output points.
TEST(CpuHalves, BFloat16ConvolutionIsTheExactResultRoundedOnce) {
  const DType t = BFloat16;
  struct ConvCase {
    std::string name;
    Shape x, w;
    ConvOptions o;
  };
  const std::vector<ConvCase> cases{
      {"3x3 32=>64 pad 1, batch 16", {14, 14, 32, 16}, {3, 3, 32, 64}, {.pad = 1}},
      {"3x3 1=>8 pad 1, batch 20", {28, 28, 1, 20}, {3, 3, 1, 8}, {.pad = 1}},
      {"5x5 8=>16 stride 2, batch 37", {19, 17, 8, 37}, {5, 5, 8, 16}, {.stride = 2}},
      {"3x3 grouped 4=>6 stride (2, 1), batch 9", {19, 17, 4, 9}, {3, 3, 2, 6}, {.stride = {2, 1}, .pad = 1, .groups = 2}},
  };
  for (const ConvCase& c : cases) {
    set_seed(uint64_t(c.x.numel() + c.w.numel()));
    const Tensor x = values(c.x, t), w = values(c.w, t), b = values({c.w[3]}, t);
    const Tensor y = conv(x, w, b, c.o);
    const Tensor g = values(y.shape(), t);
    const Tensor x64 = x.to(Float64), w64 = w.to(Float64), b64 = b.to(Float64), g64 = g.to(Float64);
    const int64_t kernel = c.w[0] * c.w[1];
    const int64_t out_points = y.shape()[0] * y.shape()[1] * y.shape()[3];
    expect_rounded_once(c.name + " forward", y, conv(x64, w64, b64, c.o), conv(abs(x64), abs(w64), abs(b64), c.o),
                        c.w[2] * kernel + 1, t);
    auto grads = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb, const Tensor& gg) {
      return gradient([&](const Tensor& x1, const Tensor& w1, const Tensor& b1) { return sum(conv(x1, w1, b1, c.o) * gg); },
                      xx, ww, bb);
    };
    auto [dx, dw, db] = grads(x, w, b, g);
    auto [dx64, dw64, db64] = grads(x64, w64, b64, g64);
    auto [sx64, sw64, sb64] = grads(abs(x64), abs(w64), abs(b64), abs(g64));
    expect_rounded_once(c.name + " dx", dx, dx64, sx64, c.w[3] / (c.o.groups) * kernel, t);
    expect_rounded_once(c.name + " dw", dw, dw64, sw64, out_points, t);
    expect_rounded_once(c.name + " db", db, db64, sb64, out_points, t);
    // All three above came from one backend call (conv_backward); each
    // alone comes from its own pass, with the same bits.
    const Tensor dx_alone = std::get<0>(gradient([&](const Tensor& x1) { return sum(conv(x1, w, b, c.o) * g); }, x));
    const Tensor dw_alone = std::get<0>(gradient([&](const Tensor& w1) { return sum(conv(x, w1, b, c.o) * g); }, w));
    EXPECT_EQ(bits(dx_alone), bits(dx)) << c.name << ": dx alone and with dw";
    EXPECT_EQ(bits(dw_alone), bits(dw)) << c.name << ": dw alone and with dx";
  }
}

// precision_paths(CPU): every family in BFloat16 and Float16; GEMM and
// convolution in BFloat16 fast exactly where oneDNN's ISA has BFloat16
// arithmetic (cpuid: AVX512 F, BW, VL, DQ and AVX512-BF16, unless
// ONEDNN_MAX_CPU_ISA/DNNL_MAX_CPU_ISA or FLX_CPU_NATIVE_HALVES=0 hold it
// back), emulated elsewhere; Float16 emulated (oneDNN 2.6's CPU kernels
// have no Float16), the other families emulated; nothing missing.
TEST(PrecisionPaths, TheCpuSaysWhatItRuns) {
  const std::vector<PrecisionPath> paths = precision_paths(Device::cpu());
  ASSERT_EQ(paths.size(), 10u);
  const bool cpu_bf16 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512bf16");
  const bool held_back = std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA") ||
                         !cpu_backend::onednn::native_halves_enabled();
  const std::string isa = cpu_backend::onednn::isa_name();
  const bool onednn_bf16 = isa == "avx512_core_bf16" || isa == "avx512_core_amx";
  if (!held_back) EXPECT_EQ(onednn_bf16, cpu_bf16) << "oneDNN's ISA " << isa;
  const bool fast = onednn_bf16 && cpu_backend::onednn::native_halves_enabled();
  int n = 0;
  for (const PrecisionPath& p : paths) {
    SCOPED_TRACE(std::string(dtype_name(p.dtype)) + " " + p.op + ": " + p.speed + " (" + p.how + ")");
    EXPECT_TRUE(p.dtype == BFloat16 || p.dtype == Float16);
    EXPECT_FALSE(p.how.empty());
    const bool native_family = p.op == "GEMM" || p.op == "convolution";
    if (p.dtype == BFloat16 && native_family) {
      EXPECT_EQ(p.speed, fast ? "fast" : "emulated");
      if (fast) EXPECT_EQ(p.how.rfind("oneDNN ", 0), 0u);  // names oneDNN's kernel
      if (fast) EXPECT_NE(p.how.find("avx512_core"), std::string::npos);
    } else {
      EXPECT_EQ(p.speed, "emulated");
    }
    n += native_family;
  }
  EXPECT_EQ(n, 4);
  // The families in order, BFloat16 first.
  EXPECT_EQ(paths[0].dtype, BFloat16);
  EXPECT_EQ(paths[0].op, "GEMM");
  EXPECT_EQ(paths[1].op, "convolution");
  EXPECT_EQ(paths[5].dtype, Float16);
}

// The OpenCL plugin (PoCL here) says its half work is emulated (through
// Float32 kernels and CLBlast's SGEMM) on every device.
TEST(PrecisionPaths, OpenClSaysItsHalvesAreEmulated) {
  if (!backend_status("OpenCL").functional) GTEST_SKIP() << "no functional OpenCL backend";
  const auto devs = devices("OpenCL");
  ASSERT_FALSE(devs.empty());
  for (const auto& d : devs) {
    const std::vector<PrecisionPath> paths = precision_paths(d.device);
    ASSERT_EQ(paths.size(), 10u) << d.device.str();
    for (const PrecisionPath& p : paths) EXPECT_EQ(p.speed, "emulated") << d.device.str() << " " << p.op;
  }
}

// The CUDA plugin answers from the device's compute capability and its
// build (cuda_precision.cpp): on this project's GPUs (sm_80 and later, the
// architectures it is built for) GEMMs in both half types on the tensor
// cores; convolution and batch norm fast on cuDNN, or missing in a plugin
// built without it; nothing of GEMM missing.
TEST(PrecisionPaths, CudaSaysWhatItsDevicesRun) {
  if (!backend_status("CUDA").functional) GTEST_SKIP() << "no functional CUDA backend";
  for (const auto& d : devices("CUDA")) {
    const std::vector<PrecisionPath> paths = precision_paths(d.device);
    ASSERT_EQ(paths.size(), 10u) << d.device.str();
    for (const PrecisionPath& p : paths) {
      SCOPED_TRACE(d.device.str() + " " + std::string(dtype_name(p.dtype)) + " " + p.op + ": " + p.speed + " (" +
                   p.how + ")");
      EXPECT_FALSE(p.how.empty());
      if (p.op == "GEMM") EXPECT_EQ(p.speed, "fast");
      if (p.op == "convolution" || p.op == "batch norm") EXPECT_NE(p.speed, "emulated");
      if (p.op == "recurrent layers") EXPECT_EQ(p.speed, "emulated");
    }
  }
}

// Tensors: element types, shapes, factories, handles and views, printing.
#include <functional>
#include <sstream>

#include "backend_common/philox.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_values;

TEST(DType, SizesNamesAndPromotion) {
  EXPECT_EQ(dtype_size(Float32), 4u);
  EXPECT_EQ(dtype_size(Float64), 8u);
  EXPECT_EQ(dtype_size(Float16), 2u);
  EXPECT_EQ(dtype_size(BFloat16), 2u);
  EXPECT_EQ(dtype_size(Int32), 4u);
  EXPECT_EQ(dtype_size(Int64), 8u);
  EXPECT_EQ(dtype_size(UInt8), 1u);
  EXPECT_EQ(dtype_size(Bool), 1u);
  EXPECT_EQ(dtype_name(BFloat16), "BFloat16");
  EXPECT_EQ(promote_types(Float32, Float64), Float64);
  EXPECT_EQ(promote_types(Int64, Float16), Float16);
  EXPECT_EQ(promote_types(Float16, BFloat16), Float32);
  EXPECT_EQ(promote_types(Bool, UInt8), UInt8);
  EXPECT_EQ(promote_types(UInt8, Int32), Int32);
  EXPECT_EQ(promote_types(Int32, Int64), Int64);
}

TEST(DType, HalfConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f})
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 4096)), 1.0f);  // rounds to nearest even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(3.140625f)), 3.140625f);
}

TEST(Tensor, FactoriesShapesAndTypes) {
  Tensor z = zeros(2, 5);
  EXPECT_EQ(z.shape(), (Shape{2, 5}));
  EXPECT_EQ(z.dtype(), Float32);
  EXPECT_EQ(z.ndims(), 2);
  EXPECT_EQ(z.numel(), 10);
  EXPECT_EQ(z.size(1), 5);
  EXPECT_EQ(z.size(4), 1);  // trailing dims are 1, as in Julia
  EXPECT_EQ(z.device(), Device::cpu());
  expect_values(z, std::vector<double>(10, 0.0));
  expect_values(ones(Float64, 3), {1, 1, 1});
  EXPECT_EQ(ones(Float64, 3).dtype(), Float64);
  expect_values(full(7, 2, 2), {7, 7, 7, 7});
  EXPECT_EQ(full(7, 2).dtype(), Int64);
  EXPECT_EQ(full(0.5, 2).dtype(), Float32);
  EXPECT_EQ(full(Float16, 0.5, 2).dtype(), Float16);
  expect_values(full(Float16, 0.5, 2), {0.5, 0.5});
  Tensor t = tensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), Int32);
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tensor({1.5, 2.5}).dtype(), Float64);
  EXPECT_EQ(tensor({true, false}).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(tensor({3.5f}).item<float>(), 3.5f);
  EXPECT_EQ(tensor({3.5f}).item<int>(), 3);
  EXPECT_THROW(tensor(std::vector<float>{1, 2, 3}, {2, 2}), DimensionMismatch);
  EXPECT_THROW(zeros(2, 2).item<float>(), ArgumentError);
  EXPECT_THROW(zeros(-1, 2), DimensionMismatch);
  EXPECT_THROW(rand(Int32, 3), TypeError);
}

TEST(Tensor, AllElementTypesStoreAndConvert) {
  for (DType t : {Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8, Bool}) {
    Tensor x = tensor(std::vector<double>{0, 1, 2, 3}).to(t);
    EXPECT_EQ(x.dtype(), t);
    auto back = x.to_vector<double>();
    if (t == Bool) EXPECT_EQ(back, (std::vector<double>{0, 1, 1, 1}));
    else EXPECT_EQ(back, (std::vector<double>{0, 1, 2, 3})) << dtype_name(t);
  }
}

TEST(Tensor, RandIsReproducibleBySeedAndInRange) {
  set_seed(42);
  auto a = rand(1000).to_vector<float>();
  auto n1 = randn(Float64, 20000).to_vector<double>();
  set_seed(42);
  auto b = rand(1000).to_vector<float>();
  EXPECT_EQ(a, b);
  for (float v : a) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  double m = 0, s = 0;
  for (double v : n1) m += v;
  m /= double(n1.size());
  for (double v : n1) s += (v - m) * (v - m);
  s = std::sqrt(s / double(n1.size()));
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(s, 1.0, 0.03);
  auto c = rand(1000).to_vector<float>();
  EXPECT_NE(a, c);  // each call draws new numbers
}

// Philox4x32-10 against the known-answer vectors of its authors' Random123
// (kat_vectors). Every backend draws with the one body in
// include/flx/backend_philox.h, so the CPU-against-device comparisons cannot
// see a change to it: these can. Then the layout of a fill's draw and the
// mappings (uniform: lanes 0 and 1, 53 bits; normal: Box-Muller on 2 and 3).
TEST(Random, PhiloxMatchesRandom123sKnownAnswers) {
  namespace ph = flx::philox;
  using L = std::vector<uint32_t>;
  auto lanes = [](const ph::U4& r) { return L(r.x, r.x + 4); };
  EXPECT_EQ(lanes(ph::philox4x32_10(0, 0, 0, 0, 0, 0)), (L{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  const uint32_t ones = 0xffffffffu;
  EXPECT_EQ(lanes(ph::philox4x32_10(ones, ones, ones, ones, ones, ones)),
            (L{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  const L pi_digits{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
  EXPECT_EQ(lanes(ph::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u)),
            pi_digits);
  // bits(seed, offset, i): i is the counter's low half, offset its high half, seed the key.
  EXPECT_EQ(lanes(ph::bits(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull)), pi_digits);
  const ph::U4 r = ph::bits(42, 7, 3);
  EXPECT_EQ(ph::uniform01(r), 0.57952564081484614);
  EXPECT_NEAR(ph::normal01(r), 1.1260592557434914, 1e-15);  // libm's log and cos: within an ulp or so
}

TEST(Tensor, HandlesShareStorage) {
  Tensor a = zeros(3);
  Tensor b = a;  // a handle, like torch::Tensor
  EXPECT_EQ(a.id(), b.id());
  auto& impl = *b.impl();
  static_cast<float*>(detail::host_data(b))[1] = 5;
  (void)impl;
  expect_values(a, {0, 5, 0});
}

TEST(Tensor, SliceLastIsZeroCopy) {
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.slice_last(1, 3);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  expect_values(v, {3, 4, 5, 6});
  EXPECT_EQ(detail::host_data(v), static_cast<char*>(detail::host_data(x)) + 2 * sizeof(float));
  EXPECT_THROW(x.slice_last(2, 4), DimensionMismatch);
}

TEST(Tensor, ReshapeSharesAndPermuteCopies) {
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = reshape(x, {3, 2});
  EXPECT_EQ(detail::host_data(r), detail::host_data(x));
  expect_values(r, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{6}));
  EXPECT_THROW(reshape(x, {4, 2}), DimensionMismatch);
  Tensor p = permutedims(x, {1, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 2}));
  expect_values(p, {1, 3, 5, 2, 4, 6});
  Tensor y = reshape(tensor(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                               20, 21, 22, 23}),
                     {2, 3, 4});
  Tensor q = permutedims(y, {2, 0, 1});  // q[k, i, j] = y[i, j, k]
  EXPECT_EQ(q.shape(), (Shape{4, 2, 3}));
  auto qv = q.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(qv[size_t(k + 4 * i + 8 * j)], float(i + 2 * j + 6 * k));
  EXPECT_THROW(permutedims(y, {0, 0, 1}), ArgumentError);
}

// Issue 8: element and byte counts are overflow-checked wherever a shape
// becomes memory, on every device, with a typed error naming the shape.
TEST(Tensor, ElementAndByteCountsNeverWrap) {
  const int64_t big = int64_t(1) << 62;
  auto names_shape = [](const std::function<void()>& fn, const std::string& shape) {
    std::string m = flx::testing::error_message<ArgumentError>(fn);
    EXPECT_NE(m.find(shape), std::string::npos) << m;
  };
  names_shape([&] { zeros(big); }, "4611686018427387904");                      // 2^62 × 4 bytes wraps to 0
  names_shape([&] { zeros(int64_t(1) << 40, int64_t(1) << 40); }, "1099511627776×1099511627776");
  names_shape([&] { zeros(4, big + 1); }, "4×4611686018427387905");             // 4 × (2^62+1) wraps to 4
  names_shape([&] { zeros(Float64, int64_t(1) << 61); }, "2305843009213693952");  // 2^61 × 8 bytes
  EXPECT_THROW(reshape(rand(4), {4, big + 1}), ArgumentError);
  EXPECT_THROW(reshape(rand(4), {-1, big, 4}), ArgumentError);
  EXPECT_THROW(ones(Shape{3, big, 3}), ArgumentError);
  EXPECT_THROW((Shape{int64_t(1) << 32, int64_t(1) << 32}.numel()), ArgumentError);
  // A zero dim anywhere makes the product 0, however large the others.
  EXPECT_EQ((Shape{big, big, 0}.numel()), 0);
  EXPECT_EQ(zeros(big, big, 0).numel(), 0);
  // Products of valid operands' dims: matmul's (2^40 × 0) × (0 × 2^40).
  EXPECT_THROW(matmul(zeros(int64_t(1) << 40, 0), zeros(0, int64_t(1) << 40)), ArgumentError);
  // A count that fits but memory that does not: a typed OutOfMemory.
  EXPECT_THROW(zeros(int64_t(1) << 55), OutOfMemory);
  EXPECT_THROW(onehotbatch({0}, int64_t(1) << 40), OutOfMemory);
  EXPECT_THROW(onehotbatch({0}, int64_t(1) << 62), Error);
  for (Device d : flx::testing::accelerator_devices()) {
    EXPECT_THROW(empty(Float32, Shape{4, big + 1}, d), ArgumentError) << d;
    EXPECT_THROW(empty(Float32, Shape{big}, d), ArgumentError) << d;
  }
}

TEST(Device, ValueTypeAndPrinting) {
  Device c;
  EXPECT_EQ(c.backend(), "CPU");
  EXPECT_EQ(c.ordinal(), 0);
  EXPECT_EQ(c.str(), "CPU");
  Device g(BackendId::CUDA, 0);
  EXPECT_EQ(g.str(), "CUDA:0");
  std::ostringstream os;
  os << Device(BackendId::OpenCL, 1);
  EXPECT_EQ(os.str(), "OpenCL:1");
  EXPECT_EQ(supported_devices(), (std::vector<std::string>{"CPU", "CUDA", "AMDGPU", "Metal", "OpenCL"}));
  EXPECT_EQ(backend_id_from_name("opencl"), BackendId::OpenCL);
  EXPECT_THROW(backend_id_from_name("TPU"), ArgumentError);
  if (functional("CUDA"))
    EXPECT_EQ(zeros(2).to(g).device(), g);
  else
    EXPECT_THROW(zeros(2).to(g), BackendUnavailable);
}

TEST(Print, LikeJulia) {
  std::ostringstream os;
  os << tensor(std::vector<float>{1, 2.5f, -3, 0.125f, 10, 6}, {2, 3});
  EXPECT_EQ(os.str(),
            "2×3 Tensor{Float32} on CPU:\n"
            " 1.0  -3.0    10.0\n"
            " 2.5   0.125   6.0");
  os.str("");
  os << tensor(std::vector<float>{0.066846445f, 0.76706964f});
  EXPECT_EQ(os.str(), "2-element Tensor{Float32} on CPU:\n 0.066846445\n 0.76706964 ");
  os.str("");
  os << tensor(std::vector<int64_t>{1, 20, 3});
  EXPECT_EQ(os.str(), "3-element Tensor{Int64} on CPU:\n  1\n 20\n  3");
  os.str("");
  os << sum(ones(3));
  EXPECT_EQ(os.str(), "0-dim Tensor{Float32} on CPU:\n 3.0");
  os.str("");
  os << zeros(100);  // elided
  std::string s = os.str();
  EXPECT_NE(s.find("⋮"), std::string::npos);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 21);
  os.str("");
  os << zeros(3, 40);
  EXPECT_NE(os.str().find("…"), std::string::npos);
  os.str("");
  os << Tensor{};
  EXPECT_EQ(os.str(), "Tensor(undefined)");
}

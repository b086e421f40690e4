// gpu / cpu / cu entry points and device objects. Only the CPU backend is
// built in, so gpu() warns once and stays on the CPU, and cu() fails.
#include <cstdlib>

#include "cpu/cpu_backend.hpp"
#include "devices/registry.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::capture_stderr;
using flx::testing::expect_values;

struct Model {
  Tensor w;
  Tensor b;
};
FLX_FUNCTOR(Model, w, b)

// Where CUDA works, the fallback is checked in a whole program with the GPU
// hidden (CudaVisibleDevices.MinusOneGivesTheCpuWithOneWarning).
TEST(Movement, GpuFallsBackWithOneWarning) {
  if (functional("CUDA")) GTEST_SKIP() << "a CUDA GPU is functional here, so gpu() does not fall back";
  unsetenv("FLX_SILENCE_WARN_NO_GPU");
  Tensor x = rand(3);
  Tensor y;
  std::string err = capture_stderr([&] { y = x | gpu; });
  EXPECT_NE(err.find("Warning"), std::string::npos) << err;
  EXPECT_NE(err.find("no functional GPU"), std::string::npos) << err;
  EXPECT_NE(err.find("CUDA"), std::string::npos) << err;  // the reason names the preferred backend
  EXPECT_EQ(y.id(), x.id());  // returned unchanged
  std::string again = capture_stderr([&] { (void)gpu(Model{ones(2), ones(1)}); });
  EXPECT_EQ(again, "");  // once per process
}

TEST(Movement, GpuWarningCanBeSilenced) {
  setenv("FLX_SILENCE_WARN_NO_GPU", "1", 1);
  std::string err = capture_stderr([&] { (void)(rand(2) | gpu); });
  EXPECT_EQ(err, "");
}

TEST(Movement, CuNamesCuda) {
  if (functional("CUDA")) {  // cu moves to CUDA:0 with gpu's Float32 rule
    Tensor moved = cu(rand(Float64, 2));
    EXPECT_EQ(moved.device(), Device(BackendId::CUDA, 0));
    EXPECT_EQ(moved.dtype(), Float32);
    EXPECT_EQ(get_device(Model{ones(1), ones(1)} | cu), Device(BackendId::CUDA, 0));
    return;
  }
  try {
    (void)cu(rand(2));
    FAIL() << "cu() must fail without CUDA";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)(Model{ones(1), ones(1)} | cu), BackendUnavailable);
}

TEST(Movement, CpuAndDeviceObjectsArePipeable) {
  Model m{ones(2), zeros(1)};
  Model m2 = m | cpu;
  EXPECT_EQ(m2.w.id(), m.w.id());  // already there: unchanged
  Device d = Device::cpu();
  auto t = std::make_tuple(ones(1), ones(Float64, 1)) | d;
  EXPECT_EQ(std::get<1>(t).dtype(), Float64);  // device objects keep types
  Model m3 = d(m);
  EXPECT_EQ(m3.b.id(), m.b.id());
}

// A second device for tests: the CPU backend's own function table presented
// as "Metal:0", so moves and device checks run across two devices.
class TwoDevices : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!detail::find_backend(BackendId::Metal))
      detail::register_backend(BackendId::Metal, cpu_backend::core());
  }
  Device other{BackendId::Metal, 0};
};

TEST_F(TwoDevices, MovesKeepValuesAndOpsRejectMixedDevices) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f});
  Tensor y = x.to(other);
  EXPECT_EQ(y.device(), other);
  EXPECT_NE(y.id(), x.id());
  expect_values(y * 2, {2, 4, 6});
  try {
    (void)(x + y);
    FAIL() << "mixed devices must throw";
  } catch (const DeviceMismatch& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("CPU"), std::string::npos) << m;
    EXPECT_NE(m.find("Metal:0"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(ones(2, 2), ones(2).to(other)), DeviceMismatch);
  EXPECT_THROW(Device(BackendId::Metal, 3).operator()(x), BackendUnavailable);
  expect_values(y.to(Device::cpu()), {1, 2, 3});
}

TEST_F(TwoDevices, MovesAreDifferentiable) {
  // A model with one layer per device trains: the gradient returns to the
  // device of each parameter.
  Model m{tensor({2.0}), tensor({3.0}).to(other)};
  auto [g] = gradient([&](const Model& mm) {
    Tensor h = (mm.w * 1.5).to(other);
    return sum((h * mm.b).to(Device::cpu()));
  }, m);
  EXPECT_EQ(g.w.device(), Device::cpu());
  EXPECT_EQ(g.b.device(), other);
  expect_values(g.w, {4.5});
  expect_values(g.b, {3.0});
}

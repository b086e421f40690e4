// flx::synchronize(device) waits for the work queued on the device: results
// are read straight from memory, never through a copy that would wait by
// itself (to_vector does). Own executable: it mounts a test backend as
// "Metal".
//  - The deferred backend (tests/plugins/deferred_backend.cpp) runs nothing
//    until it is synchronized, so the result is absent before
//    synchronize(device) and present after it, deterministically.
//  - On the real devices (OpenCL here, CUDA on a GPU machine) the result is
//    copied asynchronously into pinned host memory behind enough work that
//    the copy is still pending when synchronize is called.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backend/backend.hpp"
#include "cpu/cpu_backend.hpp"
#include "deferred_backend.hpp"
#include "devices/registry.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {

class DeferredBackend : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!detail::find_backend(BackendId::Metal))
      detail::register_backend(BackendId::Metal, flx_test_deferred_backend(cpu_backend::core(), "Metal"));
  }
  // y's elements as they are in the device's memory now.
  static std::vector<float> in_memory(const Tensor& y) {
    std::vector<float> v(size_t(y.numel()));
    std::memcpy(v.data(), flx_test_deferred_address(detail::mem(y)), v.size() * sizeof(float));
    return v;
  }
  Device dev{BackendId::Metal, 0};
};

bool any_nan(const std::vector<float>& v) {
  for (float x : v)
    if (std::isnan(x)) return true;
  return false;
}

}  // namespace

TEST_F(DeferredBackend, SynchronizeRunsTheWorkQueuedOnTheDevice) {
  set_seed(5);
  Tensor x_cpu = rand(Float32, {1000});
  const std::vector<float> expected = (x_cpu * x_cpu + 1.0f).to_vector<float>();
  Tensor x = x_cpu | dev;  // moving waits for the copy
  ASSERT_EQ(flx_test_deferred_pending(), 0u);
  Tensor y = x * x + 1.0f;
  ASSERT_GT(flx_test_deferred_pending(), 0u) << "the ops wait in the backend's queue";
  const std::vector<float> before = in_memory(y);
  for (size_t i = 0; i < before.size(); ++i)
    ASSERT_TRUE(std::isnan(before[i])) << "element " << i << " was written before anything ran the queue";
  synchronize(dev);
  EXPECT_EQ(flx_test_deferred_pending(), 0u) << "synchronize ran everything queued";
  EXPECT_EQ(in_memory(y), expected) << "synchronize(" << dev << ") returned before the result was written";
}

TEST_F(DeferredBackend, BlockingCopiesGiveFinalResultsWithoutSynchronize) {
  // The backend keeps the ABI's promise that a copy to pageable memory is
  // complete on return: what libflx's to_vector relies on.
  Tensor y = (full(Float32, 2.0, {16}) | dev) * 3.0f;
  ASSERT_GT(flx_test_deferred_pending(), 0u);
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(16, 6.0f));
}

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// y = tanh(w·y), `reps` times, queued on w's device.
Tensor products(const Tensor& w, Tensor y, int reps) {
  for (int k = 0; k < reps; ++k) y = flx::tanh(matmul(w, y));
  return y;
}

// On device 0 of `backend`: about 100 ms of products of 1024×1024 matrices
// are queued, then an asynchronous copy of the result into pinned host
// memory. Right before synchronize(device) the copy must not have started
// (else the run cannot tell, and tries again with twice the work); right
// after it, the memory must hold the result.
void expect_synchronize_waits(const char* backend) {
  if (!functional(backend)) GTEST_SKIP() << backend << " is not functional here: " << backend_status(backend).reason;
  const Device d = get_device(backend, 0);
  const detail::Backend& be = detail::backend_of(d);
  constexpr int64_t n = 1024;
  const size_t bytes = size_t(n * n) * sizeof(float);
  set_seed(6);
  const Tensor w = rand(Float32, {n, n}) * (2.0f / float(n)) | d;  // rows sum to about 1
  const Tensor y0 = rand(Float32, {n, n}) | d;
  // The time of one product, measured with its kernels already built.
  (void)products(w, y0, 1).to_vector<float>();
  const auto t = std::chrono::steady_clock::now();
  (void)products(w, y0, 2).to_vector<float>();
  int reps = std::clamp(int(100.0 / std::max(ms_since(t) / 2, 1e-3)), 1, 1 << 14);
  auto* pinned = static_cast<float*>(be.host_alloc(bytes));
  for (int attempt = 0; attempt < 3; ++attempt, reps *= 2) {
    std::fill(pinned, pinned + n * n, std::nanf(""));
    Tensor y = products(w, y0, reps);
    be.copy_d2h(d.ordinal(), pinned, detail::mem(y), bytes);  // asynchronous: the host side is pinned
    const bool not_started = std::isnan(pinned[0]) && std::isnan(pinned[n * n - 1]);
    synchronize(d);
    const std::vector<float> seen(pinned, pinned + n * n);
    if (!not_started) {
      be.synchronize(d.ordinal());  // drained, whatever flx::synchronize did, before the memory is reused
      continue;
    }
    be.host_free(pinned);
    const std::vector<float> result = y.to_vector<float>();
    ASSERT_FALSE(any_nan(result));
    EXPECT_EQ(seen, result) << "synchronize(" << d << ") returned before the copy queued behind " << reps
                            << " products was done";
    return;
  }
  be.host_free(pinned);
  GTEST_SKIP() << d << " was done with " << reps / 2 << " products before this thread could look, "
               << "so this run cannot tell whether synchronize waits";
}
}  // namespace

TEST(Synchronize, WaitsForTheQueuedWorkOnOpenCl) { expect_synchronize_waits("OpenCL"); }
TEST(Synchronize, WaitsForTheQueuedWorkOnCuda) { expect_synchronize_waits("CUDA"); }

TEST(Synchronize, TheCpuIsAlwaysDoneAndAMissingDeviceIsAnError) {
  EXPECT_NO_THROW(synchronize(Device::cpu()));
  EXPECT_THROW(synchronize(Device(BackendId::OpenCL, 99)), BackendUnavailable);
}

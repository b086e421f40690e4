// Which GPU plugins the sanitized test program (flx_sanitized_tests, ASan
// + UBSan) may load. ctest points FLX_BACKEND_PATH at a folder holding the
// OpenCL plugin alone (PoCL runs under ASan), so the CUDA plugin is never
// loaded into it: the CUDA runtime needs ASan's protect_shadow_gap=0, and
// the driver's allocations at exit would match LeakSanitizer, which fails
// the test.
#include <cstdlib>

#include "test_util.hpp"

using namespace flx;

TEST(SanitizedBackends, TheCudaPluginIsNotFound) {
  const char* path = std::getenv("FLX_BACKEND_PATH");
  if (!path) GTEST_SKIP() << "FLX_BACKEND_PATH is unset: run through ctest, which sets it for this program";
  const BackendStatus st = backend_status("CUDA");
  EXPECT_FALSE(st.plugin_found) << "the CUDA plugin was found at " << st.plugin_path << " (FLX_BACKEND_PATH=" << path
                                << "); under ASan it must stay hidden";
  EXPECT_FALSE(st.functional);
}

#ifdef FLX_TEST_HAVE_OPENCL
TEST(SanitizedBackends, TheOpenClPluginIsFound) {
  if (!std::getenv("FLX_BACKEND_PATH")) GTEST_SKIP() << "FLX_BACKEND_PATH is unset: run through ctest";
  const BackendStatus st = backend_status("OpenCL");
  EXPECT_TRUE(st.plugin_found) << st.reason;
}
#endif

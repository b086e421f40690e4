// The OpenCL plugin's convolution workspace, from inside (its objects are
// linked into this test): conv_workspace caps the im2col buffer and a batch
// goes through it in chunks, and a call given less workspace than asked for
// (down to one sample's) uses smaller chunks with the same results, bit for
// bit (each sample's products are the same calls whatever the chunk). The
// values themselves are checked against the reference by the plugin suite
// (tests/plugins/test_plugin_dnn.cpp). Skips without an OpenCL device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

flx_mem mem_of(cl_mem m, uint64_t offset = 0) { return {reinterpret_cast<flx_buffer>(m), offset}; }

class OpenClConvChunks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (state().devices.empty()) GTEST_SKIP() << "no OpenCL device: " << state().reason;
  }
  Device& dev() { return device(0); }
  std::vector<std::unique_ptr<TempBuffer>> keep_;
  cl_mem buffer(const std::vector<float>& v) {
    keep_.push_back(std::make_unique<TempBuffer>(dev(), v.size() * 4));
    if (!v.empty())
      EXPECT_EQ(clEnqueueWriteBuffer(dev().queue, keep_.back()->mem, CL_TRUE, 0, v.size() * 4, v.data(), 0, nullptr,
                                     nullptr),
                CL_SUCCESS);
    return keep_.back()->mem;
  }
  std::vector<float> read(cl_mem m, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(clEnqueueReadBuffer(dev().queue, m, CL_TRUE, 0, n * 4, v.data(), 0, nullptr, nullptr), CL_SUCCESS);
    return v;
  }
  static std::vector<float> values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> u(-16, 16);
    std::vector<float> v(n);
    for (float& x : v) x = float(u(rng)) / 16;
    return v;
  }
};

// A 2-D convolution with two groups over a batch of 5.
flx_conv_desc shape(int64_t batch) {
  flx_conv_desc d{};
  d.struct_size = sizeof d;
  d.dtype = FLX_F32;
  d.nspatial = 2;
  d.groups = 2;
  d.batch = batch;
  d.in_channels = 4;
  d.out_channels = 6;
  const int64_t in[2] = {6, 5}, k[2] = {3, 2};
  for (int i = 0; i < 2; ++i) {
    d.in_size[i] = in[i];
    d.kernel[i] = k[i];
    d.stride[i] = 1;
    d.dilation[i] = 1;
    d.pad_lo[i] = 1;
    d.pad_hi[i] = 0;
    d.out_size[i] = in[i] + 1 - k[i] + 1;
  }
  return d;
}

TEST_F(OpenClConvChunks, WorkspaceIsCappedAndHoldsWholeSamples) {
  flx_conv_desc d = shape(1000);
  d.in_channels = d.out_channels = 64;
  d.groups = 1;
  d.in_size[0] = d.in_size[1] = 32;
  d.kernel[0] = d.kernel[1] = 3;
  d.out_size[0] = d.out_size[1] = 32 + 1 - 3 + 1;
  const uint64_t per_sample = 64 * 9 * 31 * 31 * 4;  // col: channels * taps * output points
  uint64_t bytes = 0;
  ASSERT_EQ(conv_workspace(nullptr, 0, &d, FLX_CONV_FORWARD, &bytes), FLX_OK) << last_error();
  EXPECT_LE(bytes, uint64_t(64) << 20);
  EXPECT_GT(bytes, (uint64_t(64) << 20) - per_sample);
  EXPECT_EQ(bytes % per_sample, 0u);
  // One sample larger than the cap gets exactly its own.
  d.in_size[0] = d.in_size[1] = 200;
  d.out_size[0] = d.out_size[1] = 200 + 1 - 3 + 1;
  ASSERT_EQ(conv_workspace(nullptr, 0, &d, FLX_CONV_BACKWARD_FILTER, &bytes), FLX_OK) << last_error();
  EXPECT_EQ(bytes, uint64_t(64) * 9 * 199 * 199 * 4);
  // No batch, no workspace.
  d.batch = 0;
  ASSERT_EQ(conv_workspace(nullptr, 0, &d, FLX_CONV_FORWARD, &bytes), FLX_OK) << last_error();
  EXPECT_EQ(bytes, 0u);
}

TEST_F(OpenClConvChunks, ASmallerWorkspaceGivesTheSameResults) {
  flx_conv_desc d = shape(5);
  const size_t nx = 5 * 4 * 30, nw = 6 * 2 * 6, ny = 5 * 6 * 5 * 5;
  cl_mem x = buffer(values(nx, 1)), w = buffer(values(nw, 2)), b = buffer(values(6, 3)), dy = buffer(values(ny, 4));
  uint64_t full = 0;
  ASSERT_EQ(conv_workspace(nullptr, 0, &d, FLX_CONV_FORWARD, &full), FLX_OK) << last_error();
  const uint64_t one = 4 * 6 * 25 * 4;  // one sample's col
  ASSERT_EQ(full, 5 * one) << "the whole batch fits the cap";
  // Each pass with the full workspace, then with one sample's and with two
  // and a half samples' (chunks of 2, 2, 1); every result the same bits.
  for (int pass = FLX_CONV_FORWARD; pass <= FLX_CONV_BACKWARD_FILTER; ++pass) {
    SCOPED_TRACE("pass " + std::to_string(pass));
    std::vector<float> first;
    for (uint64_t bytes : {full, one, 2 * one + one / 2}) {
      flx_conv_desc c = d;
      cl_mem ws = buffer(std::vector<float>(bytes / 4 + 1, 0.0f));
      c.workspace = mem_of(ws, 4);  // at an offset, too
      c.workspace_bytes = bytes;
      cl_mem out = buffer(std::vector<float>(pass == FLX_CONV_FORWARD ? ny : pass == FLX_CONV_BACKWARD_DATA ? nx : nw,
                                             9.0f));
      cl_mem db = buffer(std::vector<float>(6, 9.0f));
      int st;
      if (pass == FLX_CONV_FORWARD) {
        c.x = mem_of(x);
        c.w = mem_of(w);
        c.b = mem_of(b);
        c.y = mem_of(out);
        st = conv_forward(nullptr, 0, &c, nullptr);
      } else if (pass == FLX_CONV_BACKWARD_DATA) {
        c.dy = mem_of(dy);
        c.w = mem_of(w);
        c.dx = mem_of(out);
        st = conv_backward_data(nullptr, 0, &c, nullptr);
      } else {
        c.x = mem_of(x);
        c.dy = mem_of(dy);
        c.dw = mem_of(out);
        c.db = mem_of(db);
        st = conv_backward_filter(nullptr, 0, &c, nullptr);
      }
      ASSERT_EQ(st, FLX_OK) << last_error();
      std::vector<float> got = read(out, pass == FLX_CONV_FORWARD ? ny : pass == FLX_CONV_BACKWARD_DATA ? nx : nw);
      if (first.empty()) {
        first = got;
        continue;
      }
      EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << bytes << " bytes of workspace";
    }
  }
  // Less than one sample's: a typed error saying how much is needed.
  flx_conv_desc c = d;
  c.x = mem_of(x);
  c.w = mem_of(w);
  c.y = mem_of(buffer(std::vector<float>(ny)));
  c.workspace = mem_of(buffer(std::vector<float>(16)));
  c.workspace_bytes = 64;
  EXPECT_EQ(conv_forward(nullptr, 0, &c, nullptr), FLX_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error()).find("needs a workspace of at least " + std::to_string(one) + " bytes"),
            std::string::npos)
      << last_error();
}

}  // namespace
}  // namespace flx_ocl

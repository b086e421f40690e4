// The OpenCL plugin's programs, from inside (its objects are linked into this
// test): a process builds only the kernel families it launches, a family
// declared outside the plugin's kernel sources (as a new table's would be)
// is built apart from the compute table's, concurrent first users of a
// program build it once, and a failed build is a device error carrying the
// compiler's log. Runs on the devices of POCL_DEVICES (two PoCL devices under
// ctest); skips when there is none.
#include <gtest/gtest.h>

#include <barrier>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ocl_blas.hpp"
#include "ocl_common.hpp"
#include "ocl_dtype.hpp"
#include "ocl_embedded.hpp"

namespace flx_ocl {
namespace {

// Families declared here, as a new table's would be beside its kernels: the
// plugin's sources list none of them.
const KernelFamily kTableFamily{"test_table", KernelNeeds::kPrelude, {R"CLC(
kernel void twice_k(global uchar* b, long o, long n) {
  global ST* p = PTR(ST, b, o);
  for (long t = GID; t < n; t += GSIZE) st(p, t, (CT)(ld(p, t) * K(2)));
}
)CLC"}};
const KernelFamily kFirstConcurrent{"concurrent_a", KernelNeeds::kPrelude,
                                    {"kernel void a_k(global int* p) { p[0] = 1; }\n"}};
const KernelFamily kSecondConcurrent{"concurrent_b", KernelNeeds::kPrelude,
                                     {"kernel void b_k(global int* p) { p[0] = 2; }\n"}};
const KernelFamily kBroken{"broken", KernelNeeds::kPrelude,
                           {"kernel void broken_k(global int* p) { p[0] = flx_no_such_name; }\n"}};

flx_mem mem_of(cl_mem m) { return {reinterpret_cast<flx_buffer>(m), 0}; }

std::string describe(const std::vector<BuiltProgram>& builds) {
  std::string s;
  for (const BuiltProgram& b : builds)
    s += std::string(" ") + b.family + "/" + dtype_name(b.dtype) + (b.ok ? "" : "(failed)");
  return s.empty() ? " none" : s;
}

// The builds since `before` (built_programs only grows).
std::vector<BuiltProgram> builds_since(Device& d, size_t before) {
  std::vector<BuiltProgram> all = built_programs(d);
  return {all.begin() + std::ptrdiff_t(before), all.end()};
}

class OpenClPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    if (state().devices.empty()) GTEST_SKIP() << "no OpenCL device: " << state().reason;
  }
  Device& dev() { return device(0); }
  // A device buffer holding v (the plugin's TempBuffer, released with the
  // test), and reading it back.
  cl_mem buffer(const std::vector<int32_t>& v) {
    buffers_.push_back(std::make_unique<TempBuffer>(dev(), v.size() * 4));
    cl_mem m = buffers_.back()->mem;
    check_cl(clEnqueueWriteBuffer(dev().queue, m, CL_TRUE, 0, v.size() * 4, v.data(), 0, nullptr, nullptr),
             "clEnqueueWriteBuffer");
    return m;
  }
  std::vector<int32_t> read(cl_mem m, size_t n) {
    std::vector<int32_t> v(n);
    check_cl(clEnqueueReadBuffer(dev().queue, m, CL_TRUE, 0, n * 4, v.data(), 0, nullptr, nullptr),
             "clEnqueueReadBuffer");
    return v;
  }

 private:
  std::vector<std::unique_ptr<TempBuffer>> buffers_;
};

// CLBlast's kernels are compiled by PoCL on their first launch, as the
// plugin's are: the first product of each kind (routine, transpositions,
// m·n·k to a power of two, device) waits for its queue, so that no process
// ends during such a compile. Each product here is also checked against
// the product computed on the host.
TEST_F(OpenClPrograms, TheFirstClBlastProductOfEachKindWaitsForItsQueue) {
  struct Product {
    bool ta, tb;
    size_t m, n, k;
    int device;
    size_t new_kinds;  // in a process that has run no product before
  };
  // A kind, again, in the same power of two (6·7·310 = 13020 and 12600 are
  // both in [2^13, 2^14)), transposed, transposed in the next power of two
  // (5·7·500 = 17500), again, and on a second device where there is one.
  std::vector<Product> products = {{false, false, 6, 7, 300, 0, 1}, {false, false, 6, 7, 300, 0, 0},
                                   {false, false, 6, 7, 310, 0, 0}, {true, false, 6, 7, 300, 0, 1},
                                   {true, false, 5, 7, 500, 0, 1},  {true, false, 5, 7, 500, 0, 0}};
  if (state().devices.size() > 1) products.push_back({false, false, 6, 7, 300, 1, 1});
  // ctest runs each test in a process of its own, which has run no product
  // yet; run with the others, a kind may have been seen before.
  const bool fresh = blas_kinds_waited_for() == 0;
  for (const Product& p : products) {
    SCOPED_TRACE(std::string(p.ta ? "T" : "N") + (p.tb ? "T" : "N") + " " + std::to_string(p.m) + "x" +
                 std::to_string(p.n) + "x" + std::to_string(p.k) + " on device " + std::to_string(p.device));
    Device& d = device(p.device);
    const size_t ra = p.ta ? p.k : p.m, ca = p.ta ? p.m : p.k, rb = p.tb ? p.n : p.k, cb = p.tb ? p.k : p.n;
    std::vector<float> a(ra * ca), b(rb * cb), c(p.m * p.n, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3) / 4;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2) / 2;
    TempBuffer ba(d, a.size() * 4), bb(d, b.size() * 4), bc(d, c.size() * 4);
    check_cl(clEnqueueWriteBuffer(d.queue, ba.mem, CL_TRUE, 0, a.size() * 4, a.data(), 0, nullptr, nullptr), "write");
    check_cl(clEnqueueWriteBuffer(d.queue, bb.mem, CL_TRUE, 0, b.size() * 4, b.data(), 0, nullptr, nullptr), "write");
    const bool seen = blas_kind_waited_for(d.queue, "CLBlastSgemm", p.ta, p.tb, p.m, p.n, p.k);
    const size_t kinds_before = blas_kinds_waited_for();
    blas_gemm(d.queue, FLX_F32, p.ta, p.tb, p.m, p.n, p.k, 1.0, {ba.mem, 0, ra}, {bb.mem, 0, rb}, 0.0,
              {bc.mem, 0, p.m});
    EXPECT_TRUE(blas_kind_waited_for(d.queue, "CLBlastSgemm", p.ta, p.tb, p.m, p.n, p.k));
    EXPECT_EQ(blas_kinds_waited_for() - kinds_before, fresh ? p.new_kinds : seen ? 0u : 1u);
    check_cl(clEnqueueReadBuffer(d.queue, bc.mem, CL_TRUE, 0, c.size() * 4, c.data(), 0, nullptr, nullptr), "read");
    for (size_t i = 0; i < p.m; ++i)
      for (size_t j = 0; j < p.n; ++j) {
        double want = 0;  // exact in float: small multiples of 1/8
        for (size_t l = 0; l < p.k; ++l)
          want += double(p.ta ? a[l + i * ra] : a[i + l * ra]) * double(p.tb ? b[j + l * rb] : b[l + j * rb]);
        ASSERT_EQ(double(c[i + j * p.m]), want) << "C(" << i << ", " << j << ")";
      }
  }
}

// x + y and sum(x) through the plugin's ABI calls, on Int32 (no other test
// here uses Int32 with the compute kernels): one program, the compute
// table's, and nothing of the families above.
TEST_F(OpenClPrograms, MapAndReduceBuildOnlyTheComputeFamily) {
  const size_t before = built_programs(dev()).size();
  const std::vector<int32_t> xs = {1, -2, 3, 40, 5, 6, -7, 8}, ys = {10, 20, 30, 40, 50, 60, 70, 80};
  cl_mem x = buffer(xs), y = buffer(ys), out = buffer(std::vector<int32_t>(8)), total = buffer({0});

  flx_map_desc m{};
  m.op = FLX_OP_ADD;
  m.ndim = 1;
  m.shape[0] = m.numel = 8;
  m.ninputs = 2;
  m.in_dtype = m.out_dtype = FLX_I32;
  m.in[0].mem = mem_of(x);
  m.in[0].strides[0] = 1;
  m.in[1].mem = mem_of(y);
  m.in[1].strides[0] = 1;
  m.out = mem_of(out);
  ASSERT_EQ(map(nullptr, 0, &m, nullptr), FLX_OK) << last_error();

  flx_reduce_desc r{};
  r.op = FLX_REDUCE_SUM;
  r.dtype = FLX_I32;
  r.nred_runs = 1;
  r.red_extent[0] = 8;
  r.red_stride[0] = 1;
  r.nkept = 1;
  r.nred = 8;
  r.scale = 1;
  r.in = mem_of(x);
  r.out = mem_of(total);
  uint64_t workspace = 1;
  ASSERT_EQ(reduce_workspace(nullptr, 0, &r, &workspace), FLX_OK) << last_error();
  ASSERT_EQ(workspace, 0u);
  ASSERT_EQ(reduce(nullptr, 0, &r, nullptr), FLX_OK) << last_error();

  std::vector<int32_t> sums = read(out, 8);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(sums[i], xs[i] + ys[i]) << i;
  EXPECT_EQ(read(total, 1)[0], 1 - 2 + 3 + 40 + 5 + 6 - 7 + 8);

  const std::vector<BuiltProgram> built = builds_since(dev(), before);
  ASSERT_EQ(built.size(), 1u) << "built:" << describe(built);
  EXPECT_STREQ(built[0].family.c_str(), "compute");
  EXPECT_EQ(built[0].dtype, FLX_I32);
  EXPECT_TRUE(built[0].ok);
}

// A family declared outside the plugin builds on its first launch, alone (it
// needs the prelude only), and its kernels are in no program of the compute
// table nor the compute table's in its.
TEST_F(OpenClPrograms, AFamilyOfItsOwnIsBuiltApartOnFirstLaunch) {
  EXPECT_EQ(program_source(kComputeKernels).find("twice_k"), std::string::npos);
  const size_t before = built_programs(dev()).size();
  const std::vector<int32_t> xs = {3, -4, 5, 0, 7};
  cl_mem x = buffer(xs);
  launch(dev(), dev().queue, kTableFamily, FLX_I32, "twice_k", xs.size(), x, cl_long(0), cl_long(xs.size()));
  std::vector<int32_t> got = read(x, xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], 2 * xs[i]) << i;

  const std::vector<BuiltProgram> built = builds_since(dev(), before);
  ASSERT_EQ(built.size(), 1u) << "built:" << describe(built);
  EXPECT_EQ(built[0].family, "test_table");
  EXPECT_EQ(built[0].dtype, FLX_I32);

  try {
    kernel(dev(), kTableFamily, FLX_I32, "map_k");
    ADD_FAILURE() << "map_k found among the test_table kernels";
  } catch (const Error& e) {
    EXPECT_EQ(e.status, FLX_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("no kernel map_k among the test_table kernels for Int32"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(builds_since(dev(), before).size(), 1u) << "a lookup in a built program built again";
}

// What goes before a family's kernels is what it says it needs.
TEST(OpenClProgramSource, AFamilyGetsTheElementFunctionsAndOpSwitchesItNeeds) {
  const KernelFamily prelude{"p", KernelNeeds::kPrelude, {"kernel void k(global int* p) {}\n"}};
  const KernelFamily elem{"e", KernelNeeds::kElementFunctions, {"kernel void k(global int* p) {}\n"}};
  const KernelFamily ops{"o", KernelNeeds::kOpSwitches, {"kernel void k(global int* p) {}\n", "// second part\n"}};
  for (const KernelFamily* f : {&prelude, &elem, &ops}) {
    const std::string s = program_source(*f);
    EXPECT_EQ(s.rfind(embedded::prelude_cl, 0), 0u) << f->name << ": the prelude comes first";
    EXPECT_EQ(s.find("max_nan(") != std::string::npos, f != &prelude) << f->name;
    EXPECT_EQ(s.find("op_value(") != std::string::npos, f == &ops) << f->name;
    EXPECT_NE(s.find("kernel void k(global int* p) {}"), std::string::npos) << f->name;
  }
  const std::string s = program_source(ops);
  EXPECT_LT(s.find("kernel void k("), s.find("// second part")) << "the parts, joined in order";
}

// The bodies the kernels share with the host and CUDA reach their text: the
// build puts a header in place of a .cl file's #include "flx/..." line
// (embed_text.cmake), as OpenCL has no include path for a program built
// from a string, so no such line is left for the OpenCL compiler.
TEST(OpenClProgramSource, SharedHeadersStandInForTheirIncludeLines) {
  const std::string prelude = embedded::prelude_cl;
  EXPECT_EQ(prelude.find("#include \""), std::string::npos);
  EXPECT_NE(prelude.find("FLX_U16 flx_f32_bits_to_half(FLX_U32 u) {"), std::string::npos) << "half_bits.h";
  const std::string compute = program_source(kComputeKernels);
  EXPECT_EQ(compute.find("#include \""), std::string::npos);
  EXPECT_NE(compute.find("philox_u4 philox4x32_10(FLX_U32 c0,"), std::string::npos) << "backend_philox.h";
  EXPECT_LT(compute.find("philox4x32_10("), compute.find("kernel void random_k(")) << "the header where it was included";
}

// Eight threads ask at once for the kernels of two unbuilt families: each
// family is built once, on one thread, and every thread gets its kernel.
TEST_F(OpenClPrograms, ConcurrentFirstUsersBuildAProgramOnce) {
  const size_t before = built_programs(dev()).size();
  constexpr int kThreads = 8;
  std::barrier start(kThreads);
  std::vector<const Kernel*> got(kThreads, nullptr);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        got[size_t(i)] = i % 2 ? &kernel(dev(), kFirstConcurrent, FLX_F32, "a_k")
                               : &kernel(dev(), kSecondConcurrent, FLX_F32, "b_k");
      } catch (const Error& e) {
        errors[size_t(i)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[size_t(i)], "") << "thread " << i;
    EXPECT_EQ(got[size_t(i)], got[size_t(i % 2)]) << "thread " << i << " got another kernel object";
  }
  ASSERT_NE(got[0], nullptr);
  EXPECT_EQ(got[0]->name, "b_k");
  const std::vector<BuiltProgram> built = builds_since(dev(), before);
  int a = 0, b = 0;
  for (const BuiltProgram& p : built) {
    a += p.family == "concurrent_a";
    b += p.family == "concurrent_b";
  }
  EXPECT_EQ(a, 1) << "built:" << describe(built);
  EXPECT_EQ(b, 1) << "built:" << describe(built);
  EXPECT_EQ(built.size(), 2u) << "built:" << describe(built);
}

// A source that does not compile: FLX_ERR_DEVICE naming the family, dtype
// and device, with the compiler's log (which names the culprit); at the ABI
// boundary that is the status and the thread's last error. Not retried.
TEST_F(OpenClPrograms, AFailedBuildIsADeviceErrorWithTheBuildLog) {
  const size_t before = built_programs(dev()).size();
  std::string first;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int status = guard("test", [&] { kernel(dev(), kBroken, FLX_F32, "broken_k"); });
    EXPECT_EQ(status, FLX_ERR_DEVICE);
    const std::string msg = last_error();
    for (const char* part : {"building the OpenCL broken kernels for Float32 on ", "clBuildProgram",
                             "CL_BUILD_PROGRAM_FAILURE", "flx_no_such_name"})
      EXPECT_NE(msg.find(part), std::string::npos) << msg << "\nlacks: " << part;
    if (attempt == 0) first = msg;
    else EXPECT_EQ(msg, first);
  }
  const std::vector<BuiltProgram> built = builds_since(dev(), before);
  ASSERT_EQ(built.size(), 1u) << "built:" << describe(built);
  EXPECT_EQ(built[0].family, "broken");
  EXPECT_FALSE(built[0].ok);
}

}  // namespace
}  // namespace flx_ocl

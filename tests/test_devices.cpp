// The plugin loader (with real broken plugins), preferences and device
// selection. Each scenario runs in a fresh process (probe_backend), since
// flx loads each plugin and reads the preference once per process.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/backend.hpp"
#include "flx/backend.h"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::has;
namespace fs = std::filesystem;

namespace {

// Run a shell command, returning stdout and stderr together.
std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

std::string probe(const std::string& env, const std::string& args) {
  return run("env -u FLX_GPU_BACKEND -u FLX_SILENCE_WARN_NO_GPU " + env + " " FLX_TEST_PROBE " " + args);
}

std::string plugin_dir(const char* kind) { return std::string("FLX_BACKEND_PATH=") + FLX_TEST_PLUGIN_DIR + "/" + kind; }

using flx::testing::TempDir;

// The build tree holds the real CUDA plugin beside libflx, where the loader
// also looks, and a GPU machine can run it: an environment that loads a copy
// of libflx from the folder lib instead (LD_LIBRARY_PATH's other folders,
// where flx's dependencies may lie, kept after it).
std::string alone(const TempDir& lib) {
  fs::copy_file(FLX_TEST_LIBFLX, lib.path / FLX_TEST_LIBFLX_SONAME);
  const char* rest = std::getenv("LD_LIBRARY_PATH");
  return "LD_LIBRARY_PATH=" + lib.path.string() + (rest && *rest ? std::string(":") + rest : std::string());
}


}  // namespace

TEST(PluginLoader, WrongAbiMajorVersionIsRejectedWithTheReason) {
  std::string out = probe(plugin_dir("bad_version"), "CUDA cu");
  EXPECT_TRUE(has(out, "found=1 functional=0")) << out;
  EXPECT_TRUE(has(out, "built for backend ABI " + std::to_string(FLX_BACKEND_ABI_MAJOR + 97) + ".x; this libflx needs " +
                           std::to_string(FLX_BACKEND_ABI_MAJOR) + ".x"))
      << out;
  EXPECT_TRUE(has(out, "BackendUnavailable: cu: the CUDA backend is not available")) << out;
  // A plugin of the first ABI (whose table began with api_version = 1).
  out = probe(plugin_dir("v1"), "CUDA");
  EXPECT_TRUE(has(out, "found=1 functional=0")) << out;
  EXPECT_TRUE(has(out, "built for backend ABI 1.x; this libflx needs 2.x")) << out;
}

// Compatibility rules (backend.h): a plugin built against an older minor
// version loads; what it lacks is refused when used, with a typed error.
TEST(PluginLoader, PluginOfAnOlderMinorVersionLoadsAndWorks) {
  static_assert(FLX_BACKEND_ABI_MINOR >= 1, "the old-minor plugin is built against minor 0");
  std::string out = probe(plugin_dir("old_minor"), "CUDA abi");
  EXPECT_TRUE(has(out, "found=1 functional=1")) << out;
  EXPECT_TRUE(has(out, "abi=2.0\n")) << out;
  EXPECT_TRUE(has(out, "tables=compute v1 (lacks random, cast, map, reduce, gemm, gather, scatter_add, permute, "
                           "softmax, softmax_backward, optim_step)\n"))
      << out;
  out = probe(plugin_dir("old_minor"), "CUDA ops");
  EXPECT_TRUE(has(out, "roundtrip 1 2 3\n")) << out;  // memory and copies of the core table
  EXPECT_TRUE(has(out, "fill 0 0 0 0\n")) << out;     // the one function its compute table has
  EXPECT_TRUE(has(out, "NotImplemented: add of Float32 cannot run on CUDA: its backend (plugin ")) << out;
  EXPECT_TRUE(has(out, "ABI 2.0) has no `map` in its \"compute\" table")) << out;
  // precision_path came with ABI 2.9: a plugin of 2.0 is not asked, and says nothing.
  out = probe(plugin_dir("old_minor"), "CUDA precision");
  EXPECT_TRUE(has(out, "precision_paths=0\n")) << out;
  // Nor does one of 2.9 without the call (it is optional).
  out = probe(plugin_dir("release"), "CUDA precision");
  EXPECT_TRUE(has(out, "precision_paths=0\n")) << out;
}

// Minor 1's release_cached: an allocation that fails as out of memory is
// tried again once the backend has given its cache back.
TEST(PluginLoader, AFailedAllocationIsRetriedAfterTheBackendReleasesItsCache) {
  std::string out = probe(plugin_dir("release"), "CUDA ops");
  EXPECT_TRUE(has(out, "found=1 functional=1")) << out;
  EXPECT_TRUE(has(out, "roundtrip 1 2 3\n")) << out;  // two allocations, each after a release
}

// Minor 2's memory_info: memory_stats reports what the backend's allocator
// holds (here a 1 MiB cache, given back by the release that let the tensor's
// allocation through) beside flx's own count.
TEST(PluginLoader, MemoryStatsReportTheAllocatorsReservedBytes) {
  std::string out = probe(plugin_dir("release"), "CUDA memory");
  EXPECT_TRUE(has(out, "before in_use=0 reserved=1048576 reserved_peak=1048576\n")) << out;
  EXPECT_TRUE(has(out, "during in_use=4000 reserved=4000 reserved_peak=1048576\n")) << out;
  EXPECT_TRUE(has(out, "after in_use=0 reserved=0 reserved_peak=1048576\n")) << out;
  // A backend without memory_info (the CPU) says so with -1.
  EXPECT_EQ(memory_stats(Device::cpu()).reserved, -1);
}

// The CPU backend keeps freed blocks for reuse; a smaller tensor (an
// epoch's last batch, the last piece of an evaluation) takes a cached block
// of up to twice its size rather than adding a block of its own to what the
// process holds. (Earlier tests may have left blocks of the smaller size in
// the cache: those come first.)
TEST(CpuAllocator, ASmallerTensorReusesAFreedBlockOfUpToTwiceItsSize) {
  // Blocks that earlier tests of this process left in the cache would be
  // handed out first: start from an empty cache.
  ASSERT_TRUE(detail::backend_of(Device::cpu()).release_cached(0));
  const void* freed = nullptr;
  {
    const Tensor big = empty(Float32, Shape{3'000'017}, Device::cpu());  // 12 MB
    freed = detail::host_data(big);
  }
  std::vector<Tensor> held;
  bool reused = false;
  for (int i = 0; i < 64 && !reused; ++i) {
    held.push_back(empty(Float32, Shape{1'800'000}, Device::cpu()));  // 7.2 MB: 0.6 of it
    reused = detail::host_data(held.back()) == freed;
  }
  EXPECT_TRUE(reused) << "the 12 MB block stayed in the cache while " << held.size() << " 7.2 MB blocks were made";
}

TEST(PluginLoader, PluginWithoutAComputeTableLoadsAndOpsSayWhatIsMissing) {
  std::string out = probe(plugin_dir("no_compute"), "CUDA abi");
  EXPECT_TRUE(has(out, "found=1 functional=1")) << out;
  EXPECT_TRUE(has(out, "tables=\n")) << out;
  out = probe(plugin_dir("no_compute"), "CUDA ops");
  EXPECT_TRUE(has(out, "roundtrip 1 2 3\n")) << out;
  EXPECT_TRUE(has(out, "NotImplemented: fill of Float32 cannot run on CUDA: its backend (plugin ")) << out;
  EXPECT_TRUE(has(out, "provides no \"compute\" table version 1")) << out;
  EXPECT_TRUE(has(out, "NotImplemented: add of Float32 cannot run on CUDA")) << out;
}

TEST(PluginLoader, MissingEntryPointIsRejected) {
  std::string out = probe(plugin_dir("no_entry"), "CUDA");
  EXPECT_TRUE(has(out, "found=1 functional=0")) << out;
  EXPECT_TRUE(has(out, "does not export the entry point flx_backend_entry")) << out;
}

TEST(PluginLoader, NotFunctionalKeepsThePluginsReason) {
  std::string out = probe(plugin_dir("not_functional"), "CUDA gpu");
  EXPECT_TRUE(has(out, "found=1 functional=0")) << out;
  EXPECT_TRUE(has(out, "reason=not functional: no driver")) << out;
  EXPECT_TRUE(has(out, "gpu -> CPU Float64")) << out;  // falls back, types kept ...
  EXPECT_TRUE(has(out, "Warning: flx: gpu() found no functional GPU")) << out;   // ... never silently
  EXPECT_TRUE(has(out, "Preferred backend CUDA: not functional: no driver")) << out;
}

TEST(PluginLoader, MissingPluginSaysWhereItLooked) {
  TempDir empty, lib;
  std::string out = probe(alone(lib) + " FLX_BACKEND_PATH=" + empty.path.string(), "CUDA");
  EXPECT_TRUE(has(out, "found=0 functional=0")) << out;
  EXPECT_TRUE(has(out, "libflx_backend_cuda.so not found")) << out;
  EXPECT_TRUE(has(out, empty.path.string())) << out;
  out = probe("", "Metal");
  EXPECT_TRUE(has(out, "not built in this installation")) << out;
}

#ifdef FLX_TEST_HAVE_OPENCL
TEST(PluginLoader, PluginsBesideTheRealLibflxAreFoundThroughASymlink) {
  // libflx loaded through a link in a folder of its own: its plugins lie
  // beside the file the link points to (the build tree's OpenCL plugin).
  TempDir lib;
  fs::create_symlink(fs::canonical(FLX_TEST_LIBFLX), lib.path / FLX_TEST_LIBFLX_SONAME);
  std::string out = probe("LD_LIBRARY_PATH=" + lib.path.string(), "OpenCL");
  const fs::path beside = fs::canonical(FLX_TEST_LIBFLX).parent_path() / "libflx_backend_opencl.so";
  EXPECT_TRUE(has(out, "found=1")) << out;
  EXPECT_TRUE(has(out, "path=" + beside.string())) << out;
}
#endif

TEST(PluginLoader, FunctionalAnswersPerBackend) {
  EXPECT_TRUE(functional("CPU"));
  EXPECT_FALSE(functional("AMDGPU"));
  EXPECT_FALSE(backend_status("AMDGPU").reason.empty());
  EXPECT_NO_THROW(load_backend("CPU"));
  EXPECT_THROW(load_backend("AMDGPU"), BackendUnavailable);
  EXPECT_THROW(functional("TPU"), ArgumentError);
}

TEST(Selection, FallbackLogsLikeTheSeed) {
  TempDir empty, lib;
  const std::string env = alone(lib) + " FLX_BACKEND_PATH=" + empty.path.string();
  std::string out = probe(env, "CUDA get_device");
  EXPECT_TRUE(has(out, "[ Info: Using backend set in preferences: CUDA.")) << out;
  EXPECT_TRUE(has(out, "┌ Warning: Trying to use backend: CUDA but it is not functional")) << out;
  EXPECT_TRUE(has(out, "[ Info: Using backend: CPU.")) << out;
  EXPECT_TRUE(has(out, "device CPU")) << out;
  out = probe(env, "CUDA force");
  EXPECT_TRUE(has(out, "BackendUnavailable: get_device: the preferred backend CUDA is not functional")) << out;
}

#ifdef FLX_TEST_HAVE_CUDA
// The real CUDA plugin (built beside libflx) in whole programs, with
// CUDA_VISIBLE_DEVICES as users set it. Without a GPU (CI) the reason is the
// missing driver whatever the variable says; with one, "-1" hides it.
namespace {
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
bool cuda_has_driver() { return !has(probe("", "CUDA"), "no NVIDIA driver"); }
}  // namespace

TEST(CudaVisibleDevices, MinusOneGivesTheCpuWithOneWarning) {
  std::string out = probe("CUDA_VISIBLE_DEVICES=-1 FLX_GPU_BACKEND=CUDA", "CUDA gpu");
  EXPECT_TRUE(has(out, "found=1 functional=0")) << out;
  EXPECT_TRUE(has(out, cuda_has_driver() ? "reason=CUDA_VISIBLE_DEVICES=-1 hides every GPU"
                                         : "reason=no NVIDIA driver"))
      << out;
  EXPECT_TRUE(has(out, "gpu -> CPU Float64")) << out;  // gpu() leaves data on the CPU as it is
  EXPECT_EQ(count(out, "Warning:"), 1) << out;
  // cu asks for CUDA by name: an error saying why, not a fallback.
  out = probe("CUDA_VISIBLE_DEVICES=-1", "CUDA cu");
  EXPECT_TRUE(has(out, "BackendUnavailable: cu: the CUDA backend is not available")) << out;
}

TEST(CudaVisibleDevices, SelectsTheNumberedGpu) {
  if (!cuda_has_driver() || !functional("CUDA")) GTEST_SKIP() << "no usable NVIDIA GPU: " << backend_status("CUDA").reason;
  std::string out = probe("CUDA_VISIBLE_DEVICES=0 FLX_GPU_BACKEND=CUDA", "CUDA gpu");
  EXPECT_TRUE(has(out, "found=1 functional=1")) << out;
  EXPECT_TRUE(has(out, "gpu -> CUDA:0 Float32")) << out;
  EXPECT_EQ(count(out, "Warning:"), 0) << out;
  // One GPU visible: CUDA:1 does not exist whatever the machine has.
  out = probe("CUDA_VISIBLE_DEVICES=0", "CUDA devices");
  EXPECT_TRUE(has(out, "devices=1\n")) << out;
}
#endif

TEST(Selection, PreferenceFileIsFoundUpwardsAndEnvironmentOverrides) {
  TempDir dir;
  fs::create_directories(dir.path / "sub" / "deeper");
  {
    std::ofstream f(dir.path / "LocalPreferences.toml");
    f << "[Other]\nkeep = 1\n\n[Flux]\ngpu_backend = \"CPU\"\n";
  }
  std::string cd = "cd " + (dir.path / "sub" / "deeper").string() + " && ";
  std::string out = run(cd + "env -u FLX_GPU_BACKEND " FLX_TEST_PROBE " CPU get_device");
  EXPECT_TRUE(has(out, "[ Info: Using backend set in preferences: CPU.")) << out;
  EXPECT_FALSE(has(out, "Warning")) << out;  // the CPU by choice: no warning
  out = run(cd + "FLX_GPU_BACKEND=Metal " FLX_TEST_PROBE " CPU get_device");
  EXPECT_TRUE(has(out, "preferences: Metal.")) << out;
  out = run(cd + "FLX_GPU_BACKEND=Nope " FLX_TEST_PROBE " CPU get_device");
  EXPECT_TRUE(has(out, "unknown backend \"Nope\"")) << out;
  EXPECT_TRUE(has(out, "FLX_GPU_BACKEND")) << out;
}

// A preference that is not one of the backend names, or not a string at all,
// is an error when the backend is selected (as Flux errors on an unsupported
// GPU_BACKEND), naming where it came from and the accepted names; never the
// default in silence.
TEST(Selection, BadPreferenceIsAnErrorSayingWhereAndWhatIsAccepted) {
  const std::string names = "CPU, CUDA, AMDGPU, Metal, OpenCL";
  auto in_dir_with = [](const std::string& prefs, const std::string& what, const std::string& env = "") {
    TempDir dir;
    { std::ofstream(dir.path / "LocalPreferences.toml") << prefs; }
    std::string out = run("cd " + dir.path.string() + " && env -u FLX_GPU_BACKEND " + env + " " FLX_TEST_PROBE " CPU " + what);
    return std::pair{out, (dir.path / "LocalPreferences.toml").string()};
  };
  // {the value in the file, how the message shows it}
  for (auto [value, shown] : {std::pair{"42", "integer 42"}, {"true", "boolean true"}, {"[\"CUDA\"]", "array"}}) {
    auto [out, file] = in_dir_with(std::string("[Flux]\ngpu_backend = ") + value + "\n", "get_device");
    EXPECT_TRUE(has(out, "ArgumentError")) << value << "\n" << out;
    EXPECT_TRUE(has(out, file)) << out;
    EXPECT_TRUE(has(out, "gpu_backend")) << out;
    EXPECT_TRUE(has(out, shown)) << out;
    EXPECT_TRUE(has(out, names)) << out;
    EXPECT_TRUE(has(out, "gpu_backend = \"CUDA\"")) << out;  // how to fix it
    EXPECT_FALSE(has(out, "device CPU")) << out;              // no silent default
  }
  {  // [Flux] that is not a table
    auto [out, file] = in_dir_with("Flux = 3\n", "get_device");
    EXPECT_TRUE(has(out, "ArgumentError") && has(out, file) && has(out, "[Flux]")) << out;
  }
  {  // an unknown name in the file: which file, which key
    auto [out, file] = in_dir_with("[Flux]\ngpu_backend = \"Nonsense\"\n", "gpu");
    EXPECT_TRUE(has(out, "ArgumentError") && has(out, "\"Nonsense\"") && has(out, file) && has(out, names)) << out;
    EXPECT_FALSE(has(out, "gpu ->")) << out;
  }
  {  // the environment variable overrides the file, and says so when it is wrong
    auto [out, file] = in_dir_with("[Flux]\ngpu_backend = 42\n", "get_device", "FLX_GPU_BACKEND=Nonsense");
    EXPECT_TRUE(has(out, "ArgumentError") && has(out, "\"Nonsense\"") && has(out, names)) << out;
    EXPECT_TRUE(has(out, "environment variable FLX_GPU_BACKEND")) << out;
    EXPECT_FALSE(has(out, file)) << out;
    std::tie(out, file) = in_dir_with("[Flux]\ngpu_backend = 42\n", "get_device", "FLX_GPU_BACKEND=CPU");
    EXPECT_TRUE(has(out, "device CPU")) << out;
  }
}

// gpu_backend(name) that cannot write says which file, the system's reason
// and what to do instead, and leaves the old file as it was. As root,
// permission bits do not stop a write, so the directory is made truly
// read-only: a read-only bind mount of it in a private mount namespace
// (unshare -m; needs CAP_SYS_ADMIN), or mode 0555 when not root.
TEST(Selection, GpuBackendThatCannotWriteSaysWhyAndWhatToDo) {
  TempDir dir;
  const std::string before = "[Flux]\ngpu_backend = \"CUDA\"\n";
  { std::ofstream(dir.path / "LocalPreferences.toml") << before; }
  const std::string d = dir.path.string(), set = "cd " + d + " && env -u FLX_GPU_BACKEND " FLX_TEST_PROBE " OpenCL set";
  std::string out;
  if (geteuid() != 0) {
    fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
    out = run(set);
    fs::permissions(dir.path, fs::perms::owner_all);
  } else {
    out = run("unshare -m sh -c 'mount --bind " + d + " " + d + " && mount -o remount,bind,ro " + d + " && " + set + "'");
    if (!has(out, "found=")) GTEST_SKIP() << "cannot make a read-only directory as root without CAP_SYS_ADMIN: " << out;
  }
  EXPECT_TRUE(has(out, "ArgumentError")) << out;
  EXPECT_TRUE(has(out, (dir.path / "LocalPreferences.toml").string())) << out;
  EXPECT_TRUE(has(out, "Read-only file system") || has(out, "Permission denied")) << out;  // errno's text
  EXPECT_TRUE(has(out, "FLX_GPU_BACKEND=OpenCL")) << out;                                  // what to do instead
  std::ifstream f(dir.path / "LocalPreferences.toml");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), {}), 1);  // no temp file left
}

// A write that fails half way (here: a file size limit of 0, which stops
// root too) must not replace the preferences with a cut-off file.
TEST(Selection, GpuBackendThatFailsMidWriteKeepsTheOldFile) {
  TempDir dir;
  const std::string before = "# mine\n[Other]\nkeep = 1\n\n[Flux]\ngpu_backend = \"CUDA\"\n";
  { std::ofstream(dir.path / "LocalPreferences.toml") << before; }
  // SIGXFSZ ignored (inherited through exec), so write() fails with EFBIG.
  std::string out = run("cd " + dir.path.string() + " && ulimit -f 0 && trap '' XFSZ && env -u FLX_GPU_BACKEND " +
                        FLX_TEST_PROBE " CPU set");
  EXPECT_TRUE(has(out, "ArgumentError")) << out;
  EXPECT_TRUE(has(out, "File too large")) << out;
  EXPECT_TRUE(has(out, "FLX_GPU_BACKEND=CPU")) << out;
  std::ifstream f(dir.path / "LocalPreferences.toml");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), {}), 1);  // no temp file left
}

TEST(Selection, GpuBackendWritesThePreferenceKeepingTheRest) {
  TempDir dir;
  {
    std::ofstream f(dir.path / "LocalPreferences.toml");
    f << "[Other]\nkeep = 1\n\n[Flux]\nother_key = \"x\"\ngpu_backend = \"CUDA\"\n";
  }
  auto old = fs::current_path();
  fs::current_path(dir.path);
  std::string log = flx::testing::capture_stderr([] { gpu_backend("opencl"); });
  fs::current_path(old);
  EXPECT_TRUE(has(log, "┌ Info: New GPU backend set: OpenCL.")) << log;
  EXPECT_TRUE(has(log, "└ Restart your program for this change to take effect!")) << log;
  std::ifstream f(dir.path / "LocalPreferences.toml");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "gpu_backend = 'OpenCL'") || has(text, "gpu_backend = \"OpenCL\"")) << text;
  EXPECT_TRUE(has(text, "keep = 1")) << text;
  EXPECT_TRUE(has(text, "other_key")) << text;
  std::string out = run("cd " + dir.path.string() + " && env -u FLX_GPU_BACKEND " FLX_TEST_PROBE " CPU get_device");
  EXPECT_TRUE(has(out, "preferences: OpenCL.")) << out;  // a new process sees it
  EXPECT_THROW(gpu_backend("TPU"), ArgumentError);
}

TEST(Selection, GpuBackendKeepsCommentsAndLayout) {
  auto set_in = [](const std::string& before) {
    TempDir dir;
    { std::ofstream(dir.path / "LocalPreferences.toml") << before; }
    auto old = fs::current_path();
    fs::current_path(dir.path);
    flx::testing::capture_stderr([] { gpu_backend("OpenCL"); });
    fs::current_path(old);
    std::ifstream f(dir.path / "LocalPreferences.toml");
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  // The key replaced in place; every other line byte for byte.
  EXPECT_EQ(set_in("# my settings\n[Other]\nkeep = 1  # why\n\n[ \"Flux\" ]\n# chosen by hand\ngpu_backend = 'CUDA'\nx = 2\n"),
            "# my settings\n[Other]\nkeep = 1  # why\n\n[ \"Flux\" ]\n# chosen by hand\ngpu_backend = \"OpenCL\"\nx = 2\n");
  // A [Flux] table without the key gets it first; a file without [Flux] gets the table at its end.
  EXPECT_EQ(set_in("[Flux]\nx = 2\n"), "[Flux]\ngpu_backend = \"OpenCL\"\nx = 2\n");
  EXPECT_EQ(set_in("# only a comment\n[A]\nb = 1\n"), "# only a comment\n[A]\nb = 1\n\n[Flux]\ngpu_backend = \"OpenCL\"\n");
  // A layout the line editor does not handle (a dotted key) is rewritten from
  // the parsed file: the same settings, still valid TOML.
  std::string dotted = set_in("Flux.gpu_backend = \"CUDA\"\nFlux.x = 2\n");
  EXPECT_TRUE(has(dotted, "[Flux]") && has(dotted, "gpu_backend = 'OpenCL'") && has(dotted, "x = 2")) << dotted;
  EXPECT_FALSE(has(dotted, "CUDA")) << dotted;
}

TEST(Selection, GetDeviceByNameAndOfModels) {
  EXPECT_EQ(get_device("CPU", 0), Device::cpu());
  EXPECT_THROW(get_device("CPU", 1), BackendUnavailable);
  EXPECT_THROW(get_device("AMDGPU", 0), BackendUnavailable);
  auto m = Chain(Dense(2, 3), Dense(3, 1));
  EXPECT_EQ(get_device(m), Device::cpu());
  EXPECT_EQ(get_device(ones(2)), Device::cpu());
  EXPECT_EQ(supported_devices().size(), 5u);
}

// A Device whose ordinal does not exist is refused where it is first used,
// naming it and how many devices there are, not later as "different devices,
// CPU and CPU".
TEST(Selection, NonexistentOrdinalIsRefusedWhenUsed) {
  auto refused = [](const Device& d, const std::string& count) {
    try {
      (void)rand(2).to(d);
      ADD_FAILURE() << d << " was accepted";
    } catch (const BackendUnavailable& e) {
      EXPECT_TRUE(has(e.what(), d.str())) << e.what();
      EXPECT_TRUE(has(e.what(), count)) << e.what();
    }
  };
  EXPECT_EQ(Device(BackendId::CPU, 5).str(), "CPU:5");  // printed apart from the CPU
  refused(Device(BackendId::CPU, 5), "one device");
  refused(Device(BackendId::CPU, -1), "one device");
  EXPECT_THROW(memory_stats(Device(BackendId::CPU, 1)), BackendUnavailable);
  EXPECT_THROW((void)(ones(2) | Device(BackendId::CPU, 2)), BackendUnavailable);
#ifdef FLX_TEST_HAVE_OPENCL
  if (functional("OpenCL")) {
    const size_t n = devices("OpenCL").size();
    refused(Device(BackendId::OpenCL, int(n)), "has " + std::to_string(n) + " device");
    refused(Device(BackendId::OpenCL, -1), "has " + std::to_string(n) + " device");
  }
#endif
}

TEST(MemoryStats, CountsLiveTensorsDeterministically) {
  MemoryStats before = memory_stats(Device::cpu());
  {
    Tensor t = empty(Float32, {1000});
    MemoryStats during = memory_stats(Device::cpu());
    EXPECT_EQ(during.in_use - before.in_use, 4000);
    EXPECT_EQ(during.allocations - before.allocations, 1);
    EXPECT_GE(during.peak, during.in_use);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).in_use, before.in_use);  // freed when the last handle went
}

#ifdef FLX_TEST_HAVE_OPENCL
TEST(Selection, OpenClIsUsedWhenAskedForByNameOnly) {
  // PoCL's devices are CPUs: automatic selection skips them (a CUDA GPU,
  // which it would take, is hidden) ...
  std::string out = probe("CUDA_VISIBLE_DEVICES=-1", "OpenCL get_device");
  EXPECT_TRUE(has(out, "device CPU")) << out;
  // ... a preference for OpenCL uses them, and gpu() turns Float64 into Float32.
  out = probe("FLX_GPU_BACKEND=OpenCL", "OpenCL gpu");
  EXPECT_TRUE(has(out, "found=1 functional=1")) << out;
  EXPECT_TRUE(has(out, "gpu -> OpenCL:0 Float32")) << out;
  EXPECT_FALSE(has(out, "Warning")) << out;
}
#endif

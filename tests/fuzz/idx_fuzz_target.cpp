// libFuzzer-style target for the IDX readers: whatever bytes lie where
// datasets::fashion_mnist looks for its files must either load or raise a
// flx::Error; never crash, leak, trip a sanitizer or let std::bad_alloc out.
//
// Input: a selector byte, then the file. Selector bit 0: the file is the
// images file (else the labels file); bit 1: its name ends in .gz (else not;
// gzread reads both kinds of content under either name); bit 2: the train
// split's names (else the test split's). The other file of the pair is a
// valid 3-item file.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "flx/datasets.hpp"
#include "flx/ops.hpp"

namespace {

namespace fs = std::filesystem;

// $FLX_DATA for the whole run: a fresh directory, removed at exit.
struct DataDir {
  fs::path root;
  DataDir() {
    char tmpl[] = "/tmp/flx_idx_fuzz_XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::perror("flx_idx_fuzz: mkdtemp");
      std::abort();
    }
    root = tmpl;
    fs::create_directory(root / "fashion-mnist");
    ::setenv("FLX_DATA", root.c_str(), 1);
  }
  ~DataDir() { fs::remove_all(root); }
};

void write(const fs::path& p, const uint8_t* data, size_t size) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

}  // namespace

// A valid uncompressed IDX file of 3 items: 28×28 images or labels 0..9.
std::vector<uint8_t> idx_seed(bool images) {
  std::vector<uint8_t> b = {0, 0, 8, uint8_t(images ? 3 : 1), 0, 0, 0, 3};
  if (images) b.insert(b.end(), {0, 0, 0, 28, 0, 0, 0, 28});
  const size_t n = images ? 3 * 28 * 28 : 3;
  for (size_t i = 0; i < n; ++i) b.push_back(uint8_t(images ? i * 13 : i * 4 % 10));
  return b;
}

long idx_fuzz_loaded = 0;

// The whole target body. Returns true if the files loaded.
bool idx_fuzz_one(const uint8_t* data, size_t size) {
  static DataDir dir;
  static const std::vector<uint8_t> valid[2] = {idx_seed(false), idx_seed(true)};
  if (size == 0) return false;
  const bool images = data[0] & 1, gz = data[0] & 2, train = data[0] & 4;
  const fs::path d = dir.root / "fashion-mnist";
  const std::string prefix = train ? "train" : "t10k";
  const std::string names[2] = {prefix + "-labels-idx1-ubyte", prefix + "-images-idx3-ubyte"};
  for (const auto& n : names) {  // a stale file under the other suffix would be read instead
    fs::remove(d / n);
    fs::remove(d / (n + ".gz"));
  }
  write(d / (names[images] + (gz ? ".gz" : "")), data + 1, size - 1);
  write(d / names[!images], valid[!images].data(), valid[!images].size());
  try {
    auto [x, y] = flx::datasets::fashion_mnist(train ? "train" : "test");
    if (x.ndims() != 4 || x.shape()[3] != y.numel()) {
      std::fprintf(stderr, "flx_idx_fuzz: loaded %lld images but %lld labels\n",
                   static_cast<long long>(x.ndims() == 4 ? x.shape()[3] : -1), static_cast<long long>(y.numel()));
      std::abort();
    }
    // Every value is read, so that a short buffer shows up under ASan.
    volatile float s = flx::sum(x).item<float>() + float(flx::sum(y).item<int64_t>());
    (void)s;
    ++idx_fuzz_loaded;
    return true;
  } catch (const flx::Error&) {
    return false;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  idx_fuzz_one(data, size);
  return 0;
}

// Fashion-MNIST from Debian's dataset-fashion-mnist, and every way its files
// can be missing or damaged.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.hpp"

using namespace flx;
namespace fs = std::filesystem;

namespace {

// Sets FLX_DATA for one test and restores it after.
struct DataDir {
  fs::path dir;
  std::string saved;
  bool had = false;
  DataDir() {
    dir = fs::temp_directory_path() / ("flx_data_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "fashion-mnist");
    if (const char* s = std::getenv("FLX_DATA")) had = true, saved = s;
    ::setenv("FLX_DATA", dir.c_str(), 1);
  }
  ~DataDir() {
    if (had) ::setenv("FLX_DATA", saved.c_str(), 1);
    else ::unsetenv("FLX_DATA");
    fs::remove_all(dir);
  }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream(dir / "fashion-mnist" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
};

std::vector<uint8_t> idx(std::vector<uint32_t> dims, size_t payload, uint8_t value = 1) {
  std::vector<uint8_t> b = {0, 0, 8, uint8_t(dims.size())};
  for (uint32_t d : dims) b.insert(b.end(), {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)});
  b.insert(b.end(), payload, value);
  return b;
}

std::string error_of(const std::function<void()>& f) { return flx::testing::error_message(f); }

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

}  // namespace

TEST(Datasets, FashionMnistFromTheDebianPackage) {
  if (!have_fashion_mnist() && !std::getenv("FLX_DATA"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)";
  auto [x, y] = datasets::fashion_mnist("train");
  EXPECT_EQ(x.shape(), (Shape{28, 28, 1, 60000}));
  EXPECT_EQ(x.dtype(), Float32);
  EXPECT_EQ(y.shape(), (Shape{60000}));
  EXPECT_EQ(y.dtype(), Int64);
  EXPECT_GE(minimum(x).item<float>(), 0.0f);
  EXPECT_EQ(maximum(x).item<float>(), 1.0f);
  // Fashion-MNIST is balanced: 6,000 training images of each class; its first
  // image is an ankle boot (9), the first test image too.
  auto counts = sum(onehotbatch(y, 10).to(Int64), {1}).to_vector<int64_t>();
  EXPECT_EQ(counts, std::vector<int64_t>(10, 6000));
  EXPECT_EQ(y.to_vector<int64_t>()[0], 9);
  auto test = datasets::fashion_mnist("test");
  EXPECT_EQ(test.features.shape(), (Shape{28, 28, 1, 10000}));
  EXPECT_EQ(test.targets.to_vector<int64_t>()[0], 9);
  EXPECT_EQ(sum(onehotbatch(test.targets, 10).to(Int64), {1}).to_vector<int64_t>(), std::vector<int64_t>(10, 1000));
  // Width first: pixel (column c, row r) of image i is byte r*28 + c of the
  // file; the mean over rows and over columns differ, so a transpose shows.
  Tensor img = x.slice_last(0, 1);
  EXPECT_NE(sum(img, {0}).to_vector<float>(), sum(img, {1}).to_vector<float>());
}

TEST(Datasets, BadSplitIsAnArgumentError) {
  EXPECT_THROW(datasets::fashion_mnist("validation"), ArgumentError);
}

TEST(Datasets, MissingAndDamagedFilesNameThePathAndTheFix) {
  DataDir d;
  ::setenv("FLX_DATA", d.dir.c_str(), 1);
  // MNIST: nothing there (and no Debian package); the message says where to put it.
  std::string m = error_of([] { datasets::mnist("test"); });
  EXPECT_NE(m.find("t10k-images-idx3-ubyte not found"), std::string::npos) << m;
  EXPECT_NE(m.find((d.dir / "mnist").string()), std::string::npos) << m;
  EXPECT_NE(m.find("$FLX_DATA/mnist"), std::string::npos) << m;

  auto images = idx({3, 28, 28}, 3 * 28 * 28);
  auto labels = idx({3}, 3);
  d.write("t10k-images-idx3-ubyte", images);
  d.write("t10k-labels-idx1-ubyte", labels);
  auto [x, y] = datasets::fashion_mnist("test");  // the FLX_DATA copy wins over /usr/share
  EXPECT_EQ(x.shape(), (Shape{28, 28, 1, 3}));
  EXPECT_FLOAT_EQ(x.to_vector<float>()[5], 1.0f / 255.0f);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));

  auto expect_error = [&](const std::string& file, std::vector<uint8_t> bytes, const std::string& phrase) {
    d.write(file, bytes);
    std::string msg = error_of([] { datasets::fashion_mnist("test"); });
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_NE(msg.find((d.dir / "fashion-mnist" / file).string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  };
  auto truncated = images;
  truncated.resize(truncated.size() - 10);
  expect_error("t10k-images-idx3-ubyte", truncated, "expected 2368 bytes");
  expect_error("t10k-images-idx3-ubyte", {1, 2, 3}, "too short");
  auto bad_magic = images;
  bad_magic[0] = 0x1f;
  expect_error("t10k-images-idx3-ubyte", bad_magic, "magic");
  auto floats = images;
  floats[2] = 0x0d;
  expect_error("t10k-images-idx3-ubyte", floats, "unsigned byte");
  expect_error("t10k-images-idx3-ubyte", idx({3, 0xffffff, 0xffffff}, 10), "more data than the file holds");
  // A gzip stream cut short.
  std::vector<uint8_t> gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x63, 0x60, 0x60};
  expect_error("t10k-images-idx3-ubyte", gz, "damaged");
  d.write("t10k-images-idx3-ubyte", images);
  expect_error("t10k-labels-idx1-ubyte", idx({2}, 2), "holds 3 images but");
  expect_error("t10k-labels-idx1-ubyte", idx({3}, 3, 12), "label 12");
}

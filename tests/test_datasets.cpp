// Fashion-MNIST from Debian's dataset-fashion-mnist, and every way its files
// can be missing or damaged.
#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "gzip_bytes.hpp"
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

std::vector<uint8_t> gzip(const std::vector<uint8_t>& in) { return flx::testing::gzip_bytes(in); }

std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

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
  // Width first: FashionMnistPixelsAreItsIdxBytesWidthFirst checks each pixel.
}

namespace {

// The bytes of a gzip file, inflated here with zlib (not by the reader under test).
std::vector<uint8_t> gunzip(const fs::path& p) {
  std::vector<uint8_t> out;
  gzFile f = gzopen(p.c_str(), "rb");
  if (!f) return out;
  std::vector<uint8_t> buf(1 << 16);
  for (int n; (n = gzread(f, buf.data(), unsigned(buf.size()))) > 0;)
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  gzclose(f);
  return out;
}

// Every pixel of the images `which` of x against the bytes of their IDX file:
// byte 16 + 784 i + 28 r + c (row r, column c: IDX is row-major) is
// x[c, r, 0, i] (width first, as MLDatasets gives Flux), times 255. Each image
// must be asymmetric (checked), or a transposed one would look the same.
void expect_pixels_are_the_idx_bytes(const Tensor& x, const std::vector<uint8_t>& file,
                                     const std::vector<int64_t>& which) {
  ASSERT_EQ(x.shape(), (Shape{28, 28, 1, x.size(3)}));
  ASSERT_EQ(file.size(), 16 + size_t(x.size(3)) * 784) << "an IDX file of " << x.size(3) << " images";
  for (int64_t i : which) {
    const auto img = x.slice_last(i, i + 1).to_vector<float>();
    const uint8_t* bytes = file.data() + 16 + size_t(i) * 784;
    int asymmetric = 0, wrong = 0;
    std::string first;
    for (int r = 0; r < 28; ++r) {
      for (int c = 0; c < 28; ++c) {
        const uint8_t b = bytes[28 * r + c];
        const long got = std::lround(img[size_t(c + 28 * r)] * 255.0f);
        asymmetric += b != bytes[28 * c + r];
        if (got != b && wrong++ == 0)
          first = "x[" + std::to_string(c) + ", " + std::to_string(r) + "] is " + std::to_string(got) + "/255, byte " +
                  std::to_string(b);
      }
    }
    EXPECT_GT(asymmetric, 0) << "image " << i << " is symmetric: it cannot show a transpose";
    EXPECT_EQ(wrong, 0) << "image " << i << ": " << wrong << " pixels differ from the file; first " << first;
  }
}

}  // namespace

TEST(Datasets, PixelsAreTheIdxBytesWidthFirst) {
  DataDir d;
  // Two images whose bytes (31 i + 28 r + c) mod 251 differ at (r, c) and (c, r).
  std::vector<uint8_t> images = idx({2, 28, 28}, 0);
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c) images.push_back(uint8_t((31 * i + 28 * r + c) % 251));
  d.write("t10k-images-idx3-ubyte", images);
  d.write("t10k-labels-idx1-ubyte", idx({2}, 2, 3));
  expect_pixels_are_the_idx_bytes(datasets::fashion_mnist("test").features, images, {0, 1});
}

TEST(Datasets, FashionMnistPixelsAreItsIdxBytesWidthFirst) {
  const fs::path file = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (!fs::exists(file)) GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)";
  DataDir d;  // an empty $FLX_DATA: the loader reads /usr/share's files, as this test does
  const auto bytes = gunzip(file);
  expect_pixels_are_the_idx_bytes(datasets::fashion_mnist("test").features, bytes, {0, 1, 5000, 9999});
}

// UInt8 images are the stored bytes; scaled_pixels widens them to exactly
// the Float32 loader's values (what flx-train relies on to train on UInt8
// data with the same bits). The test split as installed.
TEST(Datasets, FashionMnistAsUInt8ScalesToTheFloat32Images) {
  if (!have_fashion_mnist() && !std::getenv("FLX_DATA"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)";
  auto [x8, y8] = datasets::fashion_mnist("test", UInt8);
  auto [x32, y32] = datasets::fashion_mnist("test");
  EXPECT_EQ(x8.dtype(), UInt8);
  EXPECT_EQ(x8.shape(), (Shape{28, 28, 1, 10000}));
  EXPECT_EQ(maximum(x8).item<int64_t>(), 255);
  EXPECT_EQ(y8.to_vector<int64_t>(), y32.to_vector<int64_t>());
  Tensor widened = datasets::scaled_pixels(x8);
  EXPECT_EQ(widened.dtype(), Float32);
  EXPECT_EQ(widened.shape(), x32.shape());
  EXPECT_EQ(widened.to_vector<float>(), x32.to_vector<float>());  // bit for bit
}

// Every byte value, over more than one of the reader's 64 KiB chunks: UInt8
// keeps each byte where it was, Float32 holds float(b) * (1.0f / 255.0f),
// and scaled_pixels of the UInt8 images gives the same floats.
TEST(Datasets, UInt8AndFloat32LoadTheSameBytes) {
  DataDir d;
  const size_t n = 100, payload = n * 28 * 28;  // 78,400 bytes: two chunks
  std::vector<uint8_t> images = idx({uint32_t(n), 28, 28}, 0), bytes(payload);
  for (size_t i = 0; i < payload; ++i) bytes[i] = uint8_t((i * 7 + i / 256) % 256);
  images.insert(images.end(), bytes.begin(), bytes.end());
  d.write("t10k-images-idx3-ubyte.gz", gzip(images));
  d.write("t10k-labels-idx1-ubyte", idx({uint32_t(n)}, n, 4));
  auto [x8, y] = datasets::fashion_mnist("test", UInt8);
  EXPECT_EQ(x8.shape(), (Shape{28, 28, 1, int64_t(n)}));
  EXPECT_EQ(x8.to_vector<uint8_t>(), bytes);
  EXPECT_EQ(y.to_vector<int64_t>(), std::vector<int64_t>(n, 4));
  std::vector<float> expected(payload);
  for (size_t i = 0; i < payload; ++i) expected[i] = float(bytes[i]) * (1.0f / 255.0f);
  EXPECT_EQ(datasets::fashion_mnist("test", Float32).features.to_vector<float>(), expected);
  EXPECT_EQ(datasets::scaled_pixels(x8).to_vector<float>(), expected);
}

TEST(Datasets, OtherElementTypesAndNonBytePixelsAreArgumentErrors) {
  std::string m = flx::testing::error_message<ArgumentError>([] { datasets::fashion_mnist("test", Float64); });
  EXPECT_NE(m.find("images load as Float32 (in [0, 1]) or UInt8 (the stored bytes 0..255); got Float64"),
            std::string::npos) << m;
  m = flx::testing::error_message<ArgumentError>([] { datasets::scaled_pixels(zeros(Float32, Shape{4})); });
  EXPECT_NE(m.find("scaled_pixels: expected UInt8 pixels (0..255)"), std::string::npos) << m;
  EXPECT_NE(m.find("got Float32"), std::string::npos) << m;
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
  expect_error("t10k-images-idx3-ubyte", idx({5, 28, 28}, 10), "more data than the file holds");
  expect_error("t10k-images-idx3-ubyte", idx({3, 0xffffff, 0xffffff}, 10), "expected images of 28×28 pixels");
  // A gzip stream cut short.
  std::vector<uint8_t> gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x63, 0x60, 0x60};
  expect_error("t10k-images-idx3-ubyte", gz, "damaged");
  d.write("t10k-images-idx3-ubyte", images);
  expect_error("t10k-labels-idx1-ubyte", idx({2}, 2), "holds 3 images but");
  expect_error("t10k-labels-idx1-ubyte", idx({3}, 3, 12), "label 12");
}

// Whatever is where an IDX file should be, the reader says what it is, and
// opening a named pipe does not wait for a writer.
TEST(Datasets, WhatIsNotARegularFileIsRefusedByName) {
  DataDir d;
  const fs::path images = d.dir / "fashion-mnist" / "t10k-images-idx3-ubyte.gz";
  d.write("t10k-labels-idx1-ubyte", idx({3}, 3));
  auto expect_refused = [&](const std::string& what) {
    auto pending = std::async(std::launch::async, [] { return error_of([] { datasets::fashion_mnist("test"); }); });
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the reader blocked on " << what;
      ::close(::open(images.c_str(), O_WRONLY | O_NONBLOCK));  // a writer comes and goes: open() returns
    }
    std::string msg = pending.get();
    EXPECT_NE(msg.find(images.string() + ": is " + what + ", not a regular file"), std::string::npos) << msg;
    fs::remove(images);
  };
  ASSERT_EQ(::mkfifo(images.c_str(), 0600), 0) << std::strerror(errno);
  expect_refused("a named pipe (FIFO)");
  fs::create_directory(images);
  expect_refused("a directory");
  fs::create_symlink("/dev/zero", images);
  expect_refused("a character device");
}

// The 16-byte header is checked against what the split can hold before any
// data is read: a file claiming more items, or images of another size, is
// refused without allocating for it.
TEST(Datasets, HeadersAreCheckedAgainstTheSplit) {
  DataDir d;
  d.write("t10k-labels-idx1-ubyte", idx({3}, 3));
  auto expect_error = [&](const std::string& file, std::vector<uint8_t> bytes, const std::string& phrase) {
    d.write(file, bytes);
    std::string msg = error_of([] { datasets::fashion_mnist("test"); });
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_NE(msg.find((d.dir / "fashion-mnist" / file).string()), std::string::npos) << msg;
  };
  expect_error("t10k-images-idx3-ubyte", idx({3, 32, 32}, 3 * 32 * 32), "expected images of 28×28 pixels; found 32×32");
  expect_error("t10k-images-idx3-ubyte", idx({10001, 28, 28}, 0), "10001 items, but the test split has 10000");
  expect_error("t10k-images-idx3-ubyte", idx({0xffffffff, 28, 28}, 0), "4294967295 items, but the test split has 10000");
  d.write("t10k-images-idx3-ubyte", idx({3, 28, 28}, 3 * 28 * 28));
  expect_error("t10k-labels-idx1-ubyte", idx({10001}, 0), "10001 items, but the test split has 10000");
}

// Data after what the header promises is refused, in raw and gzip files
// alike, without inflating it; gzip files with a correct payload load.
TEST(Datasets, TrailingDataIsRefusedAndGzipLoads) {
  DataDir d;
  const auto images = idx({3, 28, 28}, 3 * 28 * 28, 7), labels = idx({3}, 3, 2);
  d.write("t10k-labels-idx1-ubyte.gz", gzip(labels));
  d.write("t10k-images-idx3-ubyte.gz", gzip(images));
  auto [x, y] = datasets::fashion_mnist("test");
  EXPECT_EQ(x.shape(), (Shape{28, 28, 1, 3}));
  EXPECT_FLOAT_EQ(x.to_vector<float>()[100], 7.0f / 255.0f);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2}));
  // Two gzip members holding the file between them are one stream, as gunzip reads them.
  const std::vector<uint8_t> head(images.begin(), images.begin() + 1000), tail(images.begin() + 1000, images.end());
  d.write("t10k-images-idx3-ubyte.gz", gzip(head) + gzip(tail));
  EXPECT_EQ(datasets::fashion_mnist("test").features.to_vector<float>(), x.to_vector<float>());

  auto expect_trailing = [&](const std::vector<uint8_t>& bytes) {
    d.write("t10k-images-idx3-ubyte.gz", bytes);
    std::string msg = error_of([] { datasets::fashion_mnist("test"); });
    EXPECT_NE(msg.find("trailing data after the 2352 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("t10k-images-idx3-ubyte.gz"), std::string::npos) << msg;
  };
  expect_trailing(images + std::vector<uint8_t>{1, 2, 3});            // raw (gzread passes it through)
  expect_trailing(gzip(images + std::vector<uint8_t>(100)));           // inside the gzip stream
  expect_trailing(gzip(images) + gzip(std::vector<uint8_t>(100)));     // in a second gzip member

  // Bytes after the last gzip member that are not another member are not
  // skipped (as zlib's gzread skips them): they are trailing data too.
  for (const auto& after : {std::vector<uint8_t>{'x', 'y', 'z'}, std::vector<uint8_t>(8), std::vector<uint8_t>{0x1f}}) {
    d.write("t10k-images-idx3-ubyte.gz", gzip(images) + after);
    std::string msg = error_of([] { datasets::fashion_mnist("test"); });
    EXPECT_NE(msg.find("t10k-images-idx3-ubyte.gz: trailing data after the end of its gzip stream"), std::string::npos)
        << msg;
  }

  // A damaged stream is named as such, in zlib's words.
  auto broken = gzip(images);
  broken[broken.size() - 6] ^= 0xff;  // the CRC-32 in the trailer
  d.write("t10k-images-idx3-ubyte.gz", broken);
  std::string msg = error_of([] { datasets::fashion_mnist("test"); });
  EXPECT_NE(msg.find("t10k-images-idx3-ubyte.gz is damaged (incorrect data check); reinstall it"), std::string::npos)
      << msg;
}

// A gzip bomb (a small file that inflates to gigabytes) is refused after the
// bytes its header promises: no std::bad_alloc, however little memory there
// is. A child process limits its address space and reads a 2 MB file that
// inflates to 2 GB.
TEST(DatasetsDeathTest, AGzipBombIsAnErrorNotBadAlloc) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of shadow memory, so an address-space limit cannot fail one allocation";
#else
  DataDir d;
  d.write("t10k-labels-idx1-ubyte", idx({10}, 10));
  const auto zeros = gzip(std::vector<uint8_t>(1 << 20));  // 1 MB of zeros in about 1 kB
  std::vector<uint8_t> bomb = gzip(idx({10, 28, 28}, 10 * 28 * 28));
  bomb.reserve(bomb.size() + 2048 * zeros.size());
  for (int i = 0; i < 2048; ++i) bomb.insert(bomb.end(), zeros.begin(), zeros.end());
  d.write("t10k-images-idx3-ubyte.gz", bomb);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(flx::testing::exit_after_out_of_memory<Error>([&] { datasets::fashion_mnist("test"); },
                                                            [&] { fs::remove_all(d.dir); }),
              ::testing::ExitedWithCode(0), "trailing data");
#endif
}

// TensorBoard's event files: CRC-32C and its mask against known vectors, the
// framing of a record against the tensorboard package's RecordWriter,
// TensorFlow's histogram buckets in closed form, the PNG encoder of
// log_image, the logger's file (name, first record, when records reach it,
// a histogram alike from every device, an image event) and every error it
// raises. tests/apps/test_flx_train_tensorboard.py reads real files back
// with the tensorboard package and its server, and
// tests/interop/tensorboard_images.py log_image's images, pixel for pixel.
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cfloat>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include <zlib.h>

#include "io/png.hpp"
#include "io/tensorboard_histogram.hpp"
#include "io/tfrecord.hpp"
#include "test_util.hpp"

using namespace flx;
namespace fs = std::filesystem;

namespace {

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

uint64_t le(std::string_view b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
  return v;
}

// The records of an event file, each checked: its length's CRC, its data's
// CRC, nothing left over.
std::vector<std::string> records(const std::string& path) {
  const std::string f = slurp(path);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < f.size()) {
    EXPECT_GE(f.size() - at, 16u) << path << ": a truncated record at byte " << at;
    if (f.size() - at < 16) break;
    const uint64_t n = le(f, at, 8);
    EXPECT_EQ(le(f, at + 8, 4), io::masked_crc32c(std::string_view(f).substr(at, 8))) << "length CRC at " << at;
    EXPECT_LE(n, f.size() - at - 16) << path << ": a record longer than the file at byte " << at;
    if (n > f.size() - at - 16) break;
    const std::string data = f.substr(at + 12, n);
    EXPECT_EQ(le(f, at + 12 + n, 4), io::masked_crc32c(data)) << "data CRC at " << at;
    out.push_back(data);
    at += 16 + n;
  }
  return out;
}

// An Event's bytes without its wall time (field 1, a double, which the
// logger writes first: key 0x09 and 8 bytes), to compare events.
std::string without_wall_time(const std::string& event) {
  EXPECT_EQ(static_cast<unsigned char>(event.at(0)), 0x09);
  return event.substr(9);
}

using flx::testing::TempDir;

// The message of the error `fn` throws as E; a failure if it throws nothing.
template <class E, class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace

// ---- records -----------------------------------------------------------------

TEST(TensorBoardRecords, Crc32cKnownVectors) {
  // The check value of CRC-32C, and RFC 3720's (iSCSI) vectors, B.4.
  EXPECT_EQ(io::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(io::crc32c(""), 0u);
  EXPECT_EQ(io::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(io::crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) up += char(i), down += char(31 - i);
  EXPECT_EQ(io::crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(io::crc32c(down), 0x113FDB5Cu);
}

TEST(TensorBoardRecords, Masking) {
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
  EXPECT_EQ(io::mask_crc(0), 0xA282EAD8u);
  EXPECT_EQ(io::mask_crc(0x00008000u), 0xA282EAD9u);  // bit 15 rotates to bit 0
  EXPECT_EQ(io::mask_crc(0x00007FFFu), 0xA282EAD8u + 0xFFFE0000u);  // the low 15 bits rotate to the top, wrapping
  // The tensorboard package's masked_crc32c(b"123456789").
  EXPECT_EQ(io::masked_crc32c("123456789"), 0xC78AB0E5u);
}

TEST(TensorBoardRecords, FramingOfOneRecord) {
  // Bytes from the tensorboard package's RecordWriter for b"hello" and b"".
  std::string out;
  io::append_record(out, "hello");
  EXPECT_EQ(hex(out), "0500000000000000eab2043e68656c6c6fbb1f1c19");
  out.clear();
  io::append_record(out, "");
  EXPECT_EQ(hex(out), "000000000000000029039807d8ea82a2");
}

// ---- histograms ------------------------------------------------------------

TEST(TensorBoardHistogram, DefaultBucketLimits) {
  // TensorFlow's: 1e-12 * 1.1^k below 1e20 (774 of them), DBL_MAX, their
  // negatives and 0.
  const auto& l = io::default_bucket_limits();
  ASSERT_EQ(l.size(), 2u * 775 + 1);
  EXPECT_EQ(l.front(), -DBL_MAX);
  EXPECT_EQ(l.back(), DBL_MAX);
  EXPECT_EQ(l[775], 0.0);
  EXPECT_EQ(l[776], 1e-12);
  EXPECT_LT(l[l.size() - 2], 1e20);
  EXPECT_GE(l[l.size() - 2] * 1.1, 1e20);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(l[i], -l[l.size() - 1 - i]) << i;
  for (size_t i = 777; i + 1 < l.size(); ++i) EXPECT_EQ(l[i], l[i - 1] * 1.1) << i;
}

TEST(TensorBoardHistogram, ZerosFillTheFirstBucketAboveZero) {
  const std::vector<double> zeros{0.0, 0.0};
  const io::HistogramSummary h = io::summarize(zeros);
  EXPECT_EQ(h.num, 2);
  EXPECT_EQ(h.min, 0);
  EXPECT_EQ(h.max, 0);
  EXPECT_EQ(h.sum, 0);
  EXPECT_EQ(h.sum_squares, 0);
  // One bucket, [0, 1e-12), with both: no empty bucket before or after it.
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{1e-12}));
  EXPECT_EQ(h.bucket, (std::vector<double>{2}));
}

TEST(TensorBoardHistogram, ValuesInTheirBuckets) {
  // Bucket j holds [limit[j-1], limit[j]): counted here by brute force over
  // the encoded limits, for values on and beside bucket limits and beyond 1e20.
  const auto& l = io::default_bucket_limits();
  std::vector<double> xs{-3.5, -1e-12, 0, 1e-12, 1, 1, 2.5, l[900], l[900] * 0.999999, 1e25, -1e30, DBL_MAX};
  const io::HistogramSummary h = io::summarize(xs);
  EXPECT_EQ(h.num, double(xs.size()));
  EXPECT_EQ(h.min, -1e30);
  EXPECT_EQ(h.max, DBL_MAX);
  ASSERT_EQ(h.bucket.size(), h.bucket_limit.size());
  double total = 0;
  for (size_t j = 0; j < h.bucket.size(); ++j) {
    const double lo = j == 0 ? -INFINITY : h.bucket_limit[j - 1], hi = h.bucket_limit[j];
    double n = 0;
    for (double x : xs) n += (lo <= x && x < hi) || (x == DBL_MAX && hi == DBL_MAX);
    EXPECT_EQ(h.bucket[j], n) << "bucket [" << lo << ", " << hi << ")";
    total += h.bucket[j];
    if (j > 0) EXPECT_LT(h.bucket_limit[j - 1], h.bucket_limit[j]);
    // No two empty buckets in a row (TensorFlow's encoding merges them).
    if (j > 0) EXPECT_FALSE(h.bucket[j] == 0 && h.bucket[j - 1] == 0) << j;
  }
  EXPECT_EQ(total, h.num);
  // The first and last buckets hold data: TensorBoard shows them as [min, limit) and [limit, max].
  EXPECT_GT(h.bucket.front(), 0);
  EXPECT_GT(h.bucket.back(), 0);
  // 1 falls in a bucket of TensorFlow's, whose edges are 10% apart.
  const auto one = std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), 1.0) - h.bucket_limit.begin();
  EXPECT_EQ(h.bucket[one], 2);
  EXPECT_LE(h.bucket_limit[one - 1], 1.0);
  EXPECT_EQ(h.bucket_limit[one], h.bucket_limit[one - 1] * 1.1);
}

// ---- PNG (log_image) --------------------------------------------------------

TEST(TensorBoardPng, GrayImageChunksCrcsAndRows) {
  const uint8_t px[6] = {0, 1, 2, 250, 251, 255};  // 3 wide, 2 high
  const std::string png = io::encode_png(px, 3, 2, 1);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  // The chunks: IHDR, IDAT, IEND, each with the CRC-32 of its type and data.
  std::vector<std::pair<std::string, std::string>> chunks;
  size_t at = 8;
  while (at < png.size()) {
    ASSERT_LE(at + 12, png.size());
    const uint32_t n = be(at);
    const std::string kind = png.substr(at + 4, 4), data = png.substr(at + 8, n);
    const std::string typed = png.substr(at + 4, 4 + n);
    EXPECT_EQ(be(at + 8 + n), uint32_t(crc32(0, reinterpret_cast<const Bytef*>(typed.data()), uInt(typed.size()))))
        << kind;
    chunks.emplace_back(kind, data);
    at += 12 + n;
  }
  EXPECT_EQ(at, png.size());
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].first, "IHDR");
  // width 3, height 2, depth 8, colour type 0 (gray), deflate, filter 0, no interlace
  EXPECT_EQ(hex(chunks[0].second), "00000003000000020800000000");
  EXPECT_EQ(chunks[1].first, "IDAT");
  EXPECT_EQ(chunks[2].first, "IEND");
  EXPECT_EQ(chunks[2].second, "");
  std::string raw(64, '\0');
  uLongf n = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n,
                       reinterpret_cast<const Bytef*>(chunks[1].second.data()), uLong(chunks[1].second.size())),
            Z_OK);
  raw.resize(n);
  EXPECT_EQ(hex(raw), "00000102" "00fafbff");  // each row: filter 0, then its pixels
  // The colour types of 2, 3 and 4 channels: gray + alpha, RGB, RGBA.
  const uint8_t four[4] = {1, 2, 3, 4};
  EXPECT_EQ(static_cast<unsigned char>(io::encode_png(four, 2, 1, 2)[25]), 4);
  EXPECT_EQ(static_cast<unsigned char>(io::encode_png(four, 1, 1, 3)[25]), 2);
  EXPECT_EQ(static_cast<unsigned char>(io::encode_png(four, 1, 1, 4)[25]), 6);
}

// ---- the logger's file -----------------------------------------------------

TEST(TensorBoardLogger, FileNameAndFirstRecord) {
  TempDir dir;
  const double before = double(std::time(nullptr));
  std::string path;
  {
    TensorBoardLogger tb((dir.path / "run").string());
    path = tb.path();
    EXPECT_EQ(tb.logdir(), (dir.path / "run").string());
  }
  const double after = double(std::time(nullptr)) + 1;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string name = fs::path(path).filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex("events\\.out\\.tfevents\\.[0-9]{10}\\." +
                                                std::regex_replace(host, std::regex("[.]"), "\\.") + "\\." +
                                                std::to_string(::getpid()) + "\\.[0-9]+")))
      << name;
  EXPECT_EQ(fs::path(path).parent_path(), dir.path / "run");
  const auto r = records(path);
  ASSERT_EQ(r.size(), 1u);
  // Event{wall_time (1, double), step (2) = 0, file_version (3) = "brain.Event:2"}.
  ASSERT_EQ(r[0].size(), 9u + 2 + 2 + 13);
  double wall = 0;
  std::memcpy(&wall, r[0].data() + 1, 8);
  EXPECT_GE(wall, before);
  EXPECT_LE(wall, after);
  EXPECT_EQ(hex(without_wall_time(r[0])), hex(std::string("\x10\x00\x1a\x0d", 4) + "brain.Event:2"));
}

TEST(TensorBoardLogger, EachLoggerItsOwnFile) {
  TempDir dir;
  TensorBoardLogger a(dir.path.string()), b(dir.path.string());
  EXPECT_NE(a.path(), b.path());
  EXPECT_TRUE(fs::exists(a.path()));
  EXPECT_TRUE(fs::exists(b.path()));
}

TEST(TensorBoardLogger, RecordsReachTheFileByQueueFlushAndDestructor) {
  TempDir dir;
  std::string path;
  {
    TensorBoardLogger tb(dir.path.string(), {.max_queue = 3});
    path = tb.path();
    ASSERT_EQ(records(path).size(), 1u);  // the file version, written at once
    tb.log_scalar("loss", 0.5, 1);
    tb.log_scalar("loss", 0.25, 2);
    EXPECT_EQ(records(path).size(), 1u) << "two records held in memory";
    tb.log_scalar("loss", 0.125, 3);
    EXPECT_EQ(records(path).size(), 4u) << "the third fills the queue";
    tb.log_text("note", "x", 3);
    tb.flush();
    EXPECT_EQ(records(path).size(), 5u);
    tb.log_text("note", "y", 4);
    EXPECT_EQ(records(path).size(), 5u);
  }
  EXPECT_EQ(records(path).size(), 6u) << "the destructor writes the rest";
  {
    TensorBoardLogger tb(dir.path.string(), {.max_queue = 100, .flush_seconds = 0});
    tb.log_scalar("loss", 1, 1);
    EXPECT_EQ(records(tb.path()).size(), 2u) << "flush_seconds 0: each record written at once";
  }
}

TEST(TensorBoardLogger, ScalarEvent) {
  TempDir dir;
  TensorBoardLogger tb(dir.path.string(), {.max_queue = 1});
  tb.log_scalar("loss", 0.1, -3);  // a negative step: a 10-byte varint
  const auto r = records(tb.path());
  ASSERT_EQ(r.size(), 2u);
  // Event{step (2), summary (5) {value (1) {tag (1) "loss", simple_value (2) float32(0.1)}}}.
  const float v = 0.1f;
  std::string f(4, '\0');
  std::memcpy(f.data(), &v, 4);
  const std::string value = std::string("\x0a\x04", 2) + "loss" + "\x15" + f;
  const std::string summary = "\x0a" + std::string(1, char(value.size())) + value;
  EXPECT_EQ(hex(without_wall_time(r[1])),
            hex(std::string("\x10\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11) + "\x2a" +
                std::string(1, char(summary.size())) + summary));
}

TEST(TensorBoardLogger, ImageEvent) {
  TempDir dir;
  TensorBoardLogger tb(dir.path.string(), {.max_queue = 1});
  // (W, H) = (3, 2), column-major: x varies fastest, so each row of the PNG
  // is a run of 3 values. Clamped to [0, 1], NaN as 0, floor(255 v + 0.5).
  tb.log_image("img", tensor(std::vector<float>{0, 0.5f, 1, -1, 2, NAN}, {3, 2}), 5);
  const uint8_t px[6] = {0, 128, 255, 0, 255, 0};
  const std::string png = io::encode_png(px, 3, 2, 1);
  // Event{step (2) 5, summary (5) {value (1) {tag (1) "img", image (4) {height (1) 2,
  // width (2) 3, colorspace (3) 1, encoded_image_string (4) png}}}}.
  std::string image = std::string("\x08\x02\x10\x03\x18\x01\x22", 7) + char(png.size()) + png;
  ASSERT_LT(image.size(), 128u);
  const std::string value = std::string("\x0a\x03", 2) + "img" + "\x22" + char(image.size()) + image;
  ASSERT_LT(value.size(), 128u);
  const std::string summary = "\x0a" + std::string(1, char(value.size())) + value;
  const auto r = records(tb.path());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(hex(without_wall_time(r[1])), hex(std::string("\x10\x05\x2a", 3) + char(summary.size()) + summary));
  // UInt8 as it is, on the same event.
  tb.log_image("img", tensor(std::vector<uint8_t>{0, 128, 255, 0, 255, 0}, {3, 2}), 5);
  const auto r2 = records(tb.path());
  ASSERT_EQ(r2.size(), 3u);
  EXPECT_EQ(hex(without_wall_time(r2[2])), hex(without_wall_time(r[1])));
}

TEST(TensorBoardLogger, ImageGrid) {
  TempDir dir;
  TensorBoardLogger tb(dir.path.string(), {.max_queue = 1});
  // Three 1×1 images in 2 columns, 1 pixel apart: a 3×3 grid with the
  // images at (0, 0), (2, 0) and (0, 2).
  tb.log_image("grid", ones(1, 1, 1, 3), 0, {.columns = 2, .padding = 1});
  const auto r = records(tb.path());
  ASSERT_EQ(r.size(), 2u);
  const uint8_t px[9] = {255, 0, 255, 0, 0, 0, 255, 0, 0};
  const std::string png = io::encode_png(px, 3, 3, 1);
  EXPECT_NE(r[1].find(png), std::string::npos);
  EXPECT_NE(r[1].find(std::string("\x08\x03\x10\x03\x18\x01", 6)), std::string::npos);  // height 3, width 3, gray
}

TEST(TensorBoardLogger, PurgeStepWritesSessionStart) {
  TempDir dir;
  TensorBoardLogger tb(dir.path.string(), {.purge_step = 300});
  const auto r = records(tb.path());
  ASSERT_EQ(r.size(), 2u);
  // Event{step (2) = 300, session_log (7) {status (1) = START (1)}}.
  EXPECT_EQ(hex(without_wall_time(r[1])), hex(std::string("\x10\xac\x02\x3a\x02\x08\x01", 7)));
}

TEST(TensorBoardLogger, HistogramAlikeFromEveryDeviceAndElementType) {
  // The same values, from each device and as Float16, Float64 and Int32,
  // give the same event (a histogram reads every element on the host).
  TempDir dir;
  const Tensor x = tensor(std::vector<float>{-2, 0.5, 0, 3, 3, 1.5}, {2, 3});
  auto event_of = [&](const Tensor& t) {
    TensorBoardLogger tb(dir.path.string(), {.max_queue = 1});
    tb.log_histogram("w", t, 7);
    const auto r = records(tb.path());
    return r.size() == 2 ? without_wall_time(r[1]) : "";
  };
  const std::string cpu = event_of(x);
  ASSERT_FALSE(cpu.empty());
  for (const Device& d : flx::testing::conformance_devices()) {
    EXPECT_EQ(hex(event_of(x.to(d))), hex(cpu)) << d;
    EXPECT_EQ(hex(event_of(x.to(Float16).to(d))), hex(cpu)) << d << " Float16";
  }
  EXPECT_EQ(hex(event_of(x.to(Float64))), hex(cpu));
  EXPECT_EQ(hex(event_of(tensor(std::vector<int32_t>{-2, 0, 0, 3, 3, 1}, {6}))),
            hex(event_of(tensor(std::vector<double>{-2, 0, 0, 3, 3, 1}, {6}))));
  // Inside gradient() the tensor is tracked; logging it records nothing.
  std::string inside;
  gradient([&](const Tensor& w) {
    inside = event_of(w);
    return sum(w);
  }, x);
  EXPECT_EQ(hex(inside), hex(cpu));
}

// ---- errors ----------------------------------------------------------------

TEST(TensorBoardLoggerErrors, BadLogDirectory) {
  TempDir dir;
  const std::string file = (dir.path / "file").string();
  std::ofstream(file) << "x";
  std::string m = error_of<ArgumentError>([] { TensorBoardLogger(""); });
  EXPECT_NE(m.find("expected a log directory, got an empty path"), std::string::npos) << m;
  m = error_of<IOError>([&] { TensorBoardLogger{file}; });
  EXPECT_NE(m.find("the log directory " + file + " is a regular file, not a directory; choose another path"),
            std::string::npos)
      << m;
  m = error_of<IOError>([&] { TensorBoardLogger{file + "/run"}; });
  EXPECT_NE(m.find("cannot create the log directory " + file + "/run: Not a directory"), std::string::npos) << m;
  EXPECT_NE(m.find("choose a directory you can write to"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { TensorBoardLogger(dir.path.string(), {.max_queue = 0}); });
  EXPECT_NE(m.find("max_queue must be at least 1"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { TensorBoardLogger(dir.path.string(), {.flush_seconds = -1}); });
  EXPECT_NE(m.find("flush_seconds must be a number of seconds >= 0, got -1"), std::string::npos) << m;
}

TEST(TensorBoardLoggerErrors, UnwritableDirectory) {
  // In a child process (a death test) that cannot write in dir: dropped to
  // the user nobody when run as root, who writes anywhere.
  // "fast" (fork): the child sees this process's directory; it only makes
  // the logger, with no thread of flx's running.
  GTEST_FLAG_SET(death_test_style, "fast");
  TempDir dir;
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  auto refused = [&](const std::string& logdir) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) std::_Exit(3);
    try {
      TensorBoardLogger tb(logdir);
    } catch (const IOError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(0);
    }
    std::_Exit(1);
  };
  const std::string d = dir.path.string();
  EXPECT_EXIT(refused(d), ::testing::ExitedWithCode(0),
              "TensorBoardLogger: cannot create the event file " + d +
                  "/events\\.out\\.tfevents\\.[^:]*: Permission denied; choose a log directory you can write to");
  EXPECT_EXIT(refused(d + "/run"), ::testing::ExitedWithCode(0),
              "TensorBoardLogger: cannot create the log directory " + d +
                  "/run: Permission denied; choose a directory you can write to");
  fs::permissions(dir.path, fs::perms::owner_all);
}

TEST(TensorBoardLoggerErrors, BadTagsTextAndTensors) {
  TempDir dir;
  TensorBoardLogger tb(dir.path.string());
  std::string m = error_of<ArgumentError>([&] { tb.log_scalar("", 1, 0); });
  EXPECT_NE(m.find("expected a tag (the name of the chart), got an empty one"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_scalar("lo\xffss", 1, 0); });
  EXPECT_NE(m.find("the tag is not valid UTF-8 (bad byte at offset 2)"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_text("notes", "caf\xc3", 0); });
  EXPECT_NE(m.find("the text of \"notes\" is not valid UTF-8 (bad byte at offset 3)"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_histogram("w", Tensor(), 0); });
  EXPECT_NE(m.find("histogram \"w\": expected a tensor, got an undefined one"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_histogram("w", zeros(3, 0), 0); });
  EXPECT_NE(m.find("histogram \"w\": expected a tensor with elements, got one of shape 3×0; TensorBoard cannot show an empty histogram"), std::string::npos)
      << m;
  m = error_of<ArgumentError>([&] { tb.log_image("im", zeros(4), 0); });
  EXPECT_NE(m.find("image \"im\": expected (W, H), (W, H, C) or (W, H, C, N), got a tensor of shape 4"),
            std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_image("im", zeros(4, 4, 5), 0); });
  EXPECT_NE(m.find("5 channels in dim 2; expected 1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA)"),
            std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_image("im", zeros(Int64, 4, 4), 0); });
  EXPECT_NE(m.find("expected floating values in [0, 1] or UInt8 ones in 0..255, got Int64"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_image("im", zeros(4, 0), 0); });
  EXPECT_NE(m.find("expected at least one pixel"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { tb.log_image("im", zeros(4, 4), 0, {.padding = -1}); });
  EXPECT_NE(m.find("must be >= 0"), std::string::npos) << m;
  const Tensor bad = tensor(std::vector<float>{1, NAN, INFINITY, 2}, {4});
  m = error_of<ArgumentError>([&] { tb.log_histogram("w", bad, 0); });
  EXPECT_NE(m.find("histogram \"w\": 2 of 4 values are not finite (NaN or infinite)"), std::string::npos) << m;
  tb.flush();
  EXPECT_EQ(records(tb.path()).size(), 1u) << "a refused record is not written";

  TensorBoardLogger moved(std::move(tb));
  m = error_of<ArgumentError>([&] { tb.log_scalar("loss", 1, 0); });  // NOLINT(bugprone-use-after-move)
  EXPECT_NE(m.find("this logger was moved from; use the logger it was moved to"), std::string::npos) << m;
}

TEST(TensorBoardLoggerErrors, FailedWriteKeepsItsRecords) {
  // A file size limit makes write() fail with EFBIG (SIGXFSZ ignored), as a
  // full disk would with ENOSPC; raised again, the next flush completes the
  // records.
  TempDir dir;
  TensorBoardLogger tb(dir.path.string(), {.max_queue = 100});
  const auto size = fs::file_size(tb.path());
  tb.log_text("notes", std::string(1000, 'a'), 1);
  tb.log_scalar("loss", 0.5, 2);
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = size + 100;  // part of the text's record fits
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string m = error_of<IOError>([&] { tb.flush(); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_NE(m.find("cannot write to " + tb.path() + ": File too large; free some disk space; the "), std::string::npos)
      << m;
  EXPECT_NE(m.find(" bytes not written are kept in memory and written by the next flush()"), std::string::npos) << m;
  EXPECT_EQ(fs::file_size(tb.path()), size + 100);
  tb.flush();
  const auto r = records(tb.path());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_NE(r[1].find(std::string(1000, 'a')), std::string::npos);
  EXPECT_NE(r[2].find("loss"), std::string::npos);
}

TEST(TensorBoardLoggerErrors, FailedWriteAtTheEndIsReported) {
  // A destructor cannot throw: what it could not write is reported on stderr.
  TempDir dir;
  std::string path;
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  // stderr into a pipe for the while (a file, such as gtest's capture,
  // would be cut short by the size limit too).
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::fflush(stderr);
  const int saved_stderr = ::dup(2);
  ::dup2(pipe_fds[1], 2);
  {
    TensorBoardLogger tb(dir.path.string(), {.max_queue = 100});
    path = tb.path();
    tb.log_scalar("loss", 0.5, 1);
    struct rlimit none = old;
    none.rlim_cur = fs::file_size(tb.path());
    ::setrlimit(RLIMIT_FSIZE, &none);
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  std::fflush(stderr);
  ::dup2(saved_stderr, 2);
  ::close(saved_stderr);
  ::close(pipe_fds[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  ::close(pipe_fds[0]);
  EXPECT_NE(err.find("flx: TensorBoardLogger: cannot write to " + path + ": File too large"), std::string::npos)
      << err;
  EXPECT_NE(err.find("(at the end of the logger: these records are lost)"), std::string::npos) << err;
}

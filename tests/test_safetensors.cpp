// The safetensors format layer: round trips, the reference implementation's
// error cases (huggingface/safetensors, safetensors/src/tensor.rs tests), the
// rules of DESIGN.md's "Checkpoints", file reading and atomic writes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "flx/error.hpp"
#include "io/files.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"

namespace {

namespace st = flx::safetensors;
namespace fs = std::filesystem;
using flx::DType;
using Bytes = std::vector<uint8_t>;

template <size_t N>
Bytes lit(const char (&s)[N]) {  // a byte string literal without its final NUL
  return Bytes(s, s + N - 1);
}

// A file from header text and data-section size (data bytes are i % 251).
Bytes raw(const std::string& header, size_t data_size) {
  Bytes f(8 + header.size());
  for (int i = 0; i < 8; ++i) f[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::memcpy(f.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_size; ++i) f.push_back(uint8_t(i % 251));
  return f;
}

std::string parse_error(const Bytes& f) {
  try {
    st::parse(f, "<memory>");
  } catch (const flx::CheckpointError& e) {
    return e.what();
  }
  return "(parsed without error)";
}

#define EXPECT_REJECTED(file, phrase)                                        \
  do {                                                                       \
    std::string msg_ = parse_error(file);                                    \
    EXPECT_NE(msg_.find(phrase), std::string::npos) << "message: " << msg_;  \
    EXPECT_EQ(msg_.rfind("<memory>: ", 0), 0u) << "message: " << msg_;       \
  } while (0)

uint64_t header_length(const Bytes& f) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f[size_t(i)];
  return n;
}

using flx::testing::TempDir;

std::string read_error(const fs::path& p) {
  try {
    st::read_file(p.string());
  } catch (const flx::CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

Bytes slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---- round trips -------------------------------------------------------------

TEST(Safetensors, RoundTripEveryDtypeAligned) {
  const DType all[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                       DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};
  std::vector<Bytes> data;
  std::vector<st::WriteEntry> in;
  for (DType t : all) {
    // Odd element counts, so a size-ordered layout is needed for alignment.
    std::vector<int64_t> shape{1 + int64_t(dtype_size(t)) % 3, 3};
    Bytes d(size_t(shape[0] * shape[1]) * flx::dtype_size(t));
    for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 31 + int(t));
    if (t == DType::Bool)
      for (auto& b : d) b &= 1;
    data.push_back(std::move(d));
    in.push_back({"t_" + std::string(st::dtype_code(t)), t, shape, nullptr, 0});
  }
  for (size_t i = 0; i < in.size(); ++i) in[i].data = data[i].data(), in[i].nbytes = data[i].size();

  Bytes file = st::serialize(in, {});
  EXPECT_EQ(header_length(file) % 8, 0u);
  st::Header h = st::parse(file, "<memory>");
  EXPECT_EQ(h.data_start, 8 + header_length(file));
  EXPECT_TRUE(h.metadata.empty());
  ASSERT_EQ(h.entries.size(), in.size());
  for (size_t i = 0; i + 1 < h.entries.size(); ++i) EXPECT_EQ(h.entries[i].end, h.entries[i + 1].begin);
  for (size_t i = 0; i < in.size(); ++i) {
    auto it = std::find_if(h.entries.begin(), h.entries.end(), [&](const st::Entry& e) { return e.name == in[i].name; });
    ASSERT_NE(it, h.entries.end()) << in[i].name;
    EXPECT_EQ(it->dtype, in[i].dtype) << in[i].name;
    EXPECT_EQ(it->shape, in[i].shape) << in[i].name;
    EXPECT_EQ((h.data_start + it->begin) % flx::dtype_size(it->dtype), 0u) << in[i].name << " is misaligned";
    Bytes got(file.begin() + long(h.data_start + it->begin), file.begin() + long(h.data_start + it->end));
    EXPECT_EQ(got, data[i]) << in[i].name;
  }
}

TEST(Safetensors, ScalarsZeroSizeAndMetadata) {
  const double scalar = 2.5;
  const int32_t ints[2] = {7, -9};
  std::vector<st::WriteEntry> in{{"scalar", DType::Float64, {}, &scalar, sizeof scalar},
                                 {"empty", DType::Float32, {0, 3}, nullptr, 0},
                                 {"also_empty", DType::Int64, {2, 0}, nullptr, 0},
                                 {"ints", DType::Int32, {2}, ints, sizeof ints}};
  std::map<std::string, std::string> meta{{"format", "flx"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  Bytes file = st::serialize(in, meta);
  std::string text(file.begin() + 8, file.begin() + 8 + long(header_length(file)));
  EXPECT_NE(text.find("\"__metadata__\""), std::string::npos);

  st::Header h = st::parse(file, "<memory>");
  EXPECT_EQ(h.metadata, meta);
  ASSERT_EQ(h.entries.size(), 4u);
  for (const auto& e : h.entries) {
    if (e.name == "scalar") {
      EXPECT_TRUE(e.shape.empty());
      double v;
      std::memcpy(&v, file.data() + h.data_start + e.begin, 8);
      EXPECT_EQ(v, scalar);
    } else if (e.name == "empty" || e.name == "also_empty") {
      EXPECT_EQ(e.begin, e.end) << e.name;
      EXPECT_EQ(e.shape, (e.name == "empty" ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{2, 0}));
    } else {
      int32_t v[2];
      std::memcpy(v, file.data() + h.data_start + e.begin, 8);
      EXPECT_EQ(v[0], ints[0]);
      EXPECT_EQ(v[1], ints[1]);
    }
  }
  // No metadata: no "__metadata__" key; no tensors: the reference's "{}" padded to 8.
  Bytes empty = st::serialize({}, {});
  EXPECT_EQ(empty, lit("\x08\0\0\0\0\0\0\0{}      "));
  EXPECT_TRUE(st::parse(empty, "<memory>").entries.empty());
}

TEST(Safetensors, SerializeRejectsBadEntries) {
  const float x[2] = {1, 2};
  auto ser = [&](std::vector<st::WriteEntry> v) { (void)st::serialize(v, {}); };
  EXPECT_THROW(ser({{"a", DType::Float32, {2}, x, 8}, {"a", DType::Float32, {2}, x, 8}}), flx::ArgumentError);
  EXPECT_THROW(ser({{"", DType::Float32, {2}, x, 8}}), flx::ArgumentError);
  EXPECT_THROW(ser({{"__metadata__", DType::Float32, {2}, x, 8}}), flx::ArgumentError);
  EXPECT_THROW(ser({{"a", DType::Float32, {3}, x, 8}}), flx::ArgumentError);
  EXPECT_THROW(ser({{"a", DType::Float32, {-2}, x, 8}}), flx::ArgumentError);
  EXPECT_THROW(ser({{"bad\xff", DType::Float32, {2}, x, 8}}), flx::ArgumentError);
}

// ---- the reference implementation's vectors -----------------------------------

TEST(Safetensors, ReferenceValidFiles) {
  // test_deserialization
  st::Header h = st::parse(lit("<\0\0\0\0\0\0\0{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"
                               "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
                           "<memory>");
  ASSERT_EQ(h.entries.size(), 1u);
  EXPECT_EQ(h.entries[0].name, "test");
  EXPECT_EQ(h.entries[0].dtype, DType::Int32);
  EXPECT_EQ(h.entries[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h.entries[0].end, 16u);
  EXPECT_EQ(h.data_start, 68u);
  // test_empty_shapes_allowed
  h = st::parse(lit("8\0\0\0\0\0\0\0{\"test\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}\0\0\0\0"), "<memory>");
  EXPECT_TRUE(h.entries.at(0).shape.empty());
  // test_zero_sized_tensor
  h = st::parse(lit("<\0\0\0\0\0\0\0{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0, 0]}}"), "<memory>");
  EXPECT_EQ(h.entries.at(0).shape, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(h.entries.at(0).end, 0u);
  // test_whitespace_padded_header, and leading whitespace, which the reference reader also accepts.
  EXPECT_TRUE(st::parse(lit("\x06\0\0\0\0\0\0\0{}\x0D\x20\x09\x0A"), "<memory>").entries.empty());
  EXPECT_TRUE(st::parse(lit("\x06\0\0\0\0\0\0\0\x09\x0A{}\x0D\x20"), "<memory>").entries.empty());
}

TEST(Safetensors, ReferenceErrorCases) {
  const char* test16 = "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  EXPECT_REJECTED(Bytes{}, "file is too small");                                          // test_header_too_small
  EXPECT_REJECTED(lit("\x01\0\0\0\0\0\0"), "file is too small");
  EXPECT_REJECTED(lit("<\0\0\0\0\0\0\0"), "runs past the end of the file");              // test_invalid_header_length
  EXPECT_REJECTED(lit("<\0\0\0\0\xff\xff\xff{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"
                      "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
                  "header too large");                                                    // test_header_too_large
  EXPECT_REJECTED(lit("\xff\xff\xff\xff\xff\xff\xff\xff{}"), "header too large");
  EXPECT_REJECTED(lit("\x01\0\0\0\0\0\0\0\xff"), "not valid UTF-8");                      // test_invalid_header_non_utf8
  EXPECT_REJECTED(lit("\x01\0\0\0\0\0\0\0{"), "not valid JSON");                          // test_invalid_header_not_json
  EXPECT_REJECTED(lit("<\0\0\0\0\0\0\0{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0, 4]}}"),
                  "size mismatch");                                                       // test_invalid_info
  // test_validation_overflow: both products wrap in 64 bits.
  EXPECT_REJECTED(raw("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,18446744073709551614],\"data_offsets\":[0,16]}}", 16),
                  "overflows");
  EXPECT_REJECTED(raw("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,9223372036854775807],\"data_offsets\":[0,16]}}", 16),
                  "overflows");
  // Wraps to 0 in unchecked arithmetic: must not become an empty tensor.
  EXPECT_REJECTED(raw("{\"test\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0),
                  "overflows");
  // test_metadata_incomplete_buffer: trailing bytes, then 2 bytes missing.
  EXPECT_REJECTED(raw(test16, 16 + 34), "trailing bytes");
  EXPECT_REJECTED(raw(test16, 14), "truncated");
  // test_json_attack: ten tensors on the same bytes.
  std::string attack = "{";
  for (int i = 0; i < 10; ++i)
    attack += (i ? "," : "") + std::string("\"weight_") + std::to_string(i) +
              "\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}";
  EXPECT_REJECTED(raw(attack + "}", 16), "overlap");
}

TEST(Safetensors, LayoutRules) {
  auto two = [](const std::string& a, const std::string& b) {
    return "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + a +
           "},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + b + "}}";
  };
  EXPECT_NO_THROW(st::parse(raw(two("[0,8]", "[8,16]"), 16), "<memory>"));
  EXPECT_NO_THROW(st::parse(raw(two("[8,16]", "[0,8]"), 16), "<memory>"));  // any order in the header
  EXPECT_REJECTED(raw(two("[0,8]", "[12,20]"), 20), "hole");
  EXPECT_REJECTED(raw(two("[4,12]", "[12,20]"), 20), "hole");  // does not start at 0
  EXPECT_REJECTED(raw(two("[0,8]", "[4,12]"), 12), "overlap");
  EXPECT_REJECTED(raw(two("[0,8]", "[8,16]"), 15), "truncated");
  EXPECT_REJECTED(raw(two("[0,8]", "[8,16]"), 17), "trailing bytes");
  EXPECT_REJECTED(raw(two("[0,8]", "[16,8]"), 16), "is after end");
  std::string msg = parse_error(raw(two("[0,8]", "[12,20]"), 20));
  EXPECT_NE(msg.find("tensor \"b\""), std::string::npos) << msg;  // names the tensor
}

TEST(Safetensors, EntrySchema) {
  auto one = [](const std::string& body) { return raw("{\"t\":{" + body + "}}", 8); };
  const std::string shape = "\"shape\":[2]", off = "\"data_offsets\":[0,8]";
  EXPECT_NO_THROW(st::parse(one("\"dtype\":\"F32\"," + shape + "," + off), "<memory>"));
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape + ",\"data_offsets\":[0]"), "exactly two non-negative integers");
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape + ",\"data_offsets\":[0,8,8]"), "exactly two non-negative integers");
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape + ",\"data_offsets\":[-1,8]"), "exactly two non-negative integers");
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape + ",\"data_offsets\":[0,8.0]"), "exactly two non-negative integers");
  for (const char* bad : {"[2.0]", "[-2]", "[true]", "[\"2\"]", "2", "[null]"}) {
    SCOPED_TRACE(bad);
    EXPECT_REJECTED(one("\"dtype\":\"F32\",\"shape\":" + std::string(bad) + "," + off), "non-negative integers");
  }
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape), "missing key \"data_offsets\"");
  EXPECT_REJECTED(one("\"dtype\":\"F32\"," + shape + "," + off + ",\"extra\":1"), "exactly the keys");
  EXPECT_REJECTED(one("\"dtype\":7," + shape + "," + off), "dtype must be a string");
  EXPECT_REJECTED(one("\"dtype\":\"XYZ\"," + shape + "," + off), "unknown dtype");
  EXPECT_REJECTED(one("\"dtype\":\"f32\"," + shape + "," + off), "unknown dtype");
  for (const char* code : {"I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                           "F4", "F8_E3M4"}) {
    std::string msg = parse_error(one("\"dtype\":\"" + std::string(code) + "\"," + shape + "," + off));
    EXPECT_NE(msg.find("valid safetensors but not supported by flx"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor \"t\""), std::string::npos) << msg;
  }
  EXPECT_REJECTED(raw("{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "empty name");
  EXPECT_REJECTED(raw("{\"t\":[1]}", 0), "expected an object");
  EXPECT_REJECTED(raw("[]", 0), "not a JSON object");
  EXPECT_REJECTED(raw("{} x", 0), "trailing characters");
  EXPECT_REJECTED(raw("{\"t\":{\"a\":{\"b\":[[1]]}}}", 0), "nests");
}

TEST(Safetensors, DuplicateKeysAndMetadata) {
  const std::string e = "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  EXPECT_REJECTED(raw("{\"t\":" + e + ",\"t\":" + e + "}", 8), "duplicate key \"t\" at the top level");
  EXPECT_REJECTED(raw("{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
                  "duplicate key \"dtype\" in \"t\"");
  EXPECT_REJECTED(raw("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0), "duplicate key \"a\" in \"__metadata__\"");
  EXPECT_REJECTED(raw("{\"__metadata__\":{\"a\":\"1\"},\"__metadata__\":{}}", 0), "duplicate key");
  EXPECT_REJECTED(raw("{\"__metadata__\":{\"a\":1}}", 0), "__metadata__ must be an object of string to string");
  EXPECT_REJECTED(raw("{\"__metadata__\":[\"a\"]}", 0), "__metadata__ must be an object of string to string");
  st::Header h = st::parse(raw("{\"__metadata__\":{\"k\":\"v\"},\"t\":" + e + "}", 8), "<memory>");
  EXPECT_EQ(h.metadata.at("k"), "v");
  EXPECT_EQ(h.entries.size(), 1u);
  EXPECT_REJECTED(raw("{\"t\":" + e + "}\xc0\xaf", 8), "not valid UTF-8");  // overlong '/'
}

// Only JSON whitespace (space, tab, LF, CR) may surround the header's object:
// the reference reader parses the header with serde_json::from_str, and
// Python's safetensors (0.8.0) refuses each of the cases below with "trailing
// characters" or "expected value". A NUL is not padding: a JSON parser that
// stops at it would read "{}\0garbage" as an empty file.
TEST(Safetensors, OnlyJsonWhitespaceSurroundsTheHeader) {
  for (const std::string ok : {"{}", " {}", "{}      ", "\t\n\r {}\t\n\r ", "\n{}\n"}) {
    SCOPED_TRACE(::testing::PrintToString(ok));
    EXPECT_NO_THROW(st::parse(raw(ok, 0), "<memory>"));
  }
  using namespace std::string_literals;
  const std::pair<std::string, const char*> bad[] = {
      {"{}\0"s, "NUL byte at header offset 2"},
      {"{}\0garbage"s, "NUL byte at header offset 2"},
      {"{}   \0\0\0"s, "NUL byte at header offset 5"},
      {"\0{}"s, "NUL byte at header offset 0"},
      {"\xef\xbb\xbf{}", "must start with '{'"},  // a UTF-8 byte order mark
      {"x{}", "must start with '{'"},
      {"{}\x0b", "trailing characters after the JSON object at header offset 2"},
      {"{}\x0c", "trailing characters"},
      {"{}\xc2\xa0", "trailing characters"},  // no-break space
      {"{} x", "trailing characters after the JSON object at header offset 3"},
      {"{}/**/", "trailing characters"},
      {"{}}", "trailing characters"},
      {"{}{}", "trailing characters"},
  };
  for (const auto& [text, phrase] : bad) {
    SCOPED_TRACE(::testing::PrintToString(text));
    EXPECT_REJECTED(raw(text, 0), phrase);
  }
  // With tensors and data, too.
  const std::string t = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  EXPECT_NO_THROW(st::parse(raw(t + "    ", 8), "<memory>"));
  EXPECT_REJECTED(raw(t + "\0\0\0\0"s, 8), "NUL byte");
  EXPECT_REJECTED(raw(t + "\0junk"s, 8), "NUL byte");
}

// ---- files -------------------------------------------------------------------

TEST(Safetensors, ReadFile) {
  TempDir dir;
  const fs::path good = dir.path / "good.safetensors";
  const float w[3] = {1, 2, 3};
  Bytes file = st::serialize({{"w", DType::Float32, {3}, w, sizeof w}}, {});
  flx::io::write_atomic(good.string(), file);
  EXPECT_EQ(st::read_file(good.string()), file);

  std::string msg = read_error(dir.path / "missing.safetensors");
  EXPECT_EQ(msg.rfind((dir.path / "missing.safetensors").string(), 0), 0u) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  EXPECT_NE(read_error(dir.path).find("not a regular file"), std::string::npos);
  std::ofstream(dir.path / "short.safetensors", std::ios::binary) << "abc";
  EXPECT_NE(read_error(dir.path / "short.safetensors").find("file is too small"), std::string::npos);
  {
    std::ofstream out(dir.path / "huge.safetensors", std::ios::binary);  // claims a 2^40-byte header
    const char prefix[8] = {0, 0, 0, 0, 0, 1, 0, 0};
    out.write(prefix, 8);
  }
  EXPECT_NE(read_error(dir.path / "huge.safetensors").find("header too large"), std::string::npos);
  {
    std::ofstream out(dir.path / "cut.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), long(file.size() / 2));
  }
  EXPECT_NE(read_error(dir.path / "cut.safetensors").find("runs past the end of the file"), std::string::npos);
}

// Whatever is at the path, read_file says what it is without blocking: open()
// of a named pipe waits for a writer unless the file type is checked first.
TEST(Safetensors, ReadFileRefusesAnythingButARegularFileWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path / "pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  auto pending = std::async(std::launch::async, [&] { return read_error(fifo); });
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "read_file blocked on a named pipe";
    ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // a writer comes and goes: open() returns
  }
  std::string msg = pending.get();
  EXPECT_EQ(msg.rfind(fifo.string(), 0), 0u) << msg;
  EXPECT_NE(msg.find("is a named pipe (FIFO), not a regular file"), std::string::npos) << msg;

  msg = read_error(dir.path);
  EXPECT_EQ(msg.rfind(dir.path.string(), 0), 0u) << msg;
  EXPECT_NE(msg.find("is a directory, not a regular file"), std::string::npos) << msg;
  msg = read_error("/dev/zero");
  EXPECT_NE(msg.find("/dev/zero: is a character device, not a regular file"), std::string::npos) << msg;
  // A symbolic link is followed: what counts is what it points to.
  fs::create_symlink("/dev/null", dir.path / "link.safetensors");
  msg = read_error(dir.path / "link.safetensors");
  EXPECT_NE(msg.find("link.safetensors: is a character device"), std::string::npos) << msg;
}

TEST(Safetensors, WriteAtomic) {
  TempDir dir;
  const fs::path p = dir.path / "ckpt.safetensors";
  Bytes big(1000), small{1, 2, 3};
  std::iota(big.begin(), big.end(), uint8_t(0));
  flx::io::write_atomic(p.string(), big);
  EXPECT_EQ(slurp(p), big);
  flx::io::write_atomic(p.string(), small);  // replaced whole, not overwritten in place
  EXPECT_EQ(slurp(p), small);
  EXPECT_EQ(dir.count(), 1u);

  // The target directory does not exist: an error naming the path, nothing left behind.
  const fs::path nodir = dir.path / "nope" / "x.safetensors";
  try {
    flx::io::write_atomic(nodir.string(), small);
    ADD_FAILURE() << "expected CheckpointError";
  } catch (const flx::CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(nodir.string(), 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.count(), 1u);

  // The path is a directory: the rename fails, the temp file is removed, the directory is untouched.
  const fs::path sub = dir.path / "subdir";
  fs::create_directory(sub);
  std::ofstream(sub / "inside") << "keep";
  EXPECT_THROW(flx::io::write_atomic(sub.string(), small), flx::CheckpointError);
  EXPECT_EQ(dir.count(), 2u);  // ckpt.safetensors and subdir, no *.tmp.*
  EXPECT_TRUE(fs::is_directory(sub));
  EXPECT_TRUE(fs::exists(sub / "inside"));
  EXPECT_EQ(slurp(p), small);
}

}  // namespace

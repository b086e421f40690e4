// The C++ half of the safetensors interop tests (driven by the Python scripts
// beside it):
//   safetensors_interop write PATH   writes the file read_flx_file.py checks
//   safetensors_interop check PATH   checks the file write_py_file.py wrote
// Values follow formulas that the Python side computes independently.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flx/dtype.hpp"
#include "flx/error.hpp"
#include "io/files.hpp"
#include "io/safetensors.hpp"

namespace st = flx::safetensors;

namespace {

int write_file(const std::string& path) {
  std::vector<float> weight(12), bias(4);
  for (int i = 0; i < 12; ++i) weight[size_t(i)] = 0.5f * float(i) - 1.0f;
  for (int i = 0; i < 4; ++i) bias[size_t(i)] = float(i) / 4.0f;
  const double d[4] = {1.0 / 3.0, -2.0, 1e300, 0.0};
  const int64_t counts[3] = {-5, 0, int64_t(1) << 40};
  const int32_t step = 42;
  const uint8_t bytes[3] = {0, 7, 255};
  const uint8_t flags[2] = {1, 0};
  const uint16_t half[2] = {flx::float_to_half(1.5f), flx::float_to_half(-2.0f)};
  std::vector<st::WriteEntry> entries{
      {"layers.0.weight", flx::DType::Float32, {4, 3}, weight.data(), weight.size() * 4},
      {"layers.0.bias", flx::DType::Float32, {4}, bias.data(), bias.size() * 4},
      {"d", flx::DType::Float64, {2, 2}, d, sizeof d},
      {"counts", flx::DType::Int64, {3}, counts, sizeof counts},
      {"step", flx::DType::Int32, {}, &step, sizeof step},
      {"bytes", flx::DType::UInt8, {3}, bytes, sizeof bytes},
      {"flags", flx::DType::Bool, {2}, flags, sizeof flags},
      {"half", flx::DType::Float16, {2}, half, sizeof half},
      {"empty", flx::DType::Float32, {0, 2}, nullptr, 0},
  };
  flx::io::write_atomic(path, st::serialize(entries, {{"format", "flx"}, {"epoch", "3"}}));
  return 0;
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "check failed: %s\n", what.c_str());
    ++failures;
  }
}

int check_file(const std::string& path) {
  std::vector<uint8_t> file = st::read_file(path);
  st::Header h = st::parse(file, path);
  expect(h.metadata.size() == 1 && h.metadata.count("source") && h.metadata.at("source") == "numpy",
         "metadata {source: numpy}");
  expect(h.entries.size() == 6, "6 tensors, found " + std::to_string(h.entries.size()));
  auto at = [&](const st::Entry& e, size_t i) { return file.data() + h.data_start + e.begin + i; };
  for (const st::Entry& e : h.entries) {
    if (e.name == "f32") {
      expect(e.dtype == flx::DType::Float32 && e.shape == std::vector<int64_t>{2, 3}, "f32: Float32 [2, 3]");
      for (size_t i = 0; i < 6; ++i) {
        float v;
        std::memcpy(&v, at(e, 4 * i), 4);
        expect(v == float(i) * 1.25f, "f32 value " + std::to_string(i));
      }
    } else if (e.name == "f64") {
      expect(e.dtype == flx::DType::Float64 && e.shape == std::vector<int64_t>{3}, "f64: Float64 [3]");
      for (size_t i = 0; i < 3; ++i) {
        double v;
        std::memcpy(&v, at(e, 8 * i), 8);
        expect(v == -double(i) / 8.0, "f64 value " + std::to_string(i));
      }
    } else if (e.name == "i64") {
      expect(e.dtype == flx::DType::Int64 && e.shape == std::vector<int64_t>{2, 1}, "i64: Int64 [2, 1]");
      int64_t v[2];
      std::memcpy(v, at(e, 0), 16);
      expect(v[0] == -(int64_t(1) << 50) && v[1] == 123, "i64 values");
    } else if (e.name == "u8") {
      expect(e.dtype == flx::DType::UInt8 && e.shape == std::vector<int64_t>{4}, "u8: UInt8 [4]");
      for (size_t i = 0; i < 4; ++i) expect(*at(e, i) == uint8_t(i * 60), "u8 value " + std::to_string(i));
    } else if (e.name == "mask") {
      expect(e.dtype == flx::DType::Bool && e.shape == std::vector<int64_t>{3}, "mask: Bool [3]");
      expect(*at(e, 0) == 1 && *at(e, 1) == 0 && *at(e, 2) == 1, "mask values");
    } else if (e.name == "f16") {
      expect(e.dtype == flx::DType::Float16 && e.shape == std::vector<int64_t>{2}, "f16: Float16 [2]");
      uint16_t v[2];
      std::memcpy(v, at(e, 0), 4);
      expect(flx::half_to_float(v[0]) == 0.5f && flx::half_to_float(v[1]) == -3.0f, "f16 values");
    } else {
      expect(false, "unexpected tensor " + e.name);
    }
  }
  if (failures == 0) std::printf("flx parsed the numpy-written file: %zu tensors OK\n", h.entries.size());
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s write|check PATH\n", argv[0]);
    return 2;
  }
  try {
    std::string mode = argv[1];
    if (mode == "write") return write_file(argv[2]);
    if (mode == "check") return check_file(argv[2]);
  } catch (const flx::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown mode %s; use write or check\n", argv[1]);
  return 2;
}

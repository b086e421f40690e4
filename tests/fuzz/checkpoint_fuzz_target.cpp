// libFuzzer-style target for checkpoint reading: any bytes must either parse
// or raise an flx::Error; never crash, leak or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "flx/error.hpp"
#include "io/safetensors.hpp"

namespace {

// Reads every byte of every tensor, so that a range the parser wrongly
// accepted shows up as an out-of-bounds read under ASan.
unsigned touch(std::span<const uint8_t> file, const flx::safetensors::Header& h) {
  unsigned sum = 0;
  for (const auto& e : h.entries)
    for (uint64_t i = h.data_start + e.begin; i < h.data_start + e.end; ++i) sum += file[i];
  return sum;
}

}  // namespace

// The whole target body; returns true if the input was accepted.
bool fuzz_one(const uint8_t* data, size_t size) {
  std::span<const uint8_t> file(data, size);
  try {
    auto header = flx::safetensors::parse(file, "<fuzz>");
    volatile unsigned sink = touch(file, header);
    (void)sink;
    return true;
  } catch (const flx::Error&) {
    return false;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_one(data, size);
  return 0;
}

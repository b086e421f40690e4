// libFuzzer-style target for checkpoint reading: any bytes must either parse
// or raise an flx::Error; never crash, leak or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "flx/checkpoints.hpp"
#include "flx/layers.hpp"
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

long fuzz_models_loaded = 0, fuzz_opt_states_loaded = 0;

namespace {

// The models the fuzzed states are loaded into: a Dense whose weight [4, 3]
// and bias [4] match the driver's seed file, and an optimiser state for it.
struct Targets {
  flx::Dense dense{3, 4};
  flx::OptState opt = flx::setup(flx::Adam(), dense);
};

}  // namespace

// The whole target body: parse, then load() + loadmodel() into a model and an
// optimiser state. Returns true if the input was accepted as a file.
bool fuzz_one(const uint8_t* data, size_t size) {
  static Targets targets;
  std::span<const uint8_t> file(data, size);
  try {
    auto header = flx::safetensors::parse(file, "<fuzz>");
    volatile unsigned sink = touch(file, header);
    (void)sink;
  } catch (const flx::Error&) {
    return false;
  }
  // Accepted by the parser: the public path must cope with it too.
  try {
    flx::State s = flx::detail::load_bytes(file, "<fuzz>");
    try {
      flx::loadmodel(targets.dense, s);
      ++fuzz_models_loaded;
      volatile float y = flx::sum(targets.dense(flx::ones(3, 2))).item<float>();
      (void)y;
    } catch (const flx::Error&) {
    }
    try {
      flx::loadmodel(targets.opt, s);
      ++fuzz_opt_states_loaded;
    } catch (const flx::Error&) {
    }
  } catch (const flx::Error&) {
  }
  return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_one(data, size);
  return 0;
}

// What the mutation drivers share: a fixed-seed RNG with the edits that know
// nothing of the file format, and a runner that hands a target its input in a
// buffer of exactly the input's size.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace flx::fuzz {

using Bytes = std::vector<uint8_t>;

class ByteMutator {
 public:
  explicit ByteMutator(uint64_t seed) : rng_(seed) {}
  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }
  bool chance(int percent) { return below(100) < uint64_t(percent); }

  void bit_flips(Bytes& f) {
    for (uint64_t k = 1 + below(4); k-- && !f.empty();) f[below(f.size())] ^= uint8_t(1u << below(8));
  }
  void overwrite(Bytes& f) {
    for (uint64_t k = 1 + below(4); k-- && !f.empty();) f[below(f.size())] = uint8_t(rng_());
  }
  void truncate(Bytes& f) { f.resize(size_t(below(f.size() + 1))); }
  void extend(Bytes& f) {
    for (uint64_t k = 1 + below(16); k--;) f.push_back(uint8_t(rng_()));
  }
  // f cut at a random point, continued with other from a random point.
  void splice(Bytes& f, const Bytes& other) {
    size_t cut = size_t(below(f.size() + 1)), from = size_t(below(other.size() + 1));
    f.resize(cut);
    f.insert(f.end(), other.begin() + long(from), other.end());
  }

 protected:
  std::mt19937_64 rng_;
};

// Copies the input into a buffer of exactly its size, so that any read past
// the end is caught by ASan (a vector's capacity may hide it).
template <class Target>
bool run_exact(const Bytes& f, Target target) {
  std::unique_ptr<uint8_t[]> exact(new uint8_t[f.size() ? f.size() : 1]);
  if (!f.empty()) std::memcpy(exact.get(), f.data(), f.size());
  return target(exact.get(), f.size());
}

}  // namespace flx::fuzz

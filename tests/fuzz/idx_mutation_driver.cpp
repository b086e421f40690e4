// Deterministic mutation fuzzing of the IDX readers, for compilers without
// libFuzzer (g++). Mutates valid IDX files (bytes, header fields, payload
// lengths), then encodes them as the readers may meet them: raw, gzip, gzip
// in several members, a damaged gzip stream, gzip followed by a gzip bomb or
// by garbage; feeds each to idx_fuzz_one() under ASan + UBSan.
//   flx_idx_fuzz [iterations=5000] [seed=1]
// Exits non-zero if a valid file is rejected or an exception other than
// flx::Error escapes; the sanitizers abort on their own findings.
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "../gzip_bytes.hpp"
#include "byte_mutator.hpp"

bool idx_fuzz_one(const uint8_t* data, size_t size);
std::vector<uint8_t> idx_seed(bool images);
extern long idx_fuzz_loaded;

namespace {

using flx::fuzz::Bytes;

Bytes gzip(const Bytes& in) { return flx::testing::gzip_bytes(in, 6); }

void append(Bytes& a, const Bytes& b) { a.insert(a.end(), b.begin(), b.end()); }

class IdxMutator : public flx::fuzz::ByteMutator {
 public:
  using ByteMutator::ByteMutator;

  // Edits of the uncompressed file.
  void mutate(Bytes& f, const Bytes& other) {
    switch (below(9)) {
      case 0: bit_flips(f); break;
      case 1: overwrite(f); break;
      case 2: truncate(f); break;
      case 3: extend(f); break;
      case 4: splice(f, other); break;
      case 5: header_byte(f); break;
      case 6: case 7: dim(f); break;
      default: count_with_payload(f); break;
    }
  }

  // The file as the reader may meet it.
  Bytes encode(const Bytes& plain) {
    const uint64_t how = below(20);
    if (how < 9) return plain;
    Bytes out;
    if (how < 14) return gzip(plain);
    if (how < 16) {  // several gzip members, which gunzip (and gzread) join
      size_t at = 0;
      for (uint64_t k = 1 + below(3); k--;) {
        size_t n = size_t(below(plain.size() - at + 1));
        append(out, gzip(Bytes(plain.begin() + long(at), plain.begin() + long(at + n))));
        at += n;
      }
      append(out, gzip(Bytes(plain.begin() + long(at), plain.end())));
      return out;
    }
    out = gzip(plain);
    switch (how) {
      case 16: bit_flips(out); break;  // a damaged stream
      case 17: truncate(out); break;
      case 18: {  // a gzip bomb after the file: up to 256 MB of zeros in a few hundred kB
        static const Bytes zeros = gzip(Bytes(1 << 20));
        for (uint64_t k = 1 + below(256); k--;) append(out, zeros);
        break;
      }
      default: extend(out); break;  // garbage after the stream
    }
    return out;
  }

 private:
  static void put_u32(Bytes& f, size_t at, uint32_t v) {
    if (f.size() < at + 4) f.resize(at + 4);
    for (int i = 0; i < 4; ++i) f[at + size_t(i)] = uint8_t(v >> (24 - 8 * i));
  }
  void header_byte(Bytes& f) {  // magic, type, ndims
    static const uint8_t values[] = {0, 1, 3, 8, 9, 0x0b, 0x0d, 0x1f, 0x8b, 0xff};
    if (f.size() < 4) f.resize(4);
    f[size_t(below(4))] = values[below(std::size(values))];
  }
  uint32_t extreme() {
    static const uint32_t values[] = {0, 1, 2, 3, 4, 27, 28, 29, 255, 784, 9999, 10000, 10001, 60000, 60001,
                                      0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
    return chance(80) ? values[below(std::size(values))] : uint32_t(rng_());
  }
  void dim(Bytes& f) { put_u32(f, 4 + 4 * size_t(below(3)), extreme()); }
  // A new item count with a payload of about that many items, so that the
  // length checks pass or fail by a little, and large files get read.
  void count_with_payload(Bytes& f) {
    static const uint32_t counts[] = {0, 1, 2, 3, 7, 100, 9999, 10000, 10001};
    const uint32_t n = counts[below(chance(90) ? 6 : std::size(counts))];
    const bool images = f.size() > 3 && f[3] == 3;
    const size_t head = images ? 16 : 8, item = images ? 28 * 28 : 1;
    put_u32(f, 4, n);
    const int64_t delta = chance(60) ? 0 : int64_t(below(5)) - 2;
    f.resize(size_t(std::max<int64_t>(int64_t(head), int64_t(head + n * item) + delta)), uint8_t(rng_() % 10));
  }
};

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 5000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const auto t0 = std::chrono::steady_clock::now();
  long loaded = 0, rejected = 0, i = -1;
  try {
    const Bytes seeds[2] = {idx_seed(false), idx_seed(true)};
    auto run = [](uint8_t selector, const Bytes& file) {
      Bytes input{selector};
      append(input, file);
      return flx::fuzz::run_exact(input, idx_fuzz_one);
    };
    // Every valid file loads, raw or gzipped, under every name.
    for (uint8_t sel = 0; sel < 8; ++sel)
      for (bool gz : {false, true})
        if (!run(sel, gz ? gzip(seeds[sel & 1]) : seeds[sel & 1])) {
          std::fprintf(stderr, "flx_idx_fuzz: valid seed (selector %d, %s) was rejected\n", sel, gz ? "gzip" : "raw");
          return 1;
        }
    IdxMutator m(seed);
    for (i = 0; i < iterations; ++i) {
      const uint8_t sel = uint8_t(m.below(8));
      Bytes f = seeds[sel & 1];
      for (uint64_t k = 1 + (m.chance(25) ? m.below(3) : 0); k--;) m.mutate(f, seeds[m.below(2)]);
      (run(sel, m.encode(f)) ? loaded : rejected)++;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flx_idx_fuzz: iteration %ld (seed %llu): an exception other than flx::Error escaped: %s\n",
                 i, static_cast<unsigned long long>(seed), e.what());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("flx_idx_fuzz: %ld iterations (seed %llu): %ld loaded, %ld rejected with flx::Error "
              "(%ld loads in all, seeds included); %.2f s\n",
              iterations, static_cast<unsigned long long>(seed), loaded, rejected, idx_fuzz_loaded, secs);
  return 0;
}

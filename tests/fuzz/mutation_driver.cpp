// Deterministic mutation fuzzing of checkpoint files, for compilers without
// libFuzzer (g++). Builds valid seed files with serialize(), mutates them
// with a fixed-seed RNG (byte-level and structured header edits) and feeds
// each result to fuzz_one() under ASan + UBSan.
//   flx_checkpoint_fuzz [iterations=12000] [seed=1]
// Exits non-zero if a seed is rejected or an exception other than flx::Error
// escapes; the sanitizers abort on their own findings.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <map>
#include <tuple>
#include <cctype>
#include <string>
#include <vector>

#include "byte_mutator.hpp"
#include "flx/error.hpp"
#include "io/safetensors.hpp"

bool fuzz_one(const uint8_t* data, size_t size);
extern long fuzz_models_loaded, fuzz_opt_states_loaded;

namespace {

namespace st = flx::safetensors;
using flx::fuzz::Bytes;

Bytes make_seed(const std::vector<std::tuple<std::string, flx::DType, std::vector<int64_t>>>& specs,
                const std::map<std::string, std::string>& metadata) {
  std::vector<Bytes> storage;
  std::vector<st::WriteEntry> entries;
  for (const auto& [name, dtype, shape] : specs) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    Bytes data(size_t(numel) * flx::dtype_size(dtype));
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + name.size());
    storage.push_back(std::move(data));
    entries.push_back({name, dtype, shape, storage.back().data(), storage.back().size()});
  }
  return st::serialize(entries, metadata);
}

std::vector<Bytes> make_seeds() {
  using flx::DType;
  std::vector<Bytes> seeds;
  // A Dense layer as the public API saves it.
  seeds.push_back(make_seed({{"weight", DType::Float32, {4, 3}}, {"bias", DType::Float32, {4}}}, {}));
  seeds.push_back(make_seed({{"layers.0.weight", DType::Float32, {4, 3}},
                             {"layers.0.bias", DType::Float32, {4}},
                             {"step", DType::Int64, {}},
                             {"mask", DType::Bool, {3}},
                             {"empty", DType::Float64, {0, 5}}},
                            {{"format", "flx"}, {"version", "1"}}));
  seeds.push_back(make_seed({{"a", DType::Float16, {2, 2}}, {"b", DType::BFloat16, {3}}, {"c", DType::UInt8, {5}},
                             {"d", DType::Int32, {1, 1, 2}}, {"e", DType::Float64, {2}}},
                            {}));
  seeds.push_back(make_seed({}, {{"only", "metadata"}}));
  seeds.push_back(make_seed({{"scalar", DType::Float32, {}}}, {}));
  // The Adam state of that Dense, as save(path, opt_state) writes it.
  seeds.push_back(make_seed({{"weight.state.t0", DType::Float32, {4, 3}},
                             {"weight.state.t1", DType::Float32, {4, 3}},
                             {"weight.state.scalars", DType::Float64, {2}},
                             {"bias.state.t0", DType::Float32, {4}},
                             {"bias.state.t1", DType::Float32, {4}},
                             {"bias.state.scalars", DType::Float64, {2}}},
                            {{"flx.kind", "optimiser state"}, {"flx.rule", "Adam(0.001, (0.9, 0.999), 1.0e-8)"}}));
  return seeds;
}

class Mutator : public flx::fuzz::ByteMutator {
 public:
  using ByteMutator::ByteMutator;

  void mutate(Bytes& f, const std::vector<Bytes>& seeds) {
    switch (below(9)) {
      case 0: bit_flips(f); break;
      case 1: overwrite(f); break;
      case 2: truncate(f); break;
      case 3: extend(f); break;
      case 4: set_prefix(f); break;
      case 5: splice(f, seeds[below(seeds.size())]); break;
      default: mutate_header(f); break;
    }
  }

 private:
  static void write_prefix(Bytes& f, uint64_t n) {
    if (f.size() < 8) f.resize(8);
    for (int i = 0; i < 8; ++i) f[size_t(i)] = uint8_t(n >> (8 * i));
  }
  static uint64_t prefix(const Bytes& f) {
    uint64_t n = 0;
    for (int i = 7; i >= 0 && f.size() >= 8; --i) n = (n << 8) | f[size_t(i)];
    return n;
  }
  void set_prefix(Bytes& f) {
    const uint64_t size = f.size(), k = below(16);
    const uint64_t choices[] = {0,          below(16),          st::max_header_size,  st::max_header_size + 1,
                                ~0ull,      ~0ull - k,          1ull << 63,           rng_(),
                                size + k,   size - 8 - k,       prefix(f) + k,        prefix(f) - k};
    write_prefix(f, choices[below(std::size(choices))]);
  }
  // Edits the header text, then (usually) fixes the length prefix so that the
  // edit reaches the JSON validation instead of failing the length check.
  void mutate_header(Bytes& f) {
    const uint64_t n = prefix(f);
    if (f.size() < 8 || n > f.size() - 8) return bit_flips(f);
    std::string h(f.begin() + 8, f.begin() + 8 + long(n));
    Bytes data(f.begin() + 8 + long(n), f.end());
    for (uint64_t k = 1 + below(2); k--;) edit(h);
    if (chance(50)) h.append((8 - h.size() % 8) % 8, ' ');
    Bytes out(8);
    out.insert(out.end(), h.begin(), h.end());
    if (chance(15)) data.resize(size_t(below(data.size() + 9)));
    out.insert(out.end(), data.begin(), data.end());
    write_prefix(out, chance(90) ? h.size() : h.size() + below(3) - 1);
    f = std::move(out);
  }

  // Positions of every match of any char in `chars`.
  static std::vector<size_t> find_all(const std::string& h, const char* chars) {
    std::vector<size_t> at;
    for (size_t i = 0; i < h.size(); ++i)
      if (std::strchr(chars, h[i])) at.push_back(i);
    return at;
  }
  // [begin, end) of the number, literal or string starting at or after pos.
  static std::pair<size_t, size_t> token_at(const std::string& h, size_t pos) {
    size_t b = pos, e = pos;
    if (h[b] == '"') {
      e = h.find('"', b + 1);
      return {b, e == std::string::npos ? h.size() : e + 1};
    }
    while (e < h.size() && !std::strchr(",]}: ", h[e])) ++e;
    return {b, e};
  }

  void edit(std::string& h) {
    static const char* numbers[] = {"18446744073709551615", "18446744073709551616", "-1", "9223372036854775807",
                                    "9223372036854775808", "4611686018427387904", "4294967296", "1e3", "0.5",
                                    "-0", "true", "null", "99999999999999999999999", "0", "1", "\"4\"", "[]",
                                    "[0,0]", "[1,2,3]"};
    static const char* dtypes[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F4", "I8", "I16", "U16",
                                   "U32", "U64", "f32", "", "XYZ", "F32 ", "F64", "BF16", "BOOL", "U8", "C64"};
    static const char* junk[] = {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x01",
                                 "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u0000", "\\ud800", "/*x*/"};
    if (h.empty()) return;
    switch (below(7)) {
      case 0: {  // a number (shape, data_offsets) becomes something extreme
        auto digits = find_all(h, "0123456789");
        if (digits.empty()) break;
        auto [b, e] = token_at(h, digits[below(digits.size())]);
        while (b > 0 && std::isdigit(static_cast<unsigned char>(h[b - 1]))) --b;
        h.replace(b, e - b, numbers[below(std::size(numbers))]);
        break;
      }
      case 1: {  // a dtype value changes
        size_t at = h.find("\"dtype\":\"");
        for (uint64_t skip = below(4); skip-- && at != std::string::npos;) {
          size_t next = h.find("\"dtype\":\"", at + 1);
          if (next == std::string::npos) break;
          at = next;
        }
        if (at == std::string::npos) break;
        size_t b = at + 9, e = h.find('"', b);
        if (e == std::string::npos) break;
        h.replace(b, e - b, dtypes[below(std::size(dtypes))]);
        break;
      }
      case 2: {  // duplicate a "key":value pair, at the top level or inside an entry
        auto quotes = find_all(h, "\"");
        if (quotes.empty()) break;
        size_t b = quotes[below(quotes.size())];
        auto [kb, ke] = token_at(h, b);
        if (ke >= h.size() || h[ke] != ':') break;
        size_t e = ke + 1, depth = 0;
        for (; e < h.size(); ++e) {
          if (h[e] == '{' || h[e] == '[') ++depth;
          else if ((h[e] == '}' || h[e] == ']') && depth-- == 0) break;
          else if (h[e] == ',' && depth == 0) break;
        }
        std::string pair = h.substr(kb, e - kb);
        h.insert(kb, pair + ",");
        break;
      }
      case 3: {  // remove a key (and its value)
        auto quotes = find_all(h, "\"");
        if (quotes.empty()) break;
        size_t b = quotes[below(quotes.size())];
        size_t e = h.find_first_of(",}", b + 1);
        if (e == std::string::npos) break;
        h.erase(b, e - b + (h[e] == ',' ? 1 : 0));
        break;
      }
      case 4:  // invalid UTF-8 or a stray JSON character
        h.insert(size_t(below(h.size() + 1)), junk[below(std::size(junk))]);
        break;
      case 5:  // delete a run of characters
        h.erase(size_t(below(h.size())), size_t(1 + below(8)));
        break;
      default: {  // swap two structural characters
        auto s = find_all(h, "{}[],:");
        if (s.size() < 2) break;
        std::swap(h[s[below(s.size())]], h[s[below(s.size())]]);
        break;
      }
    }
  }
};

bool run_one(const Bytes& f) { return flx::fuzz::run_exact(f, fuzz_one); }

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 12000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const auto t0 = std::chrono::steady_clock::now();
  long accepted = 0, rejected = 0, i = -1;
  try {
    const std::vector<Bytes> seeds = make_seeds();
    for (size_t s = 0; s < seeds.size(); ++s) {
      if (!run_one(seeds[s])) {
        std::fprintf(stderr, "flx_checkpoint_fuzz: valid seed %zu was rejected\n", s);
        return 1;
      }
    }
    Mutator m(seed);
    for (i = 0; i < iterations; ++i) {
      Bytes f = seeds[m.below(seeds.size())];
      for (uint64_t k = 1 + (m.chance(25) ? m.below(3) : 0); k--;) m.mutate(f, seeds);
      (run_one(f) ? accepted : rejected)++;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flx_checkpoint_fuzz: iteration %ld (seed %llu): an exception other than flx::Error "
                 "escaped: %s\n", i, static_cast<unsigned long long>(seed), e.what());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("flx_checkpoint_fuzz: %ld iterations (seed %llu): %ld parsed OK, %ld rejected with flx::Error; "
              "loadmodel took %ld into a Dense, %ld into an optimiser state; %.2f s\n", iterations,
              static_cast<unsigned long long>(seed), accepted, rejected, fuzz_models_loaded, fuzz_opt_states_loaded, secs);
  return 0;
}

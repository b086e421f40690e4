// Pieces the benchmark programs (bench_flx, bench_gpu, bench_cnn, bench_rnn) share.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <flx/devices.hpp>

namespace flx_bench {

// Keep a value observable so the compiler cannot drop the work producing it.
template <class T>
inline void keep(T const& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

// The value after option argv[*i] (advancing *i), or exit 2 saying that
// `program`'s option needs one.
inline std::string option_value(const char* program, int argc, char** argv, int* i) {
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "%s: %s needs a value\n", program, argv[*i]);
    std::exit(2);
  }
  return argv[++*i];
}

// The device a --device value names: "CPU", "CUDA" (ordinal 0), "CUDA:1".
inline flx::Device parse_device(const std::string& s) {
  const auto colon = s.find(':');
  const int ordinal = colon == std::string::npos ? 0 : std::atoi(s.c_str() + colon + 1);
  return flx::get_device(s.substr(0, colon), ordinal);
}

}  // namespace flx_bench

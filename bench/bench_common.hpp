// Pieces the benchmark programs (bench_flx, bench_gpu) share.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

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

}  // namespace flx_bench

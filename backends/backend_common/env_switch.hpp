// Switches read from the environment (FLX_DENSE_FUSED=0,
// FLX_CPU_F32_GEMM=openblas, ...), for libflx and the backends alike: each
// caller reads its own once. Unset or empty gives the default; a value
// outside the accepted words is reported on stderr, naming the variable,
// the value and the words, and the default is used, as FLX_NUM_THREADS's
// bad values are: a typo must not silently run something else than the
// user asked for without a word.
#ifndef FLX_BACKEND_COMMON_ENV_SWITCH_HPP
#define FLX_BACKEND_COMMON_ENV_SWITCH_HPP

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace flx::backend_common {

// The index in `words` of the value of variable `name`; `fallback` when it
// is unset, empty or none of them (then said on stderr).
inline int env_choice(const char* name, std::initializer_list<const char*> words, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  int i = 0;
  std::string list;
  for (const char* w : words) {
    if (std::string(v) == w) return i;
    list += (i ? (i + 1 == int(words.size()) ? " or " : ", ") : "") + std::string(w);
    ++i;
  }
  std::fprintf(stderr, "flx: ignoring %s=\"%s\": expected %s\n", name, v, list.c_str());
  return fallback;
}

// An on/off switch: 1 or 0 (also true or false).
inline bool env_switch(const char* name, bool fallback) {
  const int i = env_choice(name, {"1", "0", "true", "false"}, fallback ? 0 : 1);
  return i == 0 || i == 2;
}

}  // namespace flx::backend_common

#endif  // FLX_BACKEND_COMMON_ENV_SWITCH_HPP

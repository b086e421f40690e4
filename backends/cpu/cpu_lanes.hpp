// Lanes: a sum in 8 lanes (element i of a row into lane i % 8), added up in
// one fixed order at the end. The compiler vectorises it, and its bits
// depend on the rows and their lengths only, never on the threads: a
// normalisation's sums over one channel or group run on one thread.
#pragma once

#include <cstdint>

namespace flx::cpu_backend {

struct Lanes {
  double lane[8] = {};
  // Adds f(i) for i in [0, n).
  template <class F>
  void add(int64_t n, F&& f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int64_t j = 0; j < 8; ++j) lane[j] += f(i + j);
    for (; i < n; ++i) lane[i & 7] += f(i);
  }
  double total() const {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
};

}  // namespace flx::cpu_backend

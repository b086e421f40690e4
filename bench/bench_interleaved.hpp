// The driver bench_cnn and bench_rnn share: named benchmarks, each a step
// to time and its flops, run in interleaved rounds, one JSON line each.
//
// ns_per_iter is the median over --repeats timed runs of `iters`
// iterations (calibrated so that one run lasts about --min-time seconds,
// after a warm-up). The runs are interleaved: round r times every
// benchmark once before round r + 1 starts, so a slow phase of a shared
// machine spreads over all of them instead of landing on one. Every timed
// run ends with synchronize(device).
//
//   PROGRAM [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] [--small] [--list]
#pragma once

#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace flx_bench {

struct Runner {
  std::function<void()> step;
  double flops = 0;  // per iteration
};

struct Bench {
  std::string name;
  std::function<Runner(flx::Device, bool small)> make;
};

inline double run_ns(Runner& r, flx::Device dev, int64_t iters) {
  flx::synchronize(dev);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) r.step();
  flx::synchronize(dev);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / double(iters);
}

// Warm-up (plans, primitives, memory pools), then iterations per run so that
// one lasts about min_time, from the fastest pass seen.
inline int64_t calibrate(Runner& r, flx::Device dev, double min_time) {
  double best = 1e300, spent = 0;
  for (int k = 0; k < 2 || (spent < 0.5e9 * min_time && k < 1000); ++k) {
    const double ns = run_ns(r, dev, 1);
    best = std::min(best, ns);
    spent += ns;
  }
  return std::max<int64_t>(1, int64_t(min_time * 1e9 / best));
}

// The whole program: parse the options above, run the chosen benchmarks,
// print their lines. Exit status 0, 1 (a benchmark failed), 2 (bad usage).
inline int run_interleaved(const char* program, int argc, char** argv, const std::vector<Bench>& benches) {
  std::string device = "CPU", filter;
  int repeats = 7;
  double min_time = 0.3;
  bool small = false, list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return option_value(program, argc, argv, &i); };
    if (a == "--device") device = next();
    else if (a == "--filter") filter = next();
    else if (a == "--repeats") repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") min_time = std::atof(next().c_str());
    else if (a == "--small") small = true;
    else if (a == "--list") list = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--device CPU|CUDA:0|OpenCL:0] [--filter SUBSTR] [--repeats N] [--min-time S] "
                  "[--small] [--list]\n",
                  program);
      return 0;
    } else {
      std::fprintf(stderr, "%s: unknown argument %s\n", program, a.c_str());
      return 2;
    }
  }
  std::vector<Bench> chosen;
  for (const auto& b : benches)
    if (filter.empty() || b.name.find(filter) != std::string::npos) chosen.push_back(b);
  if (list) {
    for (const auto& b : chosen) std::printf("%s\n", b.name.c_str());
    return 0;
  }
  try {
    const flx::Device dev = parse_device(device);
    std::vector<Runner> runners;
    std::vector<int64_t> iters;
    for (const auto& b : chosen) {
      runners.push_back(b.make(dev, small));
      iters.push_back(calibrate(runners.back(), dev, min_time));
    }
    std::vector<std::vector<double>> ns(chosen.size());
    for (int r = 0; r < repeats; ++r)
      for (size_t i = 0; i < chosen.size(); ++i) ns[i].push_back(run_ns(runners[i], dev, iters[i]));
    for (size_t i = 0; i < chosen.size(); ++i) {
      std::vector<double> v = ns[i];
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      const double flops = runners[i].flops;
      std::printf(
          "{\"name\": \"%s\", \"ns_per_iter\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"repeats\": %zu, "
          "\"iters\": %lld, \"device\": \"%s\", \"threads\": %d, \"threads_in_use\": %d, \"small\": %s, \"flops\": %.0f, "
          "\"gflops\": %.3f}\n",
          chosen[i].name.c_str(), median, v.front(), v.back(), n, static_cast<long long>(iters[i]),
          dev.str().c_str(), flx::num_threads(), flx::num_threads_in_use(), small ? "true" : "false", flops,
          flops / median);
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 0;
}

}  // namespace flx_bench

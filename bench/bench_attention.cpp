// flx attention benchmarks (issue 30): a forward and backward pass of
// dot_product_attention at sequence lengths 256, 1024, 4096 and 8192, model
// dim 256 in 8 heads, batch 4. Prints one JSON object per line, as
// bench_rnn (bench_interleaved.hpp); bench/compare_attention.py runs it
// beside PyTorch's scaled_dot_product_attention.
//
//   bench_attention [--dtype f32|bf16|f16|f64] [--causal] [--device CPU|CUDA:0|OpenCL:0]
//                   [--filter SUBSTR] [--repeats N] [--min-time S] [--small] [--list]
//   bench_attention --memory NAME [--dtype ...] [--causal] [--device ...] [--small]
//
// Benchmarks (--small: lengths 16 and 40, model dim 16 in 2 heads, batch 2):
//   linear_L<n>  withgradient of sum(o .* c) with o = dot_product_attention(q,
//                k, v, 8, {.scores = false}): the output and dq, dk, dv,
//                memory linear in n (the device's own kernel, or tiles)
//   scores_L<n>  the same with α materialised (.scores = true), up to 4096
//                (α alone is 4·n²·8 bytes per sequence in Float32)
// flops: the products' multiply-adds × 2: 4 n² d batch forward, twice that
// backward (dV, dP, dQ, dK), causal half of it (the useful work; a kernel
// that recomputes the scores does more).
//
// --memory NAME runs benchmark NAME once, after nothing else in a fresh
// process, and prints {"name", "peak_bytes", "rss_growth_bytes"}: the
// device's peak bytes in use by flx during the step (memory_stats, from a
// peak reset just before it) and the growth of the process's peak resident
// set during the step (Linux's VmHWM, restarted at VmRSS just before it
// through /proc/self/clear_refs: on the CPU this sees every allocation,
// flx's tensors, a backend's scratch and the allocator's slack alike, the
// measure compare_attention.py applies to PyTorch too).
#include <flx/flx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_interleaved.hpp"
#include "devices/registry.hpp"  // detail::reset_memory_peak

using namespace flx;

namespace {

using flx_bench::Bench;
using flx_bench::keep;
using flx_bench::Runner;

struct Settings {
  DType dtype = Float32;
  bool causal = false;
};

struct Size {
  int64_t dim, heads, batch;
};
Size size_of(bool small) { return small ? Size{16, 2, 2} : Size{256, 8, 4}; }
std::vector<int64_t> lengths(bool small) { return small ? std::vector<int64_t>{16, 40} : std::vector<int64_t>{256, 1024, 4096, 8192}; }
constexpr int64_t kLongestWithScores = 4096;

struct Inputs {
  Tensor q, k, v, c;
};

Runner make(Device dev, const Settings& st, const Size& s, int64_t len, bool scores) {
  set_seed(1234);
  auto in = std::make_shared<Inputs>();
  auto r = [&] { return (rand(Float32, {s.dim, len, s.batch}) - 0.5).to(st.dtype) | dev; };
  in->q = r();
  in->k = r();
  in->v = r();
  in->c = r();
  const AttentionOptions o{.causal = st.causal, .scores = scores};
  const int64_t heads = s.heads;
  const double fwd = 4.0 * double(len) * double(len) * double(s.dim) * double(s.batch);
  return {[in, o, heads] {
            auto [l, g] = withgradient([&](const Tensor& q, const Tensor& k, const Tensor& v) {
              return sum(dot_product_attention(q, k, v, heads, o).first * in->c);
            }, in->q, in->k, in->v);
            keep(l);
            keep(g);
          },
          3 * fwd * (st.causal ? 0.5 : 1.0)};
}

std::vector<Bench> benches(const Settings& st) {
  // Named by the full size's lengths; --small runs its own lengths under the same names.
  std::vector<Bench> out;
  const std::vector<int64_t> full = lengths(false);
  for (bool scores : {false, true})
    for (size_t at = 0; at < full.size(); ++at) {
      if (scores && full[at] > kLongestWithScores) continue;
      out.push_back({std::string(scores ? "scores_L" : "linear_L") + std::to_string(full[at]),
                     [st, scores, at](Device d, bool sm) {
                       const std::vector<int64_t> ls = lengths(sm);
                       return make(d, st, size_of(sm), ls[std::min(at, ls.size() - 1)], scores);
                     }});
    }
  return out;
}

// A line "Key:   N kB" of /proc/self/status, in bytes (-1 without it).
int64_t status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::strlen(key)) * 1024;
  return -1;
}
// Starts a new peak of the resident set (Linux: 5 to clear_refs sets VmHWM
// to VmRSS) and returns the resident set now. getrusage's ru_maxrss would
// not do: it keeps the peak of the process that exec'd this one.
int64_t restart_rss_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
  return status_bytes("VmRSS:");
}

int memory(const std::string& name, const std::string& device, const Settings& st, bool small) {
  for (const Bench& b : benches(st)) {
    if (b.name != name) continue;
    const Device dev = flx_bench::parse_device(device);
    Runner r = b.make(dev, small);
    synchronize(dev);
    detail::reset_memory_peak(dev);
    const MemoryStats before = memory_stats(dev);
    const int64_t rss = restart_rss_peak();
    r.step();
    synchronize(dev);
    const MemoryStats after = memory_stats(dev);
    const int64_t hwm = status_bytes("VmHWM:");
    std::printf("{\"name\": \"%s\", \"device\": \"%s\", \"peak_bytes\": %lld, \"rss_growth_bytes\": %lld, "
                "\"reserved_peak_bytes\": %lld}\n",
                name.c_str(), dev.str().c_str(), static_cast<long long>(after.peak - before.in_use),
                static_cast<long long>(hwm - rss), static_cast<long long>(after.reserved_peak));
    return 0;
  }
  std::fprintf(stderr, "bench_attention: no benchmark named %s (see --list)\n", name.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // This program's own options; the rest go to the shared driver.
  Settings st;
  std::string memory_of, device = "CPU";
  bool small = false;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dtype") {
      const std::string t = flx_bench::option_value("bench_attention", argc, argv, &i);
      st.dtype = t == "bf16" ? BFloat16 : t == "f16" ? Float16 : t == "f64" ? Float64 : Float32;
      if (t != "bf16" && t != "f16" && t != "f64" && t != "f32") {
        std::fprintf(stderr, "bench_attention: --dtype takes f32, bf16, f16 or f64; got %s\n", t.c_str());
        return 2;
      }
    } else if (a == "--causal") {
      st.causal = true;
    } else if (a == "--memory") {
      memory_of = flx_bench::option_value("bench_attention", argc, argv, &i);
    } else {
      if (a == "--device" && i + 1 < argc) device = argv[i + 1];
      if (a == "--small") small = true;
      rest.push_back(argv[i]);
    }
  }
  if (!memory_of.empty()) {
    try {
      return memory(memory_of, device, st, small);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_attention: %s\n", e.what());
      return 1;
    }
  }
  return flx_bench::run_interleaved("bench_attention", int(rest.size()), rest.data(), benches(st));
}

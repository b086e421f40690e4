// DataLoader epoch with an expensive mapobs transform, serial against
// .parallel = true (issue 29, item 4): build/bench/bench_data.
//
// The data is Fashion-MNIST-sized (28×28×1 Float32 images, 60000 by
// default, random pixels) with their ids; the transform is a random
// resized crop (scale 0.8 to 1.2, shift up to 4 pixels, bilinear), a flip
// with probability 1/2 and a brightness jitter, drawn per observation from
// (seed, id), so every loader yields the same batches. Rounds are
// interleaved (round r times serial then parallel, or the other way round
// on odd rounds); each line reports the median of the rounds.
//
//   bench_data [--n N] [--batchsize B] [--threads T] [--repeats R]
#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <vector>

using namespace flx;

namespace {

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(uint64_t& s) { return double((s = mix(s)) >> 11) * 0x1.0p-53; }

constexpr int64_t H = 28, W = 28;

// Random resized crop, flip and brightness of each image, from (seed, id).
std::tuple<Tensor, Tensor> augment(const std::tuple<Tensor, Tensor>& b, uint64_t seed) {
  const auto& [x, id] = b;
  const int64_t n = x.size(3);
  auto xv = x.to_vector<float>();
  auto ids = id.to_vector<int64_t>();
  std::vector<float> out(size_t(H * W * n));
  for (int64_t k = 0; k < n; ++k) {
    uint64_t s = mix(seed ^ mix(uint64_t(ids[size_t(k)])));
    const double scale = 0.8 + 0.4 * unit(s);
    const double dy = (unit(s) - 0.5) * 8, dx = (unit(s) - 0.5) * 8;
    const bool flip = unit(s) < 0.5;
    const float gain = float(0.9 + 0.2 * unit(s));
    const float* src = xv.data() + k * H * W;
    float* dst = out.data() + k * H * W;
    // Column-major: element (i, j) of an image at i + H j.
    for (int64_t j = 0; j < W; ++j)
      for (int64_t i = 0; i < H; ++i) {
        const double jj = flip ? double(W - 1 - j) : double(j);
        const double sy = (double(i) - H / 2.0) * scale + H / 2.0 + dy;
        const double sx = (jj - W / 2.0) * scale + W / 2.0 + dx;
        const double fy = std::floor(sy), fx = std::floor(sx);
        const double ay = sy - fy, ax = sx - fx;
        auto at = [&](int64_t r, int64_t c) -> double {
          return (r < 0 || r >= H || c < 0 || c >= W) ? 0.0 : double(src[r + H * c]);
        };
        const int64_t r0 = int64_t(fy), c0 = int64_t(fx);
        const double v = (1 - ay) * (1 - ax) * at(r0, c0) + ay * (1 - ax) * at(r0 + 1, c0) +
                         (1 - ay) * ax * at(r0, c0 + 1) + ay * ax * at(r0 + 1, c0 + 1);
        dst[i + H * j] = std::min(1.0f, float(v) * gain);
      }
  }
  return {tensor(out, {H, W, 1, n}), id};
}

double cpu_seconds() {  // this process, user + system
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 60000, batchsize = 64;
  int threads = 2, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_data: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--n") n = std::atoll(next());
    else if (a == "--batchsize") batchsize = std::atoll(next());
    else if (a == "--threads") threads = std::atoi(next());
    else if (a == "--repeats") repeats = std::atoi(next());
    else {
      std::fprintf(stderr, "usage: bench_data [--n N] [--batchsize B] [--threads T] [--repeats R]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  set_seed(1);
  Tensor x = rand(H, W, 1, n);
  std::vector<int64_t> idv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idv[size_t(i)] = i;
  Tensor ids = tensor(idv, {n});
  const uint64_t seed = 42;
  auto data = mapobs([seed](const std::tuple<Tensor, Tensor>& b) { return augment(b, seed); }, std::tuple{x, ids});
  DataLoader serial(data, {.batchsize = batchsize, .shuffle = true, .seed = 7});
  DataLoader parallel(data, {.batchsize = batchsize, .shuffle = true, .seed = 7, .parallel = true});

  // An epoch, each batch read (its observation count) so none is skipped.
  // Wall seconds; the process's CPU seconds go to *cpu.
  auto run = [](const auto& loader, double& check, std::vector<double>& cpu) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& b : loader) check += double(std::get<0>(b).size(3));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu.push_back(cpu_seconds() - c0);
    return wall;
  };
  double c1 = 0, c2 = 0;
  std::vector<double> ts, tp, cs, cp, warm;
  run(serial, c1, warm);  // warm-up (allocator, first-touch)
  run(parallel, c2, warm);
  for (int r = 0; r < repeats; ++r) {
    if (r % 2 == 0) {
      ts.push_back(run(serial, c1, cs));
      tp.push_back(run(parallel, c2, cp));
    } else {
      tp.push_back(run(parallel, c2, cp));
      ts.push_back(run(serial, c1, cs));
    }
  }
  if (c1 != c2) {
    std::fprintf(stderr, "bench_data: serial and parallel epochs saw different observation counts\n");
    return 1;
  }
  const double ms = median(ts) * 1e3, mp = median(tp) * 1e3;
  auto list = [](const std::vector<double>& v) {
    std::string out;
    char buf[32];
    for (double t : v) {
      std::snprintf(buf, sizeof buf, "%s%.1f", out.empty() ? "" : ", ", t * 1e3);
      out += buf;
    }
    return out;
  };
  std::printf("{\"name\": \"dataloader_epoch_serial\", \"n\": %lld, \"batchsize\": %lld, \"threads\": %d, "
              "\"repeats\": %d, \"ms_per_epoch\": %.1f, \"cpu_ms_per_epoch\": %.1f, \"rounds_ms\": [%s]}\n",
              (long long)n, (long long)batchsize, threads, repeats, ms, median(cs) * 1e3, list(ts).c_str());
  std::printf("{\"name\": \"dataloader_epoch_parallel\", \"n\": %lld, \"batchsize\": %lld, \"threads\": %d, "
              "\"repeats\": %d, \"ms_per_epoch\": %.1f, \"cpu_ms_per_epoch\": %.1f, \"rounds_ms\": [%s], "
              "\"ratio_to_serial\": %.3f}\n",
              (long long)n, (long long)batchsize, threads, repeats, mp, median(cp) * 1e3, list(tp).c_str(), mp / ms);
  return 0;
}

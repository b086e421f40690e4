// The CPU backend's thread pool: every index once, concurrent and nested
// callers, GEMM tiles that cover C once, GEMM tiles against a naive product,
// and fewer threads when other threads keep cores busy.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/cpu_gemm_tiles.hpp"
#include "cpu/cpu_load.hpp"
#include "cpu/cpu_pool.hpp"
#include "test_util.hpp"

using namespace flx;
namespace pool = flx::cpu_backend;

namespace {

// Restores the thread settings a test changes.
struct ThreadSettings {
  int saved = num_threads();
  explicit ThreadSettings(int n, bool adaptive) {
    set_num_threads(n);
    pool::set_pool_adaptive(adaptive);
  }
  ~ThreadSettings() {
    set_num_threads(saved);
    pool::set_pool_adaptive(true);
  }
};

// Each index of [0, n) hit exactly once.
void expect_each_index_once(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool::parallel_for(n, grain, [&](int64_t lo, int64_t hi) {
    EXPECT_LE(0, lo);
    EXPECT_LT(lo, hi);
    EXPECT_LE(hi, n);
    for (int64_t i = lo; i < hi; ++i) hits[size_t(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of " << n << ", grain " << grain;
}

}  // namespace

TEST(Threads, ParallelForCoversEveryIndexOnce) {
  ThreadSettings s(4, false);  // more threads than cores is allowed, and tests the claiming
  for (int64_t n : {0, 1, 7, 64, 1000, 100003})
    for (int64_t grain : {1, 3, 100, 1 << 14}) expect_each_index_once(n, grain);
}

TEST(Threads, ConcurrentAndNestedLoopsAreCorrect) {
  ThreadSettings s(3, false);
  // Several threads at once: one gets the pool, the others run inline.
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<int64_t> v(size_t(5000 + c * 7), 0);
        pool::parallel_for(int64_t(v.size()), 64, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) v[size_t(i)] = i * (c + 1);
        });
        for (size_t i = 0; i < v.size(); ++i)
          if (v[i] != int64_t(i) * (c + 1)) failures.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  // A loop inside a chunk runs inline on that thread.
  std::vector<std::atomic<int>> hits(100 * 100);
  pool::parallel_for(100, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      pool::parallel_for(100, 1, [&](int64_t l2, int64_t h2) {
        for (int64_t j = l2; j < h2; ++j) hits[size_t(i * 100 + j)].fetch_add(1);
      });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(Threads, SettingsAreCheckedAndReported) {
  ThreadSettings s(2, false);
  EXPECT_EQ(num_threads(), 2);
  EXPECT_EQ(num_threads_in_use(), 2);  // not adaptive: the maximum
  set_num_threads(1);
  EXPECT_EQ(num_threads_in_use(), 1);
  EXPECT_THROW(set_num_threads(0), ArgumentError);
  EXPECT_THROW(set_num_threads(-3), ArgumentError);
  EXPECT_EQ(num_threads(), 1);
}

// The GEMM's tiles (fixed by the shape, whatever the threads): none empty,
// every element of every product's C in exactly one, cut at multiples of
// the micro-kernel's 16 rows and 8 columns; a product big enough to share
// gets at least two, a small one is one tile.
TEST(Threads, GemmTilesCoverEveryElementOnce) {
  struct Case {
    int64_t m, n, k, batch;
  };
  for (Case c : {Case{256, 64, 784, 1}, Case{784, 256, 512, 1}, Case{256, 784, 64, 1}, Case{300, 30, 3000, 1},
                 Case{517, 3, 130, 1}, Case{3, 517, 130, 1}, Case{17, 9, 20000, 1}, Case{64, 80, 96, 5},
                 Case{1000, 1000, 1000, 2}, Case{4096, 4096, 4096, 1}, Case{10, 64, 256, 1}, Case{1, 1, 1, 3}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " batch " +
                 std::to_string(c.batch));
    const pool::GemmTiles tiles = pool::gemm_tiles(c.m, c.n, c.k, c.batch);
    std::vector<int> hits(size_t(c.m * c.n * c.batch), 0);
    for (int64_t i = 0; i < tiles.count(); ++i) {
      const auto t = tiles.tile(i);
      ASSERT_TRUE(0 <= t.product && t.product < c.batch);
      ASSERT_TRUE(0 <= t.m0 && t.m0 < t.m1 && t.m1 <= c.m) << "rows " << t.m0 << ".." << t.m1;
      ASSERT_TRUE(0 <= t.n0 && t.n0 < t.n1 && t.n1 <= c.n) << "columns " << t.n0 << ".." << t.n1;
      EXPECT_TRUE(t.m0 % 16 == 0 && (t.m1 % 16 == 0 || t.m1 == c.m)) << "rows " << t.m0 << ".." << t.m1;
      EXPECT_TRUE(t.n0 % 8 == 0 && (t.n1 % 8 == 0 || t.n1 == c.n)) << "columns " << t.n0 << ".." << t.n1;
      for (int64_t j = t.n0; j < t.n1; ++j)
        for (int64_t r = t.m0; r < t.m1; ++r) ++hits[size_t(r + c.m * j + c.m * c.n * t.product)];
    }
    for (size_t e = 0; e < hits.size(); ++e) ASSERT_EQ(hits[e], 1) << "element " << e;
    const double flops = 2.0 * double(c.m * c.n * c.k);
    if (flops >= 1e7 && c.batch == 1) EXPECT_GE(tiles.count(), 2) << "a big product is shared";
    if (flops < 1e6) EXPECT_EQ(tiles.count(), c.batch) << "a small product is one tile";
  }
}

// Products big enough to be cut into tiles (by columns, by rows, over the
// batch), with and without transposes, against a naive Float64 product.
TEST(Threads, GemmTilesMatchANaiveProduct) {
  ThreadSettings s(3, false);
  struct Case {
    int64_t m, k, n, batch;
  };
  for (Case c : {Case{130, 200, 517, 1}, Case{517, 130, 3, 1}, Case{300, 64, 300, 1}, Case{64, 96, 80, 5},
                 Case{100, 100, 100, 2}}) {
    Tensor A = rand(Float64, c.m, c.k, c.batch), B = rand(Float64, c.k, c.n, c.batch);
    auto av = A.to_vector<double>(), bv = B.to_vector<double>();
    std::vector<double> ref(size_t(c.m * c.n * c.batch), 0.0);
    for (int64_t t = 0; t < c.batch; ++t)
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t kk = 0; kk < c.k; ++kk) {
          double b = bv[size_t(kk + c.k * j + c.k * c.n * t)];
          for (int64_t i = 0; i < c.m; ++i)
            ref[size_t(i + c.m * j + c.m * c.n * t)] += av[size_t(i + c.m * kk + c.m * c.k * t)] * b;
        }
    std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " batch " +
                       std::to_string(c.batch);
    flx::testing::expect_values(matmul(A, B), ref, 1e-12, what);
    flx::testing::expect_values(matmul(A.to(Float32), B.to(Float32)), ref, 1e-4, what + " Float32");
    // The transposed products of the backward rules: for L = sum(AB .* W),
    // dA = W Bᵀ and dB = Aᵀ W.
    Tensor W = rand(Float64, c.m, c.n, c.batch);
    auto [dA, dB] = gradient([&](const Tensor& a, const Tensor& b) { return sum(matmul(a, b) * W); }, A, B);
    auto wv = W.to_vector<double>();
    std::vector<double> ra(av.size(), 0.0), rb(bv.size(), 0.0);
    for (int64_t t = 0; t < c.batch; ++t)
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t kk = 0; kk < c.k; ++kk)
          for (int64_t i = 0; i < c.m; ++i) {
            double w = wv[size_t(i + c.m * j + c.m * c.n * t)];
            ra[size_t(i + c.m * kk + c.m * c.k * t)] += w * bv[size_t(kk + c.k * j + c.k * c.n * t)];
            rb[size_t(kk + c.k * j + c.k * c.n * t)] += av[size_t(i + c.m * kk + c.m * c.k * t)] * w;
          }
    flx::testing::expect_values(dA, ra, 1e-12, what + " dA");
    flx::testing::expect_values(dB, rb, 1e-12, what + " dB");
  }
}

// With a thread of ours spinning on one core, the pool leaves that core to
// it (measured from /proc/stat, so any busy thread or process counts).
TEST(Threads, BusyCoresAreLeftToOtherThreads) {
  const int cores = pool::usable_cores();
  if (cores < 2) GTEST_SKIP() << "one usable core: there is no core to leave to others";
  ThreadSettings s(cores, true);
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  int least = cores;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (std::chrono::steady_clock::now() < until) {
    least = std::min(least, num_threads_in_use());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  spinner.join();
  if (!pool::pool_load_measured()) GTEST_SKIP() << "/proc/stat is not readable here: the pool cannot see other load";
  EXPECT_LE(least, cores - 1) << "a core kept busy by another thread was still used";
}

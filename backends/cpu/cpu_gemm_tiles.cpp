// The GEMM tile grid (see cpu_gemm_tiles.hpp): a function of the shape only.
#include "cpu_gemm_tiles.hpp"

#include <algorithm>
#include <cmath>

namespace flx::cpu_backend {
namespace {

// Cuts aligned to OpenBLAS's x86 micro-kernels (16 rows; 4 or 8 columns).
constexpr int64_t kRowAlign = 16, kColAlign = 8;
// Products below this many flops are one tile (~10 µs on one core).
constexpr double kSplitFlops = 2e6;
constexpr int64_t kMaxTilesPerProduct = 64;

// The cost model, in flops at one core's sgemm peak (~190 GFLOP/s with
// AVX-512; the costs below were measured as times on such a core): a tile
// of tm×tn over k costs 2·tm·tn·k flops, plus packing its tm×k panel of A
// and k×tn panel of B (OpenBLAS packs them again in every call: that is
// what more tiles cost), plus the call; T tiles on t threads take
// ceil(T/t) tiles' time, plus waking the pool when t > 1.
constexpr double kPackCost = 40;     // per element of A or B a call packs (~0.2 ns)
constexpr double kCallCost = 2e5;    // a call's fixed cost (~1 µs)
constexpr double kWakeCost = 1e6;    // waking the pool's helpers and joining them (~5 µs)
// The grid chosen is the fastest on 16 threads among those within
// kTolerance of the best grid on 1 thread and on 2 (where they all miss,
// the one closest to both). Every tile repacks its panels, so no fixed grid
// is best everywhere: 16 tiles cost 9-19% on one core for the batch-512
// products of a 784-256-256-10 MLP (measured with OpenBLAS's SkylakeX and
// Haswell kernels), 2 tiles leave 14 of 16 cores idle. 12% keeps a small
// machine, quiet or loaded, within about a tenth of its best, and gives
// those products 2 to 4 tiles and a 1024^3 product 16 (the model: 1.1x the
// best on 1 thread, the best on 16). A driver that packs each panel once
// for all tiles would remove the trade-off (bench/README.md, "Float32 GEMM
// drivers": on 2 cores the repacking cost about 1 %, less than oneDNN's
// faster kernels gained; many cores are not measured yet).
constexpr double kTolerance = 0.12;

int64_t cut(int64_t extent, int64_t parts, int64_t p, int64_t align) {
  if (p >= parts) return extent;
  return std::min(extent, (extent * p / parts + align - 1) / align * align);
}

// T tiles of the given cost on t threads.
double run_time(double tiles, double tile_cost, double threads) {
  const double t = std::min(threads, tiles);
  return std::ceil(tiles / t) * tile_cost + (t > 1 ? kWakeCost : 0.0);
}

struct Candidate {
  int64_t rows, cols;
  double on1, on2, on16;  // the model's time on 1, 2 and 16 threads
};

GemmTiles choose_tiles(int64_t m, int64_t n, int64_t k, int64_t batch) {
  GemmTiles g{m, n, batch, 1, 1};
  // Parts of at least one alignment unit each, so that no tile is empty.
  Candidate cand[64];
  int count = 0;
  for (int64_t rows = 1; rows <= std::max<int64_t>(1, m / kRowAlign) && rows <= kMaxTilesPerProduct; rows *= 2)
    for (int64_t cols = 1; cols <= std::max<int64_t>(1, n / kColAlign) && rows * cols <= kMaxTilesPerProduct;
         cols *= 2) {
      // The model's tile: the parts' typical size (the last may be smaller).
      const double tm = double(std::min(m, ((m + rows - 1) / rows + kRowAlign - 1) / kRowAlign * kRowAlign));
      const double tn = double(std::min(n, ((n + cols - 1) / cols + kColAlign - 1) / kColAlign * kColAlign));
      const double cost = 2 * tm * tn * double(k) + kPackCost * double(k) * (tm + tn) + kCallCost;
      const double tiles = double(batch * rows * cols);
      cand[count++] = {rows, cols, run_time(tiles, cost, 1), run_time(tiles, cost, 2), run_time(tiles, cost, 16)};
    }
  double best1 = cand[0].on1, best2 = cand[0].on2;
  for (int i = 1; i < count; ++i) {
    best1 = std::min(best1, cand[i].on1);
    best2 = std::min(best2, cand[i].on2);
  }
  const double limit = 1 + kTolerance;
  auto loss = [&](const Candidate& c) { return std::max(c.on1 / best1, c.on2 / best2); };
  const Candidate* pick = &cand[0];
  for (int i = 1; i < count; ++i) {
    const Candidate& c = cand[i];
    const bool ok = loss(c) <= limit, pick_ok = loss(*pick) <= limit;
    if (ok != pick_ok ? ok : ok ? c.on16 < pick->on16 : loss(c) < loss(*pick)) pick = &c;
  }
  g.rows = pick->rows;
  g.cols = pick->cols;
  return g;
}

}  // namespace

GemmTiles::Tile GemmTiles::tile(int64_t i) const {
  const int64_t per = rows * cols, r = i % per / cols, c = i % per % cols;
  return {i / per, cut(m, rows, r, kRowAlign), cut(m, rows, r + 1, kRowAlign), cut(n, cols, c, kColAlign),
          cut(n, cols, c + 1, kColAlign)};
}

GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (2.0 * double(m) * double(n) * double(k) < kSplitFlops) return {m, n, batch, 1, 1};
  // Choosing takes a microsecond or two, and a model multiplies the same
  // few shapes again and again: the last choices are kept, per thread.
  struct Choice {
    int64_t m = -1, n = 0, k = 0, batch = 0, rows = 1, cols = 1;
  };
  constexpr unsigned kKept = 16;
  thread_local Choice kept[kKept];
  thread_local unsigned next = 0;
  for (const Choice& c : kept)
    if (c.m == m && c.n == n && c.k == k && c.batch == batch) return {m, n, batch, c.rows, c.cols};
  const GemmTiles g = choose_tiles(m, n, k, batch);
  kept[next++ % kKept] = {m, n, k, batch, g.rows, g.cols};
  return g;
}

}  // namespace flx::cpu_backend

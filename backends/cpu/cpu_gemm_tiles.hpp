// How the CPU backend cuts a batched GEMM into tiles for its pool.
//
// The same inputs must give the same bits whatever the thread count and
// however busy the machine (issue 16). OpenBLAS's result for an element of
// C depends on the call that computes it: a call over fewer rows or columns
// can take another kernel path (SkylakeX's small-matrix kernels, edge
// kernels), so cutting C by the threads free at the moment changed the
// bits. Here the tiles are a function of the product's shape alone, each
// tile is one single-threaded call over the whole inner dimension (oneDNN's
// matmul or OpenBLAS: cpu_gemm.cpp), and the pool only decides which
// thread runs which tile.
//
// The grid comes from a cost model (cpu_gemm_tiles.cpp): more tiles let
// more threads work but cost packing (each OpenBLAS call packs its own
// panels of A and B again), fewer tiles waste threads on a big machine.
#pragma once

#include <cstdint>

namespace flx::cpu_backend {

struct GemmTiles {
  int64_t m = 0, n = 0, batch = 1;
  int64_t rows = 1, cols = 1;  // tiles per product along m and along n

  struct Tile {
    int64_t product, m0, m1, n0, n1;  // C[m0:m1, n0:n1] of one product of the batch
  };
  int64_t count() const { return batch * rows * cols; }
  // Tile i of count(), never empty; tiles cover every product's C exactly once.
  Tile tile(int64_t i) const;
};

// The tiles of `batch` products of m×k by k×n.
GemmTiles gemm_tiles(int64_t m, int64_t n, int64_t k, int64_t batch);

}  // namespace flx::cpu_backend

// Parallel GEMM on the cpu backend's one thread pool: C (each batch's m x n) is cut into tiles
// that TBB spreads over its workers, and each tile is one single-threaded library call
// (matmul.cpp). Neither OpenBLAS's threads nor oneDNN's OpenMP team run: one pool means no
// fight over the cores, a tile not yet started by a busy or preempted worker is run by another
// thread (OpenMP's static split waits for it at a spinning barrier), and matmuls respect TBB
// arena and global_control limits.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::cpu {

struct TileGrid {
  int64_t rows = 0, cols = 0;  // of one tile of C; edge tiles are smaller
};

// Tiles for `batches` products of m x k @ k x n on `threads` threads: whole matrices when the
// work is small (below ~4 MFLOP a tile would cost more to schedule than it saves), else halves
// of the tile side whose split re-reads less (a tile reads rows x k of A and k x cols of B)
// until there are about kTilesPerThread tiles per thread or tiles reach 16 rows / 64 columns.
TileGrid plan_tiles(int64_t batches, int64_t m, int64_t n, int64_t k, int threads);

// One tile per thread: oneDNN's kernels run faster per core on wide tiles (one core, 256x1024x
// 4096: 256x1024 tiles 200 GFLOP/s, 256x256 tiles 186) than finer load balancing wins back
// (the MLP in bench_matmul: 22.3 CPU-ms per call with 1 tile per thread, 23.5 with 2).
constexpr int kTilesPerThread = 1;

// Calls f(batch, row0, col0, rows, cols) once per tile of every batch: inline when there is
// one, else in parallel on the calling TBB arena.
using TileFn = std::function<void(int64_t, int64_t, int64_t, int64_t, int64_t)>;
void for_each_tile(int64_t batches, int64_t m, int64_t n, TileGrid grid, const TileFn& f);

// Threads Kiln may use from the calling thread: the TBB arena's concurrency, capped by a
// global_control limit (as the element-wise kernels are).
int threads_allowed();

}  // namespace kiln::cpu

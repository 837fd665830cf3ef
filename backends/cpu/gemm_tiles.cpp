#include "backends/cpu/gemm_tiles.h"

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>

namespace kiln::cpu {

namespace {

constexpr double kMinParallelFlops = double(1 << 22);  // ~20 us on one core
constexpr double kMinTileFlops = double(1 << 20);
constexpr int64_t kMinRows = 16, kMinCols = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Half of `side`, rounded up to a multiple of `align` (vector-friendly tile edges).
int64_t half(int64_t side, int64_t align) { return ceil_div(ceil_div(side, 2), align) * align; }

}  // namespace

int threads_allowed() {
  int n = tbb::this_task_arena::max_concurrency();
  auto cap = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return std::max(1, static_cast<int>(std::min<size_t>(n, cap)));
}

TileGrid plan_tiles(int64_t batches, int64_t m, int64_t n, int64_t k, int threads) {
  TileGrid g{m, n};
  double flops = 2.0 * m * n * k;
  if (threads <= 1 || flops * batches < kMinParallelFlops) return g;
  int64_t want = int64_t{kTilesPerThread} * threads;
  auto tiles = [&] { return batches * ceil_div(m, g.rows) * ceil_div(n, g.cols); };
  while (tiles() < want) {
    if (2.0 * g.rows * g.cols * k / 2 < kMinTileFlops) break;
    bool can_rows = g.rows >= 2 * kMinRows, can_cols = g.cols >= 2 * kMinCols;
    // Splitting columns re-reads the A block (rows x k), splitting rows the B block (k x cols).
    if (can_cols && (g.rows <= g.cols || !can_rows))
      g.cols = half(g.cols, 16);
    else if (can_rows)
      g.rows = half(g.rows, 8);
    else
      break;
  }
  return g;
}

void for_each_tile(int64_t batches, int64_t m, int64_t n, TileGrid grid, const TileFn& f) {
  int64_t gm = ceil_div(m, grid.rows), gn = ceil_div(n, grid.cols);
  int64_t count = batches * gm * gn;
  auto run = [&](int64_t t) {
    int64_t b = t / (gm * gn), i = t / gn % gm, j = t % gn;
    int64_t r0 = i * grid.rows, c0 = j * grid.cols;
    f(b, r0, c0, std::min(grid.rows, m - r0), std::min(grid.cols, n - c0));
  };
  if (count == 1) return run(0);
  tbb::parallel_for(int64_t{0}, count, [&](int64_t t) { run(t); });
}

}  // namespace kiln::cpu

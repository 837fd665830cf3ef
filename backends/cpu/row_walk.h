// Where the cpu backend walks a row kernel (kernel_ir.h, invariant 6) row by row, every pass
// while the row is in cache, and where it runs the passes one after another instead. The walk
// reads a row from memory once and from cache in its later passes; once a row's data outgrows
// the cache the walk saves nothing, and the passes (each reduction split across threads when
// long, split_reduce.h) are the better path. The line is this host's L2 cache per core, read at
// run time (docs/performance.md has the sweep that put it there).
#pragma once

#include <cstdint>

#include "backends/kernel_ir.h"

namespace kiln::cpu {

// Bytes of the data a row kernel's passes touch per row: every buffer that moves along the row
// axes, once.
int64_t row_bytes(const Kernel& k);

// This host's L2 cache per core in bytes (sysconf, else sysfs, else 256 KiB).
int64_t l2_cache_bytes();

// The most row bytes the walk takes: l2_cache_bytes(), or KILN_ROW_WALK_BYTES when set (read
// at each compile; bench_rows sets it to time both paths in one process).
int64_t row_walk_limit();

// Whether the cpu backend walks `k` row by row: a row kernel with constant dims whose row
// data is at most row_walk_limit().
bool row_walk_fits(const Kernel& k);

}  // namespace kiln::cpu

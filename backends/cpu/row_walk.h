// Where the cpu backend walks a row kernel (kernel_ir.h, invariant 6) row by row, every pass
// while the row is in cache, and where it runs the passes one after another instead. The walk
// reads a row from memory once and from cache in its later passes; past the cache it moves the
// same bytes as the passes and still computes less (a costly value carried to the map pass,
// the full vector width in its sums). bench_rows' sweep found no row length where the passes
// win on the development host (rows of 8 KB to 64 MB, down to a single row: walk/passes
// 0.4-0.84, docs/performance.md), so the walk takes every row kernel with constant dims unless
// KILN_ROW_WALK_BYTES sets a line (what the sweep and the tests use to time and check both).
#pragma once

#include <cstdint>

#include "backends/kernel_ir.h"

namespace kiln::cpu {

// Bytes of the data a row kernel's passes touch per row: every buffer that moves along the row
// axes, once.
int64_t row_bytes(const Kernel& k);

// The most row bytes the walk takes: KILN_ROW_WALK_BYTES when set (read at each compile), else
// no limit (-1).
int64_t row_walk_limit();

// Whether the cpu backend walks `k` row by row: a row kernel with constant dims whose row
// bytes are within row_walk_limit().
bool row_walk_fits(const Kernel& k);

}  // namespace kiln::cpu

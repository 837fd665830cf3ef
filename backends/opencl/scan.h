// Scans (Op::Scan: cumsum, cumprod, cummax, cummin, logcumsumexp; inclusive or exclusive,
// forward or reversed) as OpenCL kernels of their own, O(n) per row, every row of
// (outer, n, inner) in one launch per pass. On a GPU a work-group scans a tile of a row in
// local memory (each work-item a run of elements, the runs' totals scanned across the group);
// on a CPU device a work-item scans a chunk of a row sequentially (no barriers, which PoCL runs
// as loops over the work-items). Rows longer than a tile or chunk take three passes: the
// totals, their exclusive scan by the same kernels one level up, the tiles again from their
// carries. One program per dtype and form, a kernel per op. Accumulators: int32 for
// bool/int8/uint8 (bool sums are "or", products "and"; integers wrap at the store as they would
// step by step), float32 for float16/bfloat16 (rounded once, at the store), the dtype itself
// otherwise. Integer scans and max/min are exact; float sums, products and logcumsumexp are
// reassociated, so they differ from the sequential reference by rounding.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/memory.h"

namespace kiln::opencl {

// Enqueues the scan `a` (its buffers on `dev`) on `q`; returns the event of its last kernel, or
// null when there is nothing to do. `keep` receives the temporaries that must live until it
// completes. Raises kiln::Error on buffers of another device, on float64 without cl_khr_fp64 and
// on logcumsumexp of a non-float dtype.
cl_event enqueue_scan(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                      std::vector<std::shared_ptr<void>>& keep);

}  // namespace kiln::opencl

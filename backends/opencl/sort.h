// Sort and argsort (Op::Sort, Op::Argsort) as OpenCL kernels of their own: a bitonic sort of
// (key, index) pairs per row, O(n log^2 n), every row of the (outer, n, inner) input in the same
// launches (backends/sort_passes.h). The key is the element's bits mapped to an unsigned integer
// whose order is the reference's (NaN last in both directions, -0 before +0 for sort, ties for
// argsort), so any dtype sorts without float arithmetic (float64 too, without cl_khr_fp64); the
// index breaks ties, which makes the sort stable. A last kernel writes the values or int64
// indices in place of the row's positions.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/memory.h"

namespace kiln::opencl {

// Enqueues the sort or argsort `a` (its buffers on `dev`) on the in-order queue `q`; returns the
// event of its last kernel, or null when there is nothing to do. `keep` receives the temporaries
// (from `pool`), which must live until that event completes.
cl_event enqueue_sort(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                      std::vector<std::shared_ptr<void>>& keep);

}  // namespace kiln::opencl

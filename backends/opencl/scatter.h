// scatter_add (Op::ScatterAdd: scatter_add, scatter_add_along_axis, at[].add) as OpenCL kernels
// of its own, O(n + m) where the Kernel IR lowering (native_kernels.h) is O(n m): the base is
// copied to the output, then one work-item per update (a contiguous run of them on a CPU device)
// adds it into its slot with an atomic. 32- and 64-bit integers use atomic_add / atom_add, floats
// a compare-and-swap loop on their bits; 8- and 16-bit types and bool accumulate in a 32-bit
// temporary (int, float for float16/bfloat16, or for bool) that is widened from the base first
// and rounded into the output once at the end, as the reference does. Integer sums are exact
// (wrapping); float sums run in whatever order the atomics land, so they differ from the
// reference's by reassociation only.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/device.h"
#include "backends/opencl/memory.h"

namespace kiln::opencl {

// Whether `dev` has what the kernel for dtype `d` needs: 64-bit types need
// cl_khr_int64_base_atomics, float64 also cl_khr_fp64. Where not, the backend runs the Kernel IR
// lowering (correct everywhere, O(n m)).
bool has_scatter_add_kernel(const ClDevice& dev, Dtype d);

// Enqueues the scatter_add `a` (its buffers on `dev`) on `q`; returns the event of its last
// command, or null when there is nothing to do (no output elements). Temporaries come from
// `pool` and are appended to `keep`, which must live until the event completes. Raises
// kiln::Error on buffers of another device or that do not hold what `a` describes, and on a
// dtype has_scatter_add_kernel rejects.
cl_event enqueue_scatter_add(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                             std::vector<std::shared_ptr<void>>& keep);

}  // namespace kiln::opencl

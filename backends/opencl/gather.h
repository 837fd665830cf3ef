// Gather (Op::Gather: take, take_along_axis, fancy indexing) as an OpenCL kernel of its own:
// each output element of (outer, m, inner) reads its index, applies the index rule (NativeArgs)
// and copies one element, so the work is O(outer * m * inner) however long the indexed axis is.
// A gather moves bits and computes nothing, so one program per element size (1, 2, 4, 8 bytes)
// serves every dtype, float64 included on devices without cl_khr_fp64. On a GPU one work-item
// per element; on a CPU device a contiguous run per work-item, as element-wise kernels do.
#pragma once

#include "backends/backend.h"
#include "backends/opencl/device.h"

namespace kiln::opencl {

// Enqueues the gather `a` (its buffers on `dev`) on `q`; returns its event, or null when there
// is nothing to do (no output elements). Raises kiln::Error on buffers of another device or
// that do not hold what `a` describes.
cl_event enqueue_gather(ClDevice& dev, cl_command_queue q, const NativeArgs& a);

}  // namespace kiln::opencl

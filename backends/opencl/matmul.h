// matmul on OpenCL: C[b] = A[b] @ B[b] for every batch, row-major, with the reference's
// semantics (float products summed in double where the device has fp64, 16-bit floats widened
// to float32 and rounded at the store, integers wrapping). A plain kernel, one work-item per
// output element: correct on every device, not fast (CLBlast is the planned fast path).
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/memory.h"

namespace kiln::opencl {

// Enqueues the matmul on `q`; returns its event (null when there is nothing to do). `keep`
// receives what must live until it completes.
cl_event enqueue_matmul(ClDevice& dev, ClPool& pool, cl_command_queue q, const MatmulArgs& a,
                        std::vector<std::shared_ptr<void>>& keep);

}  // namespace kiln::opencl

// The GLSL of Kiln's Vulkan matmul: C[i] = A[i] @ B[i] for a batch of row-major operands. On a GPU
// it is tiled 16 x 16 through shared memory (each workgroup stages a tile of A and of B per step
// along k). On a CPU device (lavapipe) workgroup barriers are expensive (each invocation is a
// coroutine), so there each invocation walks k for one output, neighbouring lanes reading
// neighbouring columns of B.
// Operand offsets and sizes come from the params buffer: [m, n, k, batches, a_off..., b_off...,
// c_off...]; the push constant is the first batch of the dispatch (batches beyond the
// device's grid limit take several dispatches).
#pragma once

#include <string>

#include "graph/dtype.h"

namespace kiln::vulkan {

struct MatmulShader {
  std::string glsl;
  int cols_per_group = 16, rows_per_group = 16;  // the grid is ceil(n/cols) x ceil(m/rows)
};

// float32 or float64; `int64` addressing where the device has it; `tiled` for GPUs. Raises
// kiln::Error for other dtypes.
MatmulShader matmul_glsl(Dtype d, bool int64, bool tiled);

}  // namespace kiln::vulkan

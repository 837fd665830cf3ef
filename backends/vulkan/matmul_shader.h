// The GLSL of Kiln's Vulkan matmul: C[i] = A[i] @ B[i] for a batch of row-major operands, tiled
// 16 x 16 through shared memory (each workgroup stages a tile of A and of B per step along k).
// Operand offsets and sizes come from the params buffer: [m, n, k, batches, a_off..., b_off...,
// c_off...]; the push constant is the first batch of the dispatch (batches beyond the
// device's grid limit take several dispatches).
#pragma once

#include <string>

#include "graph/dtype.h"

namespace kiln::vulkan {

constexpr int kMatmulTile = 16;

// float32, or float64 with `int64` addressing; raises kiln::Error for other dtypes.
std::string matmul_glsl(Dtype d, bool int64);

}  // namespace kiln::vulkan

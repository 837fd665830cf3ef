// Domain flattening before GLSL generation: adjacent axes that every index map walks as one
// contiguous run merge into one, so an element-wise kernel over a contiguous tensor needs no
// per-point division to recover coordinates (integer division is slow on GPUs and is scalarised
// on lavapipe: a 3-D contiguous x + 1 ran ~70x slower than the flat one). Row-major point order
// is unchanged, so launches and checks of the original kernel stay valid. Only constant dims
// merge; kept axes never merge with reduced ones.
#pragma once

#include "backends/kernel_ir.h"

namespace kiln::vulkan {

Kernel flatten_domain(const Kernel& k);

}  // namespace kiln::vulkan

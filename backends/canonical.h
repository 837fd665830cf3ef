// Shape simplification before code generation: adjacent domain axes that every index map walks
// as one contiguous run (stride[i] == stride[i+1] * extent[i+1]) are merged, so an element-wise
// kernel over a contiguous [32, 1000, 4096] tensor becomes one flat loop the vectoriser likes.
// The row-major order of domain points is unchanged, so launch ranges over the flattened kept
// domain mean the same thing before and after. Only constant dims are merged. Used by the cpu
// and opencl code generators.
#pragma once

#include "backends/kernel_ir.h"

namespace kiln {

Kernel merge_axes(const Kernel& k);

}  // namespace kiln

// Kernel IR for a single primitive over contiguous inputs: what eager evaluation runs (one kernel
// per primitive). Views (reshape, transpose, broadcast, slice) are index maps over their input;
// reductions move the reduced axes innermost. Fusion builds on the same helpers.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "backends/kernel_ir.h"
#include "graph/array.h"

namespace kiln {

// Map reading a contiguous array of shape `in` at the points of a domain of shape `out`, with
// NumPy broadcasting (stride 0 where `in` has extent 1 or lacks the axis).
IndexMap broadcast_map(const Shape& in, const Shape& out);
IndexMap contiguous_map(const Shape& s);

// The kernels computing `node` from its inputs (buffer i reads inputs[i], the last buffer is the
// output); concatenate gives one kernel per input, every other primitive exactly one.
// Not for Constant, Placeholder or Matmul.
std::vector<Kernel> kernels_for(const ArrayNode& node);

// Batch offsets of a matmul node (NumPy batch broadcasting resolved).
void matmul_offsets(const ArrayNode& node, MatmulArgs& args);

}  // namespace kiln

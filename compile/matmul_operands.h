// What a matmul step reads: an operand that is a transpose of its last two axes is read in place
// from the transpose's input, with MatmulArgs::trans_a / trans_b set, so the transpose is never
// stored (x @ w.T and reverse mode's dy @ w, dy.T @ x read w, x and dy as they are). A reshape
// keeps the row-major order, so a reshaped operand is read from its input's buffer as it is
// (h.reshape(b * s, d) @ w copies nothing). Fusion, step ordering and the lowering all ask
// here, so they agree on which node a matmul reads.
#pragma once

#include <cstddef>

#include "compile/fusion_plan.h"
#include "graph/array_node.h"

namespace kiln {

// Whether `x` is a transpose of its input's last two axes only (batch axes kept).
bool swaps_last_two(const ArrayNode& x);

struct MatmulOperand {
  const ArrayNode* node = nullptr;  // the node whose buffer the matmul reads
  bool transposed = false;          // the buffer holds the operand's transpose
};

// Operand `i` (0: A, 1: B) of matmul `n`: the transpose's input when operand i swaps its last
// two axes, the reshape's input when it is a reshape, if computed (a plan input, such as an
// evaluated transpose, is read as stored).
MatmulOperand matmul_operand(const ArrayNode& n, size_t i, const LeafFn& is_leaf);

}  // namespace kiln

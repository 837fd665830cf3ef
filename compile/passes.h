// Graph passes run on a traced graph before fusion: common-subexpression elimination, constant
// folding, dead-code elimination and the algebraic simplifications each primitive's rules give
// (PrimitiveRules::simplify in compile/rules.h: x*1, x+0, x-0, x/1, -(-x), round-trip casts
// through a wider type, transpose pairs, matmul of transposed operands, nested or no-op reshapes
// and broadcasts, whole slices), and merge reshapes sunk below element-wise nodes. Passes build
// a new graph; the traced one is left as it was.
#pragma once

#include <vector>

#include "graph/array.h"

namespace kiln {

struct PassStats {
  int cse = 0, folded = 0, simplified = 0;
};

// Returns the simplified `outputs`; `inputs` are the graph's placeholders (never folded).
// Only nodes reachable from the outputs survive (dead code is dropped).
// With `shapeless`, rules that hold only for the traced shapes (dropping a no-op reshape or
// broadcast, x*1 where the 1 could broadcast) are skipped: the graph must serve every shape.
std::vector<Array> simplify(const std::vector<Array>& outputs, const std::vector<Array>& inputs,
                            PassStats* stats = nullptr, bool shapeless = false);

// Moves each reshape that merges axes below the element-wise nodes it reads that nothing else
// reads, down to the arrays under them (compile/sink_reshapes.cpp): reshape(x * 2) becomes
// reshape(x) * 2, which a kernel computes reading x in place instead of storing x * 2 first.
// Not for shapeless graphs: an input that broadcasts at another shape would not reshape.
std::vector<Array> sink_reshapes(const std::vector<Array>& outputs,
                                 const std::vector<Array>& inputs);

}  // namespace kiln

#include "compile/matmul_operands.h"

namespace kiln {

bool swaps_last_two(const ArrayNode& x) {
  if (x.op != Op::Transpose) return false;
  const std::vector<int>& p = x.params.axes;
  int r = static_cast<int>(p.size());
  for (int i = 0; i < r - 2; ++i)
    if (p[i] != i) return false;
  return r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

MatmulOperand matmul_operand(const ArrayNode& n, size_t i, const LeafFn& is_leaf) {
  const ArrayNode* x = n.inputs.at(i).node().get();
  if (n.op != Op::Matmul || is_leaf(*x)) return {x, false};
  if (x->op == Op::Reshape) return {x->inputs[0].node().get(), false};
  if (!swaps_last_two(*x)) return {x, false};
  return {x->inputs[0].node().get(), true};
}

}  // namespace kiln

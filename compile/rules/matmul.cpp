// Compile rules of matmul. The primitive's operands are at least 2-D (ops.cpp promotes 1-D
// operands and squeezes the result), with NumPy batch broadcasting. No simplification: a
// transposed operand costs nothing (the matmul reads it in place, matmul_operands.h), so
// rewriting a @ b as (b^T @ a^T)^T would only add a transposed result.
#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

Shape matmul_shape(const ArrayNode&, const std::vector<Array>& in) {
  const Shape &a = in[0].shape(), &b = in[1].shape();
  if (a.back() != b[b.size() - 2])
    throw_error("matmul: shapes ", a, " and ", b, " are not aligned");
  Shape out =
      broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), "matmul");
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return out;
}

}  // namespace

const PrimitiveRules kMatmulRules{.shape = matmul_shape, .input_view = rule::no_view};

}  // namespace kiln

// Rules of matmul. The primitive's operands are at least 2-D (ops.cpp promotes 1-D operands
// and squeezes the result), with NumPy batch broadcasting; cotangents sum over the batch axes an
// operand was broadcast along.
#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

using rule::differentiable;

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

std::vector<MaybeArray> matmul_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt, std::nullopt};
  const Array &a = n.inputs[0], &b = n.inputs[1];
  return {rule::unbroadcast(matmul(ct, swapaxes(b, -1, -2)), a.shape()),
          rule::unbroadcast(matmul(swapaxes(a, -1, -2), ct), b.shape())};
}

MaybeArray matmul_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!differentiable(n.dtype) || (!t[0] && !t[1])) return std::nullopt;
  MaybeArray r;
  if (t[0]) r = matmul(*t[0], n.inputs[1]);
  if (t[1]) r = r ? *r + matmul(n.inputs[0], *t[1]) : matmul(n.inputs[0], *t[1]);
  return r;
}

Batched matmul_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t) {
  int rank = static_cast<int>(n.shape.size());
  std::vector<Array> x{rule::align_mapped(in[0], rank), rule::align_mapped(in[1], rank)};
  return {rule::remake(n, matmul_shape(n, x), x, n.params), true};
}

}  // namespace

const PrimitiveRules kMatmulRules{matmul_shape, false,      false,      rule::no_view,
                                  nullptr,      matmul_vjp, matmul_jvp, matmul_vmap};

}  // namespace kiln

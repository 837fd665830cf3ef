// Transform rules of matmul: cotangents sum over the batch axes an operand was broadcast along.
#include "compile/matmul_operands.h"
#include "compile/rules.h"
#include "graph/ops.h"
#include "graph/trace_state.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

using rule::differentiable;

// For an operand that is w^T, the cotangent is made as (the product for w)^T: the transpose's
// own rule then transposes it back, and inside a trace the compile pass cancels the pair, so
// w's gradient is one matmul in w's layout instead of a matmul and a transposed copy of a
// weight-sized result (x @ w.T with w of shape (out, in), MLX's Linear, computed
// (x^T g)^T). Outside a trace the pair would be two copies: there the plain product is made.
std::vector<MaybeArray> matmul_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt, std::nullopt};
  const Array &a = n.inputs[0], &b = n.inputs[1];
  bool traced = is_tracing();
  Array da = traced && swaps_last_two(*a.node()) ? swapaxes(matmul(b, swapaxes(ct, -1, -2)), -1, -2)
                                                 : matmul(ct, swapaxes(b, -1, -2));
  Array db = traced && swaps_last_two(*b.node()) ? swapaxes(matmul(swapaxes(ct, -1, -2), a), -1, -2)
                                                 : matmul(swapaxes(a, -1, -2), ct);
  return {rule::unbroadcast(da, a.shape()), rule::unbroadcast(db, b.shape())};
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
  return {rule::remake(n, rules(Op::Matmul).shape(n, x), x, n.params), true};
}

}  // namespace

const TransformRules kMatmulTransforms{.vjp = matmul_vjp, .jvp = matmul_jvp, .vmap = matmul_vmap};

}  // namespace kiln

// Transform rules of the reductions (sum, max, min, prod, argmax) and of Count, the element
// count mean divides by. Max and min send the cotangent to every element equal to the result,
// split evenly between ties (as JAX does); prod's derivative stays exact when elements are zero.
#include "compile/rules.h"
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

using rule::differentiable;

// `v` (of the node's shape) with the reduced axes back as unit axes.
Array keep_axes(const ArrayNode& n, const Array& v) {
  return n.params.keepdims ? v : expand_dims(v, n.params.axes);
}

// d out / d x for each element of x (broadcastable to x's shape); nullopt for sum, where it is 1.
MaybeArray reduce_factor(const ArrayNode& n, const Array& out) {
  const Array& x = n.inputs[0];
  const std::vector<int>& axes = n.params.axes;
  Dtype d = n.dtype;
  switch (n.params.reduce) {
    case ReduceOp::Sum: return std::nullopt;
    case ReduceOp::Max:
    case ReduceOp::Min: {
      Array hit = astype(x == keep_axes(n, out), d);
      return hit / sum(hit, axes, true);
    }
    case ReduceOp::Prod: {
      Array is_zero = x == 0;
      Array zeros_seen = sum(astype(is_zero, int32), axes, true);
      Array others = prod(where(is_zero, ones({}, d), x), axes, true);  // product of non-zeros
      Array zero = zeros({}, d);
      return where(is_zero, where(zeros_seen == 1, others, zero),
                   where(zeros_seen == 0, others / x, zero));
    }
    case ReduceOp::Argmax: break;
  }
  return std::nullopt;
}

std::vector<MaybeArray> reduce_vjp(const ArrayNode& n, const Array& out, const Array& ct) {
  if (!differentiable(n.dtype) || n.params.reduce == ReduceOp::Argmax) return {std::nullopt};
  const Shape& xs = n.inputs[0].shape();
  Array g = broadcast_to(keep_axes(n, ct), xs);
  MaybeArray f = reduce_factor(n, out);
  return {f ? g * *f : g};
}

MaybeArray reduce_jvp(const ArrayNode& n, const Array& out, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype) || n.params.reduce == ReduceOp::Argmax) return std::nullopt;
  MaybeArray f = reduce_factor(n, out);
  return sum(f ? *t[0] * *f : *t[0], n.params.axes, n.params.keepdims);
}

std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> r;
  for (int a : axes) r.push_back(a + 1);
  return r;
}

Batched reduce_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.axes = shifted(p.axes);
  return {rule::remake(n, rule::prepend(size, n.shape), {in[0].value}, p), true};
}

std::vector<MaybeArray> no_vjp(const ArrayNode& n, const Array&, const Array&) {
  return std::vector<MaybeArray>(n.inputs.size());
}

MaybeArray no_jvp(const ArrayNode&, const Array&, const std::vector<MaybeArray>&) {
  return std::nullopt;
}

Batched count_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t) {
  Params p = n.params;
  p.axes = shifted(p.axes);
  return {rule::remake(n, {}, {in[0].value}, p), false};  // the count is the same for each
}

}  // namespace

const TransformRules kReduceTransforms{.vjp = reduce_vjp, .jvp = reduce_jvp, .vmap = reduce_vmap};
// A count depends on its input's shape only.
const TransformRules kCountTransforms{.vjp = no_vjp, .jvp = no_jvp, .vmap = count_vmap};

}  // namespace kiln

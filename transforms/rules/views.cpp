// Transform rules of the primitives that move elements without computing: reshape, transpose,
// broadcast_to, slice and concatenate. A slice's cotangent is the cotangent spread back over
// the input's shape with zeros between and around the selected elements.
#include "compile/rules.h"
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

using rule::differentiable;
using rule::prepend;
using rule::remake;

MaybeArray no_derivative_or(const ArrayNode& n, const MaybeArray& v) {
  return differentiable(n.dtype) ? v : std::nullopt;
}

std::vector<MaybeArray> reshape_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  return {no_derivative_or(n, reshape(ct, n.inputs[0].shape()))};
}

MaybeArray reshape_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0]) return std::nullopt;
  return no_derivative_or(n, reshape(*t[0], n.shape));
}

Batched reshape_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p;
  p.reshape = ReshapeKind::Explicit;
  p.shape = prepend(size, n.shape);
  return {remake(n, p.shape, {in[0].value}, p), true};
}

std::vector<MaybeArray> transpose_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  std::vector<int> inverse(n.params.axes.size());
  for (size_t i = 0; i < inverse.size(); ++i) inverse[n.params.axes[i]] = static_cast<int>(i);
  return {no_derivative_or(n, transpose(ct, inverse))};
}

MaybeArray transpose_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0]) return std::nullopt;
  return no_derivative_or(n, transpose(*t[0], n.params.axes));
}

Batched transpose_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.axes = {0};
  for (int a : n.params.axes) p.axes.push_back(a + 1);
  return {remake(n, prepend(size, n.shape), {in[0].value}, p), true};
}

std::vector<MaybeArray> broadcast_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (n.params.stop_gradient) return {std::nullopt};
  return {no_derivative_or(n, rule::unbroadcast(ct, n.inputs[0].shape()))};
}

MaybeArray broadcast_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0] || n.params.stop_gradient) return std::nullopt;
  return no_derivative_or(n, broadcast_to(*t[0], n.shape));
}

Batched broadcast_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.shape = prepend(size, n.shape);
  Array x = rule::align_mapped(in[0], static_cast<int>(n.shape.size()));
  return {remake(n, p.shape, {x}, p), true};
}

// `a` sliced along `axis` only.
Array slice_axis(const Array& a, int axis, int64_t start, int64_t stop, int64_t step) {
  std::vector<int64_t> b(a.ndim(), 0), e(a.shape().begin(), a.shape().end()), s(a.ndim(), 1);
  b[axis] = start, e[axis] = stop, s[axis] = step;
  return slice(a, b, e, s);
}

Array zeros_along(const Array& like, int axis, int64_t extent) {
  Shape s = like.shape();
  s[axis] = extent;
  return zeros(s, like.dtype());
}

// The cotangent `g` of a slice put back in place along `axis` of an extent-`d` input: reversed
// for a negative step, spread by the step with zeros, then padded with zeros on both sides.
Array unslice_axis(Array g, int axis, int64_t d, int64_t start, int64_t step) {
  int64_t len = g.shape()[axis];
  int64_t first = start, s = step;
  if (step < 0) {
    g = slice_axis(g, axis, len - 1, -len - 1, -1);
    first = start + (len - 1) * step, s = -step;
  }
  if (s > 1) {
    Array spread = concatenate(
        {expand_dims(g, axis + 1), zeros_along(expand_dims(g, axis + 1), axis + 1, s - 1)},
        axis + 1);
    Shape flat = g.shape();
    flat[axis] = len * s;
    g = slice_axis(reshape(spread, flat), axis, 0, (len - 1) * s + 1, 1);
  }
  int64_t covered = (len - 1) * s + 1, after = d - first - covered;
  std::vector<Array> parts;
  if (first > 0) parts.push_back(zeros_along(g, axis, first));
  parts.push_back(g);
  if (after > 0) parts.push_back(zeros_along(g, axis, after));
  return parts.size() == 1 ? g : concatenate(parts, axis);
}

std::vector<MaybeArray> slice_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt};
  const Shape& xs = n.inputs[0].shape();
  if (shape_size(n.shape) == 0) return {zeros(xs, ct.dtype())};
  Array g = ct;
  for (int i = 0; i < static_cast<int>(xs.size()); ++i) {
    const Params& p = n.params;
    if (p.start[i] == 0 && p.step[i] == 1 && n.shape[i] == xs[i]) continue;
    g = unslice_axis(g, i, xs[i], p.start[i], p.step[i]);
  }
  return {g};
}

MaybeArray slice_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype)) return std::nullopt;
  return remake(n, n.shape, {*t[0]}, n.params);
}

Batched slice_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.start.insert(p.start.begin(), 0);
  p.stop.insert(p.stop.begin(), size);
  p.step.insert(p.step.begin(), 1);
  return {remake(n, prepend(size, n.shape), {in[0].value}, p), true};
}

std::vector<MaybeArray> concatenate_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  std::vector<MaybeArray> r(n.inputs.size());
  if (!differentiable(n.dtype)) return r;
  int axis = n.params.axes[0];
  int64_t at = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    int64_t len = n.inputs[i].shape()[axis];
    r[i] = slice_axis(ct, axis, at, at + len, 1);
    at += len;
  }
  return r;
}

MaybeArray concatenate_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!differentiable(n.dtype)) return std::nullopt;
  bool any = false;
  std::vector<Array> parts;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    any = any || t[i];
    parts.push_back(t[i] ? *t[i] : rule::zeros_for(n.inputs[i]));
  }
  if (!any) return std::nullopt;
  return remake(n, n.shape, parts, n.params);
}

Batched concatenate_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  std::vector<Array> parts;
  for (const Batched& b : in) parts.push_back(rule::materialize(b, size));
  Params p = n.params;
  p.axes = {n.params.axes[0] + 1};
  return {remake(n, prepend(size, n.shape), parts, p), true};
}

}  // namespace

const TransformRules kReshapeTransforms{
    .vjp = reshape_vjp, .jvp = reshape_jvp, .vmap = reshape_vmap};
const TransformRules kTransposeTransforms{
    .vjp = transpose_vjp, .jvp = transpose_jvp, .vmap = transpose_vmap};
const TransformRules kBroadcastTransforms{
    .vjp = broadcast_vjp, .jvp = broadcast_jvp, .vmap = broadcast_vmap};
const TransformRules kSliceTransforms{.vjp = slice_vjp, .jvp = slice_jvp, .vmap = slice_vmap};
const TransformRules kConcatenateTransforms{
    .vjp = concatenate_vjp, .jvp = concatenate_jvp, .vmap = concatenate_vmap};

}  // namespace kiln

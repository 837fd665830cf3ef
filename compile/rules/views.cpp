// Compile rules of the primitives that move elements without computing: reshape, transpose,
// broadcast_to, slice and concatenate. The first four are views fusion reads through; a
// concatenation is a kernel per input piece.
#include <algorithm>

#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

using rule::remake;

// A view reads its input at a transformed view: the value is the input's.
int view_emit(EmitContext& cx, const ArrayNode&) { return cx.input(0); }

// A reshape or broadcast_to whose input already has its shape and dtype is its input; one of
// another of the same kind reads the inner one's input (its parameters give the shape). Neither
// holds for every shape, so not shapeless.
std::optional<Array> reshape_or_broadcast_simplify(const Array&, const SimplifyContext& cx) {
  const ArrayNode& n = cx.node;
  if (cx.shapeless) return std::nullopt;
  if (cx.same_type(n.inputs[0])) return n.inputs[0];
  const ArrayNode& x = *n.inputs[0].node();
  if (x.op == n.op) return remake(n, n.shape, {x.inputs[0]}, n.params);
  return std::nullopt;
}

// ---- reshape ----

Shape reshape_shape(const ArrayNode& n, const std::vector<Array>& in) {
  const Params& p = n.params;
  const Shape& s = in[0].shape();
  switch (p.reshape) {
    case ReshapeKind::Explicit: try { return resolve_reshape(s, p.shape);
      } catch (const Error&) {
        rule::baked(n,
                    "to " + to_string(p.shape) + " cannot take an input of shape " + to_string(s));
      }
    case ReshapeKind::Flatten: {
      Shape out(s.begin(), s.begin() + p.axes[0]);
      int64_t m = 1;
      for (int i = p.axes[0]; i <= p.axes[1]; ++i) m *= s[i];
      out.push_back(m);
      out.insert(out.end(), s.begin() + p.axes[1] + 1, s.end());
      return out;
    }
    case ReshapeKind::Squeeze: {
      Shape out;
      for (int i = 0; i < static_cast<int>(s.size()); ++i) {
        bool drop = std::find(p.axes.begin(), p.axes.end(), i) != p.axes.end();
        if (drop && s[i] != 1)
          rule::baked(n, "of axis " + std::to_string(i) + " needs extent 1, the input has shape " +
                             to_string(s));
        if (!drop) out.push_back(s[i]);
      }
      return out;
    }
    case ReshapeKind::ExpandDims: {
      Shape out;
      size_t k = 0;
      for (size_t i = 0; i < s.size() + p.axes.size(); ++i)
        out.push_back(std::find(p.axes.begin(), p.axes.end(), static_cast<int>(i)) != p.axes.end()
                          ? 1
                          : s[k++]);
      return out;
    }
  }
  return n.shape;
}

// A reshape that composes with `v` (unit-axis changes, splits and merges the view allows) reads
// its input through a view; others read a stored input by its row-major index.
std::optional<View> reshape_view(const ArrayNode& n, size_t, const View& v) {
  View cv;
  if (v.reshape_input(n.inputs[0].shape(), n.shape, cv)) return cv;
  return std::nullopt;
}

int reshape_emit(EmitContext& cx, const ArrayNode&) {
  return cx.has_view(0) ? cx.input(0) : cx.load_row_major(0);
}

// ---- transpose ----

Shape transpose_shape(const ArrayNode& n, const std::vector<Array>& in) {
  Shape out;
  for (int a : n.params.axes) out.push_back(in[0].shape()[a]);
  return out;
}

std::optional<View> transpose_view(const ArrayNode& n, size_t, const View& v) {
  return v.transpose_input(n.params.axes);
}

// transpose(transpose(x, p), q) reads x through the composed permutation: one transpose, or
// none (reverse mode makes such pairs: the cotangent of x @ w.T through matmul and back).
std::optional<Array> transpose_simplify(const Array&, const SimplifyContext& cx) {
  const ArrayNode& n = cx.node;
  const ArrayNode& x = *n.inputs[0].node();
  if (x.op != Op::Transpose) return std::nullopt;
  std::vector<int> perm;
  bool identity = true;
  for (size_t i = 0; i < n.params.axes.size(); ++i) {
    perm.push_back(x.params.axes[n.params.axes[i]]);
    identity = identity && perm.back() == static_cast<int>(i);
  }
  if (identity) return x.inputs[0];
  Params p = n.params;
  p.axes = perm;
  return remake(n, n.shape, {x.inputs[0]}, p);
}

// ---- broadcast_to ----

Shape broadcast_shape(const ArrayNode& n, const std::vector<Array>& in) {
  Shape b = broadcast_shapes(in[0].shape(), n.params.shape, "broadcast_to");
  if (b != n.params.shape)
    rule::baked(n, "to " + to_string(n.params.shape) + " got an input of shape " +
                       to_string(in[0].shape()));
  return b;
}

// ---- slice ----

Shape slice_shape(const ArrayNode& n, const std::vector<Array>& in) {
  const Params& p = n.params;
  Shape out;
  for (size_t i = 0; i < in[0].shape().size(); ++i) {
    int64_t d = in[0].shape()[i], st = p.step[i];
    int64_t a =
        st > 0 ? std::clamp<int64_t>(p.start[i], 0, d) : std::clamp<int64_t>(p.start[i], -1, d - 1);
    int64_t b =
        st > 0 ? std::clamp<int64_t>(p.stop[i], 0, d) : std::clamp<int64_t>(p.stop[i], -1, d - 1);
    if (a != p.start[i] || b != p.stop[i])
      rule::baked(n, "bounds were resolved for the traced shape and do not fit an input of shape " +
                         to_string(in[0].shape()));
    int64_t len = st > 0 ? (b - a + st - 1) / st : (a - b - st - 1) / (-st);
    out.push_back(std::max<int64_t>(0, len));
  }
  return out;
}

std::optional<View> slice_view(const ArrayNode& n, size_t, const View& v) {
  return v.slice_input(n.params.start, n.params.step);
}

// A slice of everything (start 0, step 1, the input's shape) is its input; not shapeless, where
// the same bounds may cut a larger input.
std::optional<Array> slice_simplify(const Array&, const SimplifyContext& cx) {
  const ArrayNode& n = cx.node;
  if (cx.shapeless || !cx.same_type(n.inputs[0])) return std::nullopt;
  for (size_t i = 0; i < n.shape.size(); ++i)
    if (n.params.start[i] != 0 || n.params.step[i] != 1) return std::nullopt;
  return n.inputs[0];
}

// ---- concatenate ----

Shape concatenate_shape(const ArrayNode& n, const std::vector<Array>& in) {
  int axis = n.params.axes[0];
  Shape out = in[0].shape();
  out[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t j = 0; j < out.size(); ++j)
      if (static_cast<int>(j) != axis && in[i].shape()[j] != out[j])
        throw_error("concatenate: shapes ", in[0].shape(), " and ", in[i].shape(),
                    " differ on axis ", j);
    out[axis] += in[i].shape()[axis];
  }
  return out;
}

}  // namespace

const PrimitiveRules kReshapeRules{.shape = reshape_shape,
                                   .fuses_inline = true,
                                   .input_view = reshape_view,
                                   .emit = reshape_emit,
                                   .simplify = reshape_or_broadcast_simplify};
const PrimitiveRules kTransposeRules{.shape = transpose_shape,
                                     .fuses_inline = true,
                                     .input_view = transpose_view,
                                     .emit = view_emit,
                                     .simplify = transpose_simplify};
const PrimitiveRules kBroadcastRules{.shape = broadcast_shape,
                                     .fuses_inline = true,
                                     .input_view = rule::broadcast_view,
                                     .emit = view_emit,
                                     .simplify = reshape_or_broadcast_simplify};
const PrimitiveRules kSliceRules{.shape = slice_shape,
                                 .fuses_inline = true,
                                 .input_view = slice_view,
                                 .emit = view_emit,
                                 .simplify = slice_simplify};
// A concatenation is a kernel per input piece (fusion_plan.cpp), not a view.
const PrimitiveRules kConcatenateRules{.shape = concatenate_shape, .input_view = rule::no_view};

}  // namespace kiln

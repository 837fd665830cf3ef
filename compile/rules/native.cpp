// Compile rules of the native primitives (sort, argsort, scans, gathers, scatters): library
// calls of their own, so they have a shape rule and no kernel emission; fusion stores their
// inputs and outputs (compile/fusion_plan.cpp treats them as it treats matmul).
#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

// Sort, argsort, scans and scatters keep their first input's shape.
Shape same_shape(const ArrayNode& n, const std::vector<Array>& in) {
  if (n.params.axes.at(0) >= in[0].ndim()) rule::baked(n, "works along an axis the input lacks");
  return in[0].shape();
}

// Shared indices (take): a's shape with their axes in place of the gathered one. Per-row ones
// (take_along_axis): their own shape, which must still match a's but at the axis.
Shape gather_shape(const ArrayNode& n, const std::vector<Array>& in) {
  int ax = n.params.axes.at(0);
  if (ax >= in[0].ndim()) rule::baked(n, "works along an axis the input lacks");
  const Shape &t = in[0].shape(), &idx = in[1].shape();
  if (gather_shares_indices(t.size(), idx.size(), n.shape.size())) {
    Shape s(t.begin(), t.begin() + ax);
    s.insert(s.end(), idx.begin(), idx.end());
    s.insert(s.end(), t.begin() + ax + 1, t.end());
    return s;
  }
  Shape s = t;
  s[ax] = idx[ax];
  if (idx != s) rule::baked(n, "has indices whose shape no longer matches the input's");
  return s;
}

// A gather fused into the kernel reading it (compile/fusion_plan.cpp decides when) reads its
// indices at the node's element: shared indices by the coordinates of their own axes alone,
// per-row ones (the node's shape) at the same view. The table is read through load_gathered.
std::optional<View> gather_view(const ArrayNode& n, size_t i, const View& v) {
  if (i != 1) return std::nullopt;
  const Array& idx = n.inputs[1];
  if (!gather_shares_indices(n.inputs[0].ndim(), idx.ndim(), n.shape.size())) return v;
  int ax = n.params.axes.at(0), k = idx.ndim();
  View own;
  own.domain = v.domain;
  own.coeff.assign(v.coeff.begin() + ax, v.coeff.begin() + ax + k);
  own.offset.assign(v.offset.begin() + ax, v.offset.begin() + ax + k);
  return own;
}

int gather_emit(EmitContext& cx, const ArrayNode& n) {
  return cx.load_gathered(0, n.params.axes.at(0), cx.input(1));
}

}  // namespace

const ArrayNode& gathered_table_source(const ArrayNode& gather) {
  const ArrayNode& t = *gather.inputs[0].node();
  if (t.op != Op::Broadcast) return t;
  const Shape& in = t.inputs[0].shape();
  size_t ax = static_cast<size_t>(gather.params.axes.at(0));
  if (in.size() != t.shape.size() || in[ax] != t.shape[ax]) return t;
  return *t.inputs[0].node();
}

const PrimitiveRules kNativeRules{.shape = same_shape, .input_view = rule::no_view};
const PrimitiveRules kGatherRules{
    .shape = gather_shape, .input_view = gather_view, .emit = gather_emit};

}  // namespace kiln

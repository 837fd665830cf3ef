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

// a's shape with the indices' extent at the axis (1-D indices: their length).
Shape gather_shape(const ArrayNode& n, const std::vector<Array>& in) {
  int ax = n.params.axes.at(0);
  if (ax >= in[0].ndim()) rule::baked(n, "works along an axis the input lacks");
  const Shape& idx = in[1].shape();
  if (idx.size() == 1) {
    Shape s = in[0].shape();
    s[ax] = idx[0];
    return s;
  }
  Shape s = in[0].shape();
  s[ax] = idx[ax];
  if (idx != s) rule::baked(n, "has indices whose shape no longer matches the input's");
  return s;
}

// A gather fused into the kernel reading it (compile/fusion_plan.cpp decides when) reads its
// indices at the node's element: shared 1-D indices by the gathered coordinate alone, per-row
// ones (the node's shape) at the same view. The table is read through load_gathered instead.
std::optional<View> gather_view(const ArrayNode& n, size_t i, const View& v) {
  if (i != 1) return std::nullopt;
  if (n.inputs[1].ndim() != 1) return v;
  int ax = n.params.axes.at(0);
  View row;
  row.domain = v.domain;
  row.coeff = {v.coeff[ax]};
  row.offset = {v.offset[ax]};
  return row;
}

int gather_emit(EmitContext& cx, const ArrayNode& n) {
  return cx.load_gathered(0, n.params.axes.at(0), cx.input(1));
}

}  // namespace

const PrimitiveRules kNativeRules{.shape = same_shape, .input_view = rule::no_view};
const PrimitiveRules kGatherRules{
    .shape = gather_shape, .input_view = gather_view, .emit = gather_emit};

}  // namespace kiln

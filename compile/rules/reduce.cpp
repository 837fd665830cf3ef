// Compile rules of the reductions (sum, max, min, prod, argmax) and of Count, the element count
// mean divides by. Reductions are kernels of their own (never inline); a count is inlined from
// its input's shape.
#include <algorithm>

#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

Shape reduce_shape(const ArrayNode& n, const std::vector<Array>& in) {
  const Params& p = n.params;
  const Shape& s = in[0].shape();
  Shape out;
  for (int j = 0; j < static_cast<int>(s.size()); ++j) {
    bool r = std::find(p.axes.begin(), p.axes.end(), j) != p.axes.end();
    if (r && s[j] == 0 && p.reduce != ReduceOp::Sum && p.reduce != ReduceOp::Prod)
      rule::baked(n, "cannot reduce an axis of extent 0");
    if (!r)
      out.push_back(s[j]);
    else if (p.keepdims)
      out.push_back(1);
  }
  return out;
}

// ---- count: a function of the input's shape only ----

Shape count_shape(const ArrayNode&, const std::vector<Array>&) { return {}; }

// The element count: an immediate, or (shapeless) a launch value read as an Index with no
// strides, whose value is its offset.
int count_emit(EmitContext& cx, const ArrayNode& n) {
  int64_t count = 1;
  for (int ax : n.params.axes) count *= n.inputs[0].shape()[ax];
  if (!cx.runtime_dims()) return cx.immediate(Scalar::of(static_cast<double>(count)).cast(n.dtype));
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64;
  idx.map.strides.assign(cx.domain_rank(), Dim::constant(0));
  idx.map.offset = cx.dim(count);
  Value val;
  val.dtype = n.dtype;
  val.kind = ValueKind::Cast, val.a = cx.add(idx);
  return cx.add(val);
}

}  // namespace

const PrimitiveRules kReduceRules{.shape = reduce_shape, .input_view = rule::no_view};
// A count is inlined from its input's shape, not read through a view.
const PrimitiveRules kCountRules{
    .shape = count_shape, .input_view = rule::no_view, .emit = count_emit};

}  // namespace kiln

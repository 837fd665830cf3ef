// Rules of the primitives without inputs: constants, placeholders, fills, aranges and random
// draws. They have no derivative with respect to anything (a random draw's cotangent is zero:
// its key is not differentiable) and never carry a mapped axis.
#include "compile/rules.h"

namespace kiln {

namespace {

int full_emit(EmitContext& cx, const ArrayNode& n) { return cx.constant(n.params.value); }

// start + index * step, both launch scalars; the index follows the view along the only axis.
int arange_emit(EmitContext& cx, const ArrayNode& n) {
  const View& v = cx.view();
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64;
  idx.map.offset = Dim::constant(v.offset[0]);
  for (int64_t c : v.coeff[0]) idx.map.strides.push_back(Dim::constant(c));
  idx.map = cx.runtime_map(idx.map);
  int i = cx.add(idx);
  if (n.dtype != int64) {
    Value c;
    c.kind = ValueKind::Cast, c.dtype = n.dtype, c.a = i;
    i = cx.add(c);
  }
  Value mul, sum;
  mul.kind = ValueKind::Binary, mul.binary = BinaryOp::Multiply, mul.dtype = n.dtype;
  mul.a = i, mul.b = cx.constant(n.params.step_value);
  int m = cx.add(mul);
  sum.kind = ValueKind::Binary, sum.binary = BinaryOp::Add, sum.dtype = n.dtype;
  sum.a = m, sum.b = cx.constant(n.params.value);
  return cx.add(sum);
}

// Counter-based: the bits of (key, row-major index); the key is a launch scalar.
int random_emit(EmitContext& cx, const ArrayNode& n) {
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64;
  idx.map = cx.runtime_map(cx.view().buffer_map(contiguous_strides(n.shape)));
  Value val;
  val.dtype = n.dtype;
  val.kind = ValueKind::Random, val.dist = n.params.dist;
  val.param = cx.launch_param(static_cast<int64_t>(n.params.key));
  val.a = cx.add(idx);
  return cx.add(val);
}

Shape own_shape(const ArrayNode& n, const std::vector<Array>&) { return n.shape; }

std::vector<MaybeArray> no_vjp(const ArrayNode&, const Array&, const Array&) { return {}; }

MaybeArray no_jvp(const ArrayNode&, const Array&, const std::vector<MaybeArray>&) {
  return std::nullopt;
}

Batched no_vmap(const ArrayNode& n, const std::vector<Batched>&, int64_t) {
  throw_error("internal: vmap asked to batch ", primitive_name(n.op, n.params),
              ", which has no inputs");
}

}  // namespace

// Constants and placeholders are always buffers (leaves): fusion never emits them inline.
const PrimitiveRules kSourceRules{own_shape, true,   false,  rule::no_view,
                                  nullptr,   no_vjp, no_jvp, no_vmap};
// Fills, aranges and draws are computed inline from launch values and the index.
const PrimitiveRules kFullRules{own_shape, true,   true,   rule::no_view,
                                full_emit, no_vjp, no_jvp, no_vmap};
const PrimitiveRules kArangeRules{own_shape,   true,   true,   rule::no_view,
                                  arange_emit, no_vjp, no_jvp, no_vmap};
const PrimitiveRules kRandomRules{own_shape,   true,   true,   rule::no_view,
                                  random_emit, no_vjp, no_jvp, no_vmap};

}  // namespace kiln

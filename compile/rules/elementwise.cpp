// Compile rules of the element-wise primitives: unary functions, binary operators, where and
// astype. Each is one Kernel IR value over its inputs' values, read through the broadcast view.
#include "compile/fusion_plan.h"
#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

// ---- emission: one Kernel IR value over the inputs' values ----

Value value_of(const ArrayNode& n, ValueKind kind) {
  Value v;
  v.kind = kind;
  v.dtype = n.dtype;
  return v;
}

int unary_emit(EmitContext& cx, const ArrayNode& n) {
  Value v = value_of(n, ValueKind::Unary);
  v.unary = n.params.unary;
  v.a = cx.input(0);
  return cx.add(v);
}

// pow(x, 2) reads no exponent: it is the immediate 2, emitted as x * x by every backend.
int binary_emit(EmitContext& cx, const ArrayNode& n) {
  Value v = value_of(n, ValueKind::Binary);
  v.binary = n.params.binary;
  v.a = cx.input(0);
  v.b = cx.has_view(1) ? cx.input(1) : cx.immediate(Scalar::of(2.0).cast(n.inputs[1].dtype()));
  return cx.add(v);
}

int select_emit(EmitContext& cx, const ArrayNode& n) {
  Value v = value_of(n, ValueKind::Select);
  v.a = cx.input(0);
  v.b = cx.input(1);
  v.c = cx.input(2);
  return cx.add(v);
}

int cast_emit(EmitContext& cx, const ArrayNode& n) {
  Value v = value_of(n, ValueKind::Cast);
  v.a = cx.input(0);
  return cx.add(v);
}

// ---- unary ----

Shape same_shape(const ArrayNode&, const std::vector<Array>& in) { return in[0].shape(); }

// -(-x) is x.
std::optional<Array> unary_simplify(const Array& a, const SimplifyContext& cx) {
  if (cx.node.params.unary != UnaryOp::Negative) return std::nullopt;
  const ArrayNode& x = *cx.node.inputs[0].node();
  if (x.op == Op::Unary && x.params.unary == UnaryOp::Negative && cx.same_type(x.inputs[0]))
    return x.inputs[0];
  return std::nullopt;
}

// ---- binary ----

// pow(x, 2) is emitted as x * x (the one value specialised into code): no view of the 2.
std::optional<View> binary_view(const ArrayNode& n, size_t i, const View& v) {
  if (n.params.binary == BinaryOp::Power && i == 1 && is_two(*n.inputs[1].node()))
    return std::nullopt;
  return rule::broadcast_view(n, i, v);
}

Shape binary_shape(const ArrayNode& n, const std::vector<Array>& in) {
  return broadcast_shapes(in[0].shape(), in[1].shape(), op_name(n.params.binary));
}

// The identities x * 1, 1 * x, x + 0, 0 + x, x - 0 and x / 1, when x can stand for the result.
std::optional<Array> binary_simplify(const Array&, const SimplifyContext& cx) {
  const Array &x = cx.node.inputs[0], &y = cx.node.inputs[1];
  switch (cx.node.params.binary) {
    case BinaryOp::Multiply:
      if (cx.all_equal(y, 1) && cx.same_type(x)) return x;
      if (cx.all_equal(x, 1) && cx.same_type(y)) return y;
      break;
    case BinaryOp::Add:
      if (cx.all_equal(y, 0) && cx.same_type(x)) return x;
      if (cx.all_equal(x, 0) && cx.same_type(y)) return y;
      break;
    case BinaryOp::Subtract:
      if (cx.all_equal(y, 0) && cx.same_type(x)) return x;
      break;
    case BinaryOp::Divide:
      if (cx.all_equal(y, 1) && cx.same_type(x)) return x;
      break;
    default: break;
  }
  return std::nullopt;
}

// ---- where ----

Shape select_shape(const ArrayNode&, const std::vector<Array>& in) {
  return broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"), in[2].shape(),
                          "where");
}

// ---- astype ----

// A cast that a round trip through `wide` undoes exactly. Not from float16/bfloat16: inside a
// fused kernel their values are float32 values, which the cast back rounds (scalar_ops.h).
bool widens_exactly(Dtype from, Dtype wide) { return !from.is_half() && holds_exactly(wide, from); }

// astype(astype(x, wide), x's dtype) is x when `wide` holds every value of x's dtype.
std::optional<Array> cast_simplify(const Array&, const SimplifyContext& cx) {
  const ArrayNode& x = *cx.node.inputs[0].node();
  if (x.op == Op::Cast && x.inputs[0].dtype() == cx.node.dtype &&
      widens_exactly(cx.node.dtype, x.dtype))
    return x.inputs[0];
  return std::nullopt;
}

}  // namespace

const PrimitiveRules kUnaryRules{.shape = same_shape,
                                 .any_rank = true,
                                 .elementwise = true,
                                 .fuses_inline = true,
                                 .input_view = rule::broadcast_view,
                                 .emit = unary_emit,
                                 .simplify = unary_simplify};
const PrimitiveRules kBinaryRules{.shape = binary_shape,
                                  .any_rank = true,
                                  .elementwise = true,
                                  .fuses_inline = true,
                                  .input_view = binary_view,
                                  .emit = binary_emit,
                                  .simplify = binary_simplify};
const PrimitiveRules kSelectRules{.shape = select_shape,
                                  .any_rank = true,
                                  .elementwise = true,
                                  .fuses_inline = true,
                                  .input_view = rule::broadcast_view,
                                  .emit = select_emit};
const PrimitiveRules kCastRules{.shape = same_shape,
                                .any_rank = true,
                                .elementwise = true,
                                .fuses_inline = true,
                                .input_view = rule::broadcast_view,
                                .emit = cast_emit,
                                .simplify = cast_simplify};

}  // namespace kiln

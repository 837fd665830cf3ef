// Compile rules of the primitives without inputs: constants, placeholders, fills, aranges and
// random draws.
#include "compile/fusion_plan.h"
#include "compile/rules.h"

namespace kiln {

namespace {

// Each emit rule below has its launch values beside it: what the kernel of the node alone takes,
// in the order the rule asks for them, so an eager kernel of the same structure serves new values.
// Alone, a kernel has constant dims (eager kernels are keyed by shape): runtime_map adds none.

int full_emit(EmitContext& cx, const ArrayNode& n) { return cx.constant(n.params.value); }
std::vector<int64_t> full_launch(const ArrayNode& n) { return {launch_word(n.params.value)}; }

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
std::vector<int64_t> arange_launch(const ArrayNode& n) {
  return {launch_word(n.params.step_value), launch_word(n.params.value)};
}

// Counter-based: the bits of (key, row-major index). The key is a launch scalar, or the value
// of the key input (a 0-d uint64 array: loaded, or a launch scalar when it is a host constant),
// which a traced key (compile's captured random state) needs.
int random_emit(EmitContext& cx, const ArrayNode& n) {
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64;
  idx.map = cx.runtime_map(cx.view().buffer_map(contiguous_strides(n.shape)));
  Value val;
  val.dtype = n.dtype;
  val.kind = ValueKind::Random, val.dist = n.params.dist;
  if (n.inputs.empty())
    val.param = cx.launch_param(static_cast<int64_t>(n.params.key));
  else
    val.b = cx.input(0);
  val.a = cx.add(idx);
  return cx.add(val);
}
std::vector<int64_t> random_launch(const ArrayNode& n) {
  if (n.inputs.empty()) return {static_cast<int64_t>(n.params.key)};
  std::optional<Scalar> key = host_scalar(*n.inputs[0].node());  // as the default rule
  if (key) return {launch_word(*key)};
  return {};
}

Shape own_shape(const ArrayNode& n, const std::vector<Array>&) { return n.shape; }

}  // namespace

// Constants and placeholders are always buffers (leaves): fusion never emits them inline.
const PrimitiveRules kSourceRules{
    .shape = own_shape, .any_rank = true, .input_view = rule::no_view};
// Fills, aranges and draws are computed inline from launch values and the index.
const PrimitiveRules kFullRules{.shape = own_shape,
                                .any_rank = true,
                                .fuses_inline = true,
                                .input_view = rule::no_view,
                                .emit = full_emit,
                                .launch_values = full_launch};
const PrimitiveRules kArangeRules{.shape = own_shape,
                                  .any_rank = true,
                                  .fuses_inline = true,
                                  .input_view = rule::no_view,
                                  .emit = arange_emit,
                                  .launch_values = arange_launch};
const PrimitiveRules kRandomRules{.shape = own_shape,
                                  .any_rank = true,
                                  .fuses_inline = true,
                                  .input_view = rule::broadcast_view,  // the 0-d key
                                  .emit = random_emit,
                                  .launch_values = random_launch};

}  // namespace kiln

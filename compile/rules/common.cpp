// Helpers the per-family compile rules share, and the table from Op to its family's rules.
#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

const PrimitiveRules& rules(Op op) {
  switch (op) {
    case Op::Unary: return kUnaryRules;
    case Op::Binary: return kBinaryRules;
    case Op::Select: return kSelectRules;
    case Op::Cast: return kCastRules;
    case Op::Reduce: return kReduceRules;
    case Op::Count: return kCountRules;
    case Op::Reshape: return kReshapeRules;
    case Op::Transpose: return kTransposeRules;
    case Op::Broadcast: return kBroadcastRules;
    case Op::Slice: return kSliceRules;
    case Op::Concatenate: return kConcatenateRules;
    case Op::Matmul: return kMatmulRules;
    case Op::Sort:
    case Op::Argsort:
    case Op::Scan:
    case Op::ScatterAdd: return kNativeRules;
    case Op::Gather: return kGatherRules;
    case Op::AllReduce:
    case Op::AllGather:
    case Op::SumScatter:
    case Op::Send:
    case Op::Recv: return kCollectiveRules;
    case Op::Full: return kFullRules;
    case Op::Arange: return kArangeRules;
    case Op::Random: return kRandomRules;
    case Op::Constant:
    case Op::Placeholder: return kSourceRules;
  }
  throw_error("internal: no rules for primitive ", static_cast<int>(op));
}

namespace rule {

Array remake(const ArrayNode& n, Shape shape, std::vector<Array> inputs, Params p) {
  return make_array(std::move(shape), n.dtype, n.op, std::move(p), std::move(inputs), n.stream);
}

void baked(const ArrayNode& n, const std::string& what) {
  throw_error("compile(shapeless=true): ", primitive_name(n.op, n.params), " ", what,
              " (its shape was fixed when the function was traced with output shape ", n.shape,
              "; make it relative to the input, e.g. flatten or reshape with -1, or compile "
              "without shapeless)");
}

std::optional<View> broadcast_view(const ArrayNode& n, size_t i, const View& v) {
  return v.broadcast_input(n.inputs[i].shape(), n.shape);
}

std::optional<View> no_view(const ArrayNode&, size_t, const View&) { return std::nullopt; }

}  // namespace rule
}  // namespace kiln

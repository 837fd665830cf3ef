// Rules of the primitives without inputs: constants, placeholders, fills, aranges and random
// draws. They have no derivative with respect to anything (a random draw's cotangent is zero:
// its key is not differentiable) and never carry a mapped axis.
#include "compile/rules.h"

namespace kiln {

namespace {

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

// Fills, aranges and draws are computed inline from launch values and the index (constants and
// placeholders are leaves: fusion never asks).
const PrimitiveRules kSourceRules{own_shape, true, true, rule::no_view, no_vjp, no_jvp, no_vmap};

}  // namespace kiln

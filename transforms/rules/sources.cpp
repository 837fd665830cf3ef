// Transform rules of the primitives without inputs: constants, placeholders, fills, aranges
// and random draws. They have no derivative with respect to anything (a random draw's cotangent
// is zero: its key is not differentiable) and never carry a mapped axis.
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

std::vector<MaybeArray> no_vjp(const ArrayNode&, const Array&, const Array&) { return {}; }

MaybeArray no_jvp(const ArrayNode&, const Array&, const std::vector<MaybeArray>&) {
  return std::nullopt;
}

Batched no_vmap(const ArrayNode& n, const std::vector<Batched>&, int64_t) {
  throw_error("internal: vmap asked to batch ", primitive_name(n.op, n.params),
              ", which has no inputs");
}

}  // namespace

const TransformRules kSourceTransforms{.vjp = no_vjp, .jvp = no_jvp, .vmap = no_vmap};

}  // namespace kiln

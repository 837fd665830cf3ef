// Transform rules of the primitives without inputs (constants, placeholders, fills, aranges)
// and of random draws, whose only input is a key array. None has a derivative with respect to
// anything (a key is not differentiable); only a draw with a mapped key carries a mapped axis.
#include "compile/rules.h"
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

std::vector<MaybeArray> random_vjp(const ArrayNode& n, const Array&, const Array&) {
  return std::vector<MaybeArray>(n.inputs.size());
}

// A batch of keys draws once per key: element b of the result is the draw with key b, so
// vmap(f) over keys equals f on each key. Unrolled (one draw per key; a draw reads one key).
Batched random_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  if (in.empty()) return no_vmap(n, in, size);
  const Array& keys = in[0].value;
  if (!in[0].mapped) return {rule::remake(n, n.shape, {keys}, n.params), false};
  std::vector<Array> draws;
  for (int64_t b = 0; b < size; ++b) {
    Array key = reshape(slice(keys, {b}, {b + 1}), {});
    draws.push_back(expand_dims(rule::remake(n, n.shape, {key}, n.params), 0));
  }
  return {concatenate(draws, 0), true};
}

}  // namespace

const TransformRules kSourceTransforms{.vjp = no_vjp, .jvp = no_jvp, .vmap = no_vmap};
const TransformRules kRandomTransforms{.vjp = random_vjp, .jvp = no_jvp, .vmap = random_vmap};

}  // namespace kiln

// Helpers the per-family rules share, and the table from Op to its family's rules.
#include <numeric>

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
    case Op::Full: return kFullRules;
    case Op::Arange: return kArangeRules;
    case Op::Random: return kRandomRules;
    case Op::Constant:
    case Op::Placeholder: return kSourceRules;
  }
  throw_error("internal: no rules for primitive ", static_cast<int>(op));
}

namespace rule {

Array unbroadcast(const Array& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  int lead = g.ndim() - static_cast<int>(shape.size());
  std::vector<int> axes(lead);
  std::iota(axes.begin(), axes.end(), 0);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.shape()[lead + i] != 1) axes.push_back(lead + static_cast<int>(i));
  Array r = axes.empty() ? g : sum(g, axes, true);
  return reshape(r, shape);
}

Array remake(const ArrayNode& n, Shape shape, std::vector<Array> inputs, Params p) {
  return make_array(std::move(shape), n.dtype, n.op, std::move(p), std::move(inputs), n.stream);
}

Array align_mapped(const Batched& b, int rank) {
  const Shape& s = b.value.shape();
  int have = static_cast<int>(s.size()) - 1;
  if (!b.mapped || have >= rank) return b.value;
  Shape out{s[0]};
  out.insert(out.end(), rank - have, 1);
  out.insert(out.end(), s.begin() + 1, s.end());
  return reshape(b.value, out);
}

Array materialize(const Batched& b, int64_t size) {
  if (b.mapped) return b.value;
  return broadcast_to(expand_dims(b.value, 0), prepend(size, b.value.shape()));
}

Shape prepend(int64_t size, const Shape& s) {
  Shape out{size};
  out.insert(out.end(), s.begin(), s.end());
  return out;
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

bool differentiable(Dtype d) { return d.is_float(); }

Array zeros_for(const Array& like) { return zeros(like.shape(), like.dtype()); }

}  // namespace rule
}  // namespace kiln

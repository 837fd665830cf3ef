// Helpers the per-family transform rules share, and the table from Op to its family's rules.
#include <numeric>

#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

const TransformRules& transform_rules(Op op) {
  switch (op) {
    case Op::Unary: return kUnaryTransforms;
    case Op::Binary: return kBinaryTransforms;
    case Op::Select: return kSelectTransforms;
    case Op::Cast: return kCastTransforms;
    case Op::Reduce: return kReduceTransforms;
    case Op::Count: return kCountTransforms;
    case Op::Reshape: return kReshapeTransforms;
    case Op::Transpose: return kTransposeTransforms;
    case Op::Broadcast: return kBroadcastTransforms;
    case Op::Slice: return kSliceTransforms;
    case Op::Concatenate: return kConcatenateTransforms;
    case Op::Matmul: return kMatmulTransforms;
    case Op::Random: return kRandomTransforms;
    case Op::Sort: return kSortTransforms;
    case Op::Argsort: return kArgsortTransforms;
    case Op::Scan: return kScanTransforms;
    case Op::Gather: return kGatherTransforms;
    case Op::ScatterAdd: return kScatterAddTransforms;
    case Op::AllReduce:
    case Op::AllGather:
    case Op::SumScatter:
    case Op::Send:
    case Op::Recv: return kCollectiveTransforms;
    case Op::Full:
    case Op::Arange:
    case Op::Constant:
    case Op::Placeholder: return kSourceTransforms;
  }
  throw_error("internal: no transform rules for primitive ", static_cast<int>(op));
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

bool differentiable(Dtype d) { return d.is_float(); }

Array zeros_for(const Array& like) { return zeros(like.shape(), like.dtype()); }

}  // namespace rule
}  // namespace kiln

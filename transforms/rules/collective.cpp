// Transform rules of the collectives. all_sum's vjp is the identity, as MLX's: the output is
// the same on every rank and so is what follows it, so the loss after an all_sum is one value
// that every rank computes, and each rank's input contributes to it with weight one; summing
// the cotangents as well (the transpose of an all_sum taken as a map of all ranks' inputs to
// all ranks' outputs) would count that one loss size() times. Data-parallel training averages
// its gradients explicitly (optim::average_gradients). all_max and all_min pass the cotangent
// to the ranks whose value won (all of them on a tie). all_gather's vjp takes this rank's slice
// of the cotangent; sum_scatter's gathers the cotangents of every rank's part, whose outputs
// differ per rank, so each rank's loss counts once. Their jvps are the collective of the
// tangents (max/min: the winners' tangents, averaged over ties). send and recv have no
// derivative. Under vmap a collective works on the whole batch, the mapped axis moved off
// axis 0 where the collective works along it.
#include "compile/rules.h"
#include "distributed/group.h"
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

distributed::Group group_of(const ArrayNode& n) { return distributed::Group(n.params.group); }

// The collective `op` (reduce `r`) of x in the node's group, on the node's stream.
Array collective(const ArrayNode& n, Op op, ReduceOp r, const Array& x) {
  Params p = n.params;
  p.reduce = r;
  Shape s = x.shape();
  int size = group_of(n).size();
  if (op == Op::AllGather) s[0] *= size;
  if (op == Op::SumScatter) s[0] /= size;
  return make_array(s, x.dtype(), op, p, {x}, n.stream);
}

// The node's own collective over a new input.
Array again(const ArrayNode& n, const Array& x) { return collective(n, n.op, n.params.reduce, x); }

Array winners(const ArrayNode& n, const Array& out) { return equal(n.inputs[0], out); }

std::vector<MaybeArray> collective_vjp(const ArrayNode& n, const Array& out, const Array& ct) {
  if (!rule::differentiable(n.dtype) || n.op == Op::Send || n.op == Op::Recv)
    return std::vector<MaybeArray>(n.inputs.size());
  switch (n.op) {
    case Op::AllReduce:
      if (n.params.reduce == ReduceOp::Sum) return {ct};
      return {where(winners(n, out), ct, zeros_like(ct))};
    case Op::AllGather: {
      int64_t rows = n.inputs[0].shape()[0], r = group_of(n).rank();
      Shape start(n.shape.size(), 0), stop = n.shape;
      start[0] = r * rows, stop[0] = (r + 1) * rows;
      return {slice(ct, start, stop)};
    }
    default: return {collective(n, Op::AllGather, ReduceOp::Sum, ct)};  // SumScatter
  }
}

MaybeArray collective_jvp(const ArrayNode& n, const Array& out, const std::vector<MaybeArray>& t) {
  if (n.inputs.empty() || !t[0] || !rule::differentiable(n.dtype) || n.op == Op::Send)
    return std::nullopt;
  if (n.op == Op::AllReduce && n.params.reduce != ReduceOp::Sum) {
    Array won = astype(winners(n, out), n.dtype);
    return collective(n, Op::AllReduce, ReduceOp::Sum, *t[0] * won) /
           collective(n, Op::AllReduce, ReduceOp::Sum, won);
  }
  return again(n, *t[0]);
}

Batched collective_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  if (n.op == Op::Recv) return {rule::remake(n, n.shape, {}, n.params), false};
  if (!in[0].mapped) return {again(n, in[0].value), false};
  if (n.op == Op::AllGather || n.op == Op::SumScatter) {
    Array x = in[0].value;
    if (x.ndim() == 1) x = reshape(x, {x.shape()[0], 1});
    Array r = swapaxes(again(n, swapaxes(x, 0, 1)), 0, 1);
    if (in[0].value.ndim() == 1) r = reshape(r, {r.shape()[0]});
    return {r, true};
  }
  Array x = in[0].value;
  return {rule::remake(n, x.shape(), {x}, n.params), true};
}

}  // namespace

const TransformRules kCollectiveTransforms{
    .vjp = collective_vjp, .jvp = collective_jvp, .vmap = collective_vmap};

}  // namespace kiln

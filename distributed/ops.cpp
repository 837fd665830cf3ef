// The collectives' ops: argument checks and the primitive nodes (graph/primitives.h,
// Op::AllReduce .. Recv). A one-rank group returns the input itself: there is nothing to combine.
#include "distributed/ops.h"

#include "distributed/internal.h"
#include "graph/array_node.h"
#include "graph/device_hooks.h"
#include "graph/ops.h"

namespace kiln::distributed {

namespace {

Group pick(const std::optional<Group>& g) { return g ? *g : init(); }

Array node(Shape shape, Dtype dtype, Op op, Params p, std::vector<Array> in,
           const StreamOrDevice& s) {
  checked_nbytes(shape, dtype, op_name(op));
  ResolvedStream rs = resolve_stream(s);
  // Every rank of the group takes part in a collective: it has no one rank to run on.
  if (rs.stream.device.rank >= 0)
    throw_error(op_name(op), ": collectives and messages run on every rank of their group, so ",
                "they cannot be placed on ", rs.stream.device,
                "; call it outside compute_on(rank...) (it may read values placed on ranks)");
  return make_array(std::move(shape), dtype, op, std::move(p), std::move(in), rs);
}

Array reduce(const Array& x, ReduceOp r, const std::optional<Group>& group,
             const StreamOrDevice& s) {
  Group g = pick(group);
  if (g.size() == 1) return x;
  Params p;
  p.reduce = r;
  p.group = g.id();
  return node(x.shape(), x.dtype(), Op::AllReduce, p, {x}, s);
}

void check_peer(const char* op, int peer, const Group& g) {
  if (g.size() == 1)
    throw_error(op,
                ": the group has one rank, so there is no other rank to talk to (start "
                "several with mpiexec -n N)");
  if (peer < 0 || peer >= g.size() || peer == g.rank())
    throw_error(op, ": rank ", peer, " is not another rank of this group (ranks 0..", g.size() - 1,
                ", this one is ", g.rank(), ")");
}

}  // namespace

Array all_sum(const Array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, ReduceOp::Sum, group, s);
}
Array all_max(const Array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, ReduceOp::Max, group, s);
}
Array all_min(const Array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, ReduceOp::Min, group, s);
}

Array all_gather(const Array& x, std::optional<Group> group, StreamOrDevice s) {
  Group g = pick(group);
  Array a = x.ndim() == 0 ? reshape(x, {1}, s) : x;
  if (g.size() == 1) return a;
  Shape shape = a.shape();
  shape[0] *= g.size();
  Params p;
  p.group = g.id();
  return node(shape, a.dtype(), Op::AllGather, p, {a}, s);
}

Array sum_scatter(const Array& x, std::optional<Group> group, StreamOrDevice s) {
  Group g = pick(group);
  if (x.ndim() == 0 || x.shape()[0] % g.size() != 0)
    throw_error("sum_scatter: axis 0 must split into the group's ", g.size(), " ranks, got shape ",
                x.shape());
  if (g.size() == 1) return x;
  Shape shape = x.shape();
  shape[0] /= g.size();
  Params p;
  p.group = g.id();
  return node(shape, x.dtype(), Op::SumScatter, p, {x}, s);
}

Array send(const Array& x, int dst, std::optional<Group> group, StreamOrDevice s) {
  Group g = pick(group);
  check_peer("send", dst, g);
  Params p;
  p.group = g.id();
  p.peer = dst;
  return node(x.shape(), x.dtype(), Op::Send, p, {x}, s);
}

Array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group, StreamOrDevice s) {
  Group g = pick(group);
  check_peer("recv", src, g);
  for (int64_t d : shape)
    if (d < 0) throw_error("recv: shape ", shape, " has a negative extent");
  Params p;
  p.group = g.id();
  p.peer = src;
  return node(std::move(shape), dtype, Op::Recv, p, {}, s);
}

Array recv_like(const Array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, group, s);
}

}  // namespace kiln::distributed

// Compile rules of the collectives (distributed/ops.h): library calls run by the group's
// communication lane, so they have a shape rule and no kernel emission; fusion stores their
// inputs and outputs as it does matmul's, and the passes never fold or merge them.
#include "compile/rules.h"
#include "distributed/internal.h"

namespace kiln {

namespace {

Shape collective_shape(const ArrayNode& n, const std::vector<Array>& in) {
  if (n.op == Op::Recv) return n.shape;  // what the sender sends is fixed by the trace
  Shape s = in[0].shape();
  if (n.op == Op::AllGather || n.op == Op::SumScatter) {
    if (s.empty()) rule::baked(n, "needs an input with an axis 0");
    int size = distributed::detail::group_size(n.params.group);
    if (n.op == Op::AllGather) {
      s[0] *= size;
    } else {
      if (s[0] % size != 0) rule::baked(n, "needs axis 0 to split into the group's ranks");
      s[0] /= size;
    }
  }
  return s;
}

}  // namespace

const PrimitiveRules kCollectiveRules{.shape = collective_shape, .input_view = rule::no_view};

}  // namespace kiln

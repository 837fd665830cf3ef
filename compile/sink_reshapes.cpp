// Merge reshapes sunk below element-wise nodes (compile/passes.h). A reshape that merges axes is
// no view (its input's coordinates would need a division), so fusion stores its input and reads
// it back row-major: reshape(x * 2, [b * s, d]) was one kernel storing x * 2 and a second one
// copying it. Reshape commutes with an element-wise node whose inputs all have its shape, so it
// becomes reshape(x, [b * s, d]) * 2, read in place from x, the stored array it reaches.
#include <unordered_map>
#include <unordered_set>

#include "compile/graph_walk.h"
#include "compile/passes.h"
#include "compile/view.h"
#include "graph/array_node.h"

namespace kiln {

namespace {

bool same_stream(const ArrayNode& a, const ArrayNode& b) {
  return a.stream.stream == b.stream.stream && a.stream.origin == b.stream.origin;
}

class ReshapeSinker {
 public:
  std::vector<Array> run(const std::vector<Array>& outputs, const std::vector<Array>& inputs) {
    for (const Array& a : inputs) inputs_.insert(a.node().get());
    auto leaf = [&](const ArrayNode& n) { return is_leaf(n); };
    std::vector<Array> order = topological_order(outputs, leaf);
    for (const Array& a : order)
      if (!is_leaf(*a.node()))
        for (const Array& x : a.node()->inputs) ++uses_[x.node().get()];
    for (const Array& o : outputs) ++uses_[o.node().get()];
    for (const Array& a : order) map_.emplace(a.node().get(), rebuild(a));
    std::vector<Array> out;
    for (const Array& o : outputs) out.push_back(map_.at(o.node().get()));
    return out;
  }

 private:
  bool is_leaf(const ArrayNode& n) const {
    return inputs_.count(&n) || n.op == Op::Placeholder || n.data || n.error;
  }

  Array rebuild(const Array& a) {
    const ArrayNode& n = *a.node();
    if (is_leaf(n)) return a;
    bool merges = n.op == Op::Reshape && !View::reshape_is_view(n.inputs[0].shape(), n.shape);
    if (merges && movable(*n.inputs[0].node(), n)) return sink(n);
    std::vector<Array> in;
    bool changed = false;
    for (const Array& x : n.inputs) {
      in.push_back(map_.at(x.node().get()));
      changed = changed || !in.back().same(x);
    }
    return changed ? make_array(n.shape, n.dtype, n.op, n.params, in, n.stream) : a;
  }

  // Whether reshape `r` may move below `x`: x is an element-wise function read by r alone (else
  // it would be computed twice), on r's stream, of inputs of its own shape or 0-d ones.
  bool movable(const ArrayNode& x, const ArrayNode& r) const {
    bool elementwise =
        x.op == Op::Unary || x.op == Op::Binary || x.op == Op::Select || x.op == Op::Cast;
    if (is_leaf(x) || !elementwise || uses_.at(&x) != 1 || !same_stream(x, r)) return false;
    for (const Array& i : x.inputs)
      if (i.shape() != x.shape && i.ndim() != 0) return false;
    return true;
  }

  // r's value rebuilt with r applied to the arrays below the movable nodes under it (inputs
  // first, without recursion: chains of element-wise ops can be long).
  Array sink(const ArrayNode& r) {
    std::unordered_map<const ArrayNode*, Array> at_r;  // each node's value at r's shape
    std::vector<std::pair<const Array*, bool>> stack{{&r.inputs[0], false}};
    while (!stack.empty()) {
      auto [a, expanded] = stack.back();
      stack.pop_back();
      const ArrayNode& x = *a->node();
      if (at_r.count(&x)) continue;
      if (!movable(x, r)) {
        Array below = map_.at(&x);
        at_r.emplace(&x,
                     make_array(r.shape, below.dtype(), Op::Reshape, r.params, {below}, r.stream));
        continue;
      }
      if (!expanded) {
        stack.push_back({a, true});
        for (const Array& i : x.inputs)
          if (i.ndim() != 0) stack.push_back({&i, false});
        continue;
      }
      std::vector<Array> in;
      for (const Array& i : x.inputs)
        in.push_back(i.ndim() == 0 ? map_.at(i.node().get()) : at_r.at(i.node().get()));
      at_r.emplace(&x, make_array(r.shape, x.dtype, x.op, x.params, in, x.stream));
    }
    return at_r.at(r.inputs[0].node().get());
  }

  std::unordered_set<const ArrayNode*> inputs_;
  std::unordered_map<const ArrayNode*, int> uses_;
  std::unordered_map<const ArrayNode*, Array> map_;
};

}  // namespace

std::vector<Array> sink_reshapes(const std::vector<Array>& outputs,
                                 const std::vector<Array>& inputs) {
  return ReshapeSinker().run(outputs, inputs);
}

}  // namespace kiln

#include "compile/shapes.h"

#include <unordered_map>

#include "compile/graph_walk.h"
#include "compile/rules.h"
#include "graph/array_node.h"
#include "graph/ops.h"

namespace kiln {

std::vector<Array> replay_shapes(const std::vector<Array>& outputs,
                                 const std::vector<Array>& inputs, const std::vector<Shape>& shapes,
                                 std::vector<Array>& new_inputs) {
  std::unordered_map<const ArrayNode*, Array> map;
  new_inputs.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Array& a = inputs[i];
    Array ph = make_array(shapes[i], a.dtype(), Op::Placeholder, {}, {}, a.node()->stream);
    map.emplace(a.node().get(), ph);
    new_inputs.push_back(ph);
  }
  auto leaf = [&](const ArrayNode& n) { return n.data || map.count(&n); };
  for (const Array& a : topological_order(outputs, leaf)) {
    const ArrayNode& n = *a.node();
    if (map.count(&n)) continue;
    if (n.data) {
      map.emplace(&n, a);
      continue;
    }
    std::vector<Array> in;
    for (const Array& x : n.inputs) in.push_back(map.at(x.node().get()));
    map.emplace(&n, make_array(rules(n.op).shape(n, in), n.dtype, n.op, n.params, in, n.stream));
  }
  std::vector<Array> out;
  for (const Array& o : outputs) out.push_back(map.at(o.node().get()));
  return out;
}

}  // namespace kiln

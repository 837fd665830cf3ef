#include "compile/graph_walk.h"

#include "compile/node_table.h"
#include "graph/array_node.h"

namespace kiln {

std::vector<Array> topological_order(const std::vector<Array>& roots,
                                     const std::function<bool(const ArrayNode&)>& is_leaf) {
  std::vector<Array> order;
  NodeTable<char> seen(roots.size() * 4);
  std::vector<std::pair<const Array*, size_t>> stack;  // node, next input to visit
  for (const Array& r : roots) {
    if (!seen.insert(r.node().get())) continue;
    stack.push_back({&r, 0});
    while (!stack.empty()) {
      auto& [arr, next] = stack.back();
      const ArrayNode& node = *arr->node();
      if (!is_leaf(node) && next < node.inputs.size()) {
        const Array& in = node.inputs[next++];
        if (seen.insert(in.node().get())) stack.push_back({&in, 0});
        continue;
      }
      order.push_back(*arr);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace kiln

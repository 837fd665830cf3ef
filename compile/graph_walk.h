// Walking an array graph: the nodes that computing some arrays needs, inputs before users.
#pragma once

#include <functional>
#include <vector>

#include "graph/array.h"
#include "graph/array_node.h"

namespace kiln {

// Post-order (inputs first) over the nodes reachable from `roots`, not descending below nodes for
// which `is_leaf` is true (they are still visited). Iterative: long chains do not overflow.
std::vector<Array> topological_order(const std::vector<Array>& roots,
                                     const std::function<bool(const ArrayNode&)>& is_leaf);

}  // namespace kiln

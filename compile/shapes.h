// Shape replay for shapeless compile: rebuild a traced graph for new input shapes without
// running the user function again. Each node's shape is derived anew from how its op was asked
// for (flatten stays relative, a fixed reshape stays fixed); an op whose traced shape the new
// inputs contradict raises kiln::Error instead of computing with a stale shape.
#pragma once

#include <vector>

#include "graph/array.h"

namespace kiln {

// `inputs` are the trace's placeholders and `shapes` their new shapes; `new_inputs` receives the
// placeholders of the rebuilt graph, in the same order.
std::vector<Array> replay_shapes(const std::vector<Array>& outputs,
                                 const std::vector<Array>& inputs, const std::vector<Shape>& shapes,
                                 std::vector<Array>& new_inputs);

}  // namespace kiln

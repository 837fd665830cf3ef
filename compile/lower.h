// Lowering: an array graph to a Plan. Eager evaluation lowers with one kernel per primitive;
// compile lowers the traced graph the same way after its passes and fusion. There is one path
// from a graph to running code.
#pragma once

#include <vector>

#include "executor/plan.h"
#include "graph/array.h"

namespace kiln {

struct LowerOptions {
  // Eager: every node's stream is concrete (Explicit lanes). Traced: Default-origin nodes get
  // lanes resolved at call time, so device-dependent copies are decided by the executor.
  bool eager = true;
  // Fuse element-wise chains, reductions and their epilogues into shared kernels; off, every
  // primitive is its own kernel (eager evaluation).
  bool fuse = false;
  // Kernels take every extent, stride and offset at launch (shapeless compile).
  bool runtime_dims = false;
  // The last `state_inputs` of `stop` are captured state (CompileOptions::inputs): outputs may
  // be written into their buffers (Plan::donations()). Call arguments stay the caller's.
  size_t state_inputs = 0;
  // The graph's nodes inputs-first, when the caller has them already (eval does): saves a walk.
  const std::vector<Array>* order = nullptr;
};

struct LoweredGraph {
  Plan plan;
  std::vector<Array> inputs;  // bound to plan.inputs in order (evaluated arrays/placeholders)
};

// Lowers the graph computing `outputs`; nodes in `stop` (and, when eager, every evaluated node)
// become plan inputs.
LoweredGraph lower(const std::vector<Array>& outputs, const std::vector<Array>& stop,
                   const LowerOptions& options);

}  // namespace kiln

// Kernel emission: turns one planned fusion group (fusion_plan.h) into Kernel IR and the launch
// values it takes. The plan already decided every buffer, so emission walks each group once and
// cannot run into a node it is unable to compute; if it does, that is a planner bug (kiln::Error).
#pragma once

#include "compile/fuse.h"
#include "compile/fusion_plan.h"

namespace kiln {

// The kernel step of group `g` (not a Library group: those are library calls).
FusedStep emit_kernel(const FusionGroup& g, const NodeSet& materialized, const LeafFn& is_leaf,
                      bool runtime_dims);

}  // namespace kiln

// Fusion: which nodes of a graph are materialised into buffers, and the Kernel IR that computes
// them. Element-wise chains and trees, broadcasts, casts and views fold into one kernel; a
// reduction takes the element-wise work feeding it as its prologue and the element-wise work
// after it as its epilogue; outputs of one shape computed from one region share a kernel. Fusion
// stops at library ops (matmul, sort, scans, gathers, scatters), at lane boundaries and at a bound
// on kernel buffers. With fusion off every primitive is materialised: that is eager evaluation's
// one-kernel-per-op. The decisions are fusion_plan.h's, the Kernel IR kernel_emit.h's; this puts
// them together.
#pragma once

#include <memory>
#include <vector>

#include "backends/kernel_ir.h"
#include "compile/fusion_plan.h"
#include "executor/plan.h"
#include "graph/array.h"

namespace kiln {

// One step of the lowered graph, in dependency order: a kernel, or a library call (matmul or a
// native primitive).
struct FusedStep {
  std::shared_ptr<const Kernel> kernel;   // null for a library step
  std::vector<const ArrayNode*> buffers;  // per kernel buffer: the node whose data it reads/writes
  const ArrayNode* library = nullptr;     // the matmul or native node, for library steps
  std::vector<const ArrayNode*> reads;    // a library step's operands as read (matmul_operands.h)
  std::vector<bool> transposed;           // per read: it holds the operand's transpose
  const ArrayNode* lane_node = nullptr;   // every node of the step shares this node's lane
  std::vector<int64_t> params;            // launch params: runtime Dims and launch scalars
  std::shared_ptr<KernelBinaries> binaries;  // compiled forms, when the kernel is shared
};

// The steps computing `outputs`, ordered so every buffer a step reads is written earlier.
// Arguments as for plan_fusion (fusion_plan.h).
std::vector<FusedStep> fuse(const std::vector<Array>& order, const std::vector<Array>& outputs,
                            const LeafFn& is_leaf, const SameLaneFn& same_lane,
                            const FusionOptions& options);

}  // namespace kiln

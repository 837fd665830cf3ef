// Fusion: which nodes of a graph are materialised into buffers, and the Kernel IR that computes
// them. Element-wise chains and trees, broadcasts, casts and views fold into one kernel; a
// reduction takes the element-wise work feeding it as its prologue and the element-wise work
// after it as its epilogue; outputs of one shape computed from one region share a kernel. Fusion
// stops at library ops (matmul), at lane boundaries and at a bound on kernel buffers.
// With fusion off every primitive is materialised: that is eager evaluation's one-kernel-per-op.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backends/kernel_ir.h"
#include "graph/array.h"
#include "scheduler/plan.h"

namespace kiln {

struct FusionOptions {
  bool fuse = true;
  int max_buffers = 24;  // kernel arguments; beyond this, inputs are materialised first
  // Every extent, stride and offset a launch parameter (shapeless compile).
  bool runtime_dims = false;
};

// One step of the lowered graph, in dependency order: a kernel, or a library call (matmul).
struct FusedStep {
  std::shared_ptr<const Kernel> kernel;   // null for a matmul step
  std::vector<const ArrayNode*> buffers;  // per kernel buffer: the node whose data it reads/writes
  const ArrayNode* matmul = nullptr;      // the matmul node, for library steps
  const ArrayNode* lane_node = nullptr;   // every node of the step shares this node's lane
  std::vector<int64_t> params;            // launch params: runtime Dims and launch scalars
  std::shared_ptr<KernelBinaries> binaries;  // compiled forms, when the kernel is shared
};

// The value of a 0-d constant whose data the host can read (fusion passes it as a launch scalar).
std::optional<Scalar> host_scalar(const ArrayNode& n);
// Whether every element of `n` is 2: the one exponent `power` specialises (x*x, kernel_ir.h).
bool is_two(const ArrayNode& n);

// `order` lists the graph's nodes inputs-first (leaves included); `is_leaf` tells plan inputs;
// `same_lane` tells whether two nodes run on the same lane (fusion never crosses lanes).
std::vector<FusedStep> fuse(
    const std::vector<Array>& order, const std::vector<Array>& outputs,
    const std::function<bool(const ArrayNode&)>& is_leaf,
    const std::function<bool(const ArrayNode&, const ArrayNode&)>& same_lane,
    const FusionOptions& options);

}  // namespace kiln

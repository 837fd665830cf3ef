// Fusion planning: which nodes of a graph live in buffers and which kernel computes each of them,
// decided before any Kernel IR exists. The planner walks each candidate kernel's region the way
// the emitter (kernel_emit.h) will, counting the buffers it would load and finding the nodes it
// cannot compute inline; the emitter then builds every group exactly once and cannot fail.
#pragma once

#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

#include "compile/view.h"
#include "graph/array_node.h"

namespace kiln {

struct FusionOptions {
  bool fuse = true;
  int max_buffers = 24;  // buffers a kernel loads; beyond this, part of its region is stored first
  // Every extent, stride and offset a launch parameter (shapeless compile).
  bool runtime_dims = false;
  // Gathers read inside the kernels that read them (KILN_GATHER_FUSION=0 stores each first, as
  // a library call: the baseline bench_native compares with).
  bool inline_gathers = true;
};

using LeafFn = std::function<bool(const ArrayNode&)>;
using SameLaneFn = std::function<bool(const ArrayNode&, const ArrayNode&)>;
using NodeSet = std::unordered_set<const ArrayNode*>;

// One kernel (or library call) of the lowered graph and the nodes it stores.
struct FusionGroup {
  enum class Kind {
    Elementwise,  // roots: element-wise nodes of one shape computed in one pass
    Reduction,    // roots[0] ends the epilogue of `reduce` (roots[0] == reduce without one)
    Concatenate,  // input `piece` of roots[0] stored at its offset
    Library,      // roots[0] (matmul or a native primitive), through the backend's library call
    Primitive,    // fusion off: roots[0] alone, its kernel shared by structure (eager_kernels.h)
  };
  Kind kind = Kind::Elementwise;
  std::vector<const ArrayNode*> roots;
  const ArrayNode* reduce = nullptr;
  size_t piece = 0;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in graph order; fuse() orders the kernels by their buffers
  NodeSet materialized;             // computed nodes that live in buffers
};

// `order` lists the graph's nodes inputs-first (leaves included); `is_leaf` tells plan inputs;
// `same_lane` tells whether two nodes run on the same lane (fusion never crosses lanes).
FusionPlan plan_fusion(const std::vector<Array>& order, const std::vector<Array>& outputs,
                       const LeafFn& is_leaf, const SameLaneFn& same_lane,
                       const FusionOptions& options);

// The view at which a kernel computing `n` at view `v` reads input `i`; nullopt when it does not
// read that input through a view (power's specialised exponent 2, or a reshape that does not
// compose with `v`, which then reads a stored input by its row-major index).
std::optional<View> input_view(const ArrayNode& n, size_t i, const View& v);

// The value of a 0-d constant whose data the host can read (fusion passes it as a launch scalar).
std::optional<Scalar> host_scalar(const ArrayNode& n);
// Whether every element of `n` is 2: the one exponent `power` specialises (x*x, kernel_ir.h).
bool is_two(const ArrayNode& n);

}  // namespace kiln

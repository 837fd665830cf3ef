#include "compile/fuse.h"

#include <unordered_map>

#include "compile/eager_kernels.h"
#include "compile/kernel_emit.h"
#include "compile/matmul_operands.h"
#include "compile/row_fusion.h"

namespace kiln {

namespace {

// Steps in an order where every buffer a step reads is written by an earlier step.
std::vector<FusedStep> order_steps(std::vector<FusedStep> steps) {
  std::unordered_map<const ArrayNode*, std::vector<size_t>> writers;
  auto written = [](const FusedStep& s) {
    std::vector<const ArrayNode*> w;
    if (s.library)
      w.push_back(s.library);
    else
      for (size_t b = 0; b < s.buffers.size(); ++b)
        if (s.kernel->buffers[b].output) w.push_back(s.buffers[b]);
    return w;
  };
  auto read = [](const FusedStep& s) {
    std::vector<const ArrayNode*> r;
    if (s.library) {
      r = s.reads;
    } else {
      for (size_t b = 0; b < s.buffers.size(); ++b)
        if (!s.kernel->buffers[b].output) r.push_back(s.buffers[b]);
    }
    return r;
  };
  for (size_t i = 0; i < steps.size(); ++i)
    for (const ArrayNode* w : written(steps[i])) writers[w].push_back(i);
  std::vector<int> state(steps.size(), 0);
  std::vector<FusedStep> out;
  for (size_t root = 0; root < steps.size(); ++root) {
    if (state[root]) continue;
    // Iterative DFS: visit the writers of everything a step reads, then the step.
    std::vector<size_t> todo{root};
    while (!todo.empty()) {
      size_t s = todo.back();
      if (state[s] == 2) {
        todo.pop_back();
        continue;
      }
      if (state[s] == 0) {
        state[s] = 1;
        for (const ArrayNode* r : read(steps[s]))
          if (auto it = writers.find(r); it != writers.end())
            for (size_t w : it->second)
              if (state[w] == 0) todo.push_back(w);
        continue;
      }
      state[s] = 2;
      out.push_back(steps[s]);
      todo.pop_back();
    }
  }
  return out;
}

// Fusion off: one primitive's kernel, built once per structure (eager_kernels.h).
FusedStep primitive_step(const FusionGroup& g, const FusionPlan& plan, const LeafFn& is_leaf) {
  const ArrayNode& n = *g.roots[0];
  if (std::optional<FusedStep> s = cached_eager_step(n, plan.materialized)) return std::move(*s);
  FusedStep s = emit_kernel(g, plan.materialized, is_leaf, false);
  remember_eager_step(n, s, plan.materialized);
  return s;
}

}  // namespace

std::vector<FusedStep> fuse(const std::vector<Array>& order, const std::vector<Array>& outputs,
                            const LeafFn& is_leaf, const SameLaneFn& same_lane,
                            const FusionOptions& options) {
  FusionPlan plan = plan_fusion(order, outputs, is_leaf, same_lane, options);
  std::vector<FusedStep> steps;
  steps.reserve(plan.groups.size());
  for (const FusionGroup& g : plan.groups) {
    if (g.kind == FusionGroup::Kind::Library) {
      FusedStep s;
      s.library = s.lane_node = g.roots[0];
      for (size_t i = 0; i < s.library->inputs.size(); ++i) {
        MatmulOperand read = matmul_operand(*s.library, i, is_leaf);
        s.reads.push_back(read.node);
        s.transposed.push_back(read.transposed);
      }
      steps.push_back(std::move(s));
    } else if (g.kind == FusionGroup::Kind::Primitive) {
      steps.push_back(primitive_step(g, plan, is_leaf));
    } else {
      steps.push_back(emit_kernel(g, plan.materialized, is_leaf, options.runtime_dims));
    }
  }
  // Without fusion every step is one node, already in the graph's order.
  if (!options.fuse) return steps;
  if (!options.runtime_dims)
    steps = fuse_rows(std::move(steps), is_leaf, same_lane, options.max_buffers);
  return order_steps(std::move(steps));
}

}  // namespace kiln

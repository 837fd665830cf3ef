// Row fusion: reductions over the same rows that feed one another, and the element-wise kernel
// over those rows that reads their results (softmax: max, then sum(exp(x - max)), then
// exp(x - max) / sum), become one row kernel (kernel_ir.h, invariant 6). Its passes are the
// kernels fusion made, unchanged, so a backend may run them one after another (today's path) or
// walk each row once and run every pass while the row is in cache (the cpu backend).
#pragma once

#include <vector>

#include "compile/fuse.h"

namespace kiln {

// `steps` in plan order with chains of kernels over one domain joined into row kernels. Only
// kernels with constant dims join (a shapeless kernel keeps its passes apart). A chain is
// joined only where the row kernel is valid Kernel IR and no step outside the chain sits
// between its passes in the dependency order.
std::vector<FusedStep> fuse_rows(std::vector<FusedStep> steps, const LeafFn& is_leaf,
                                 const SameLaneFn& same_lane, int max_buffers);

// The row kernel of `chain` (kernel steps over one domain, in pass order), or nothing when
// the result would not be a valid row kernel.
std::optional<FusedStep> join_passes(const std::vector<const FusedStep*>& chain, int max_buffers);

}  // namespace kiln

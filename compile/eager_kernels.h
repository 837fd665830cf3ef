// Eager kernels by structure. With fusion off, a primitive's kernel is a pure function of its op,
// its dtypes and shapes and which inputs are launch scalars; the values travel as launch params.
// Eager loops therefore build each distinct kernel once: later evaluations take it (and its
// compiled binaries) from here and only gather the node's buffers and launch values.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "compile/fuse.h"
#include "graph/array_node.h"

namespace kiln {

// The step for `n` alone if an equal structure was emitted before; nullopt otherwise. `stored`:
// the nodes the plan stores (a stored count input is read from its buffer, not inlined).
std::optional<FusedStep> cached_eager_step(const ArrayNode& n, const NodeSet& stored);

// Offers a freshly emitted single-node step to the cache. It is kept only when its buffers and
// params can be re-derived from the node the way cached_eager_step does it (checked here), so a
// cached kernel can never be launched with arguments the emitter would not have given it.
void remember_eager_step(const ArrayNode& n, const FusedStep& step, const NodeSet& stored);

}  // namespace kiln

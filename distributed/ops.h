// Collectives and messages over a group (MLX's mlx.core.distributed names): lazy ops that add a
// node to the graph like any other, run by the group's communication lane when evaluated
// (distributed/engine.h), usable inside compile, the transforms and AOT artifacts. Each takes
// the group (default: init()) and a stream; on a device stream the data goes through host
// memory. In a one-rank group the collectives return their input.
#pragma once

#include <optional>

#include "distributed/group.h"
#include "graph/array.h"
#include "graph/device.h"

namespace kiln::distributed {

// Element-wise sum, maximum or minimum of x over the group's ranks (bool: or, or, and; max and
// min propagate NaN as maximum and minimum do).
Array all_sum(const Array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
Array all_max(const Array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
Array all_min(const Array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// Every rank's x concatenated along axis 0 in rank order (a 0-d x counts as shape (1)).
Array all_gather(const Array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// The sum over ranks of x, split along axis 0 into size() parts: this rank's part.
Array sum_scatter(const Array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// Sends x to rank dst; the result has x's value and must be evaluated for the message to go.
Array send(const Array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
// An array of `shape` and `dtype` sent by rank src.
Array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
Array recv_like(const Array& x, int src, std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});

}  // namespace kiln::distributed

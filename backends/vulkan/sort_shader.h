// The GLSL of Kiln's Vulkan sort and argsort (Op::Sort, Op::Argsort): a bitonic sort of
// (key, index) pairs, every row of the (outer, n, inner) input padded to a power of two and
// sorted in the same dispatches (backends/sort_passes.h). Four shaders share one layout:
// keys (each element's bits as an unsigned key in the reference's order: NaN last in both
// directions, -0 before +0 for sort and a tie for argsort, descending complemented), local
// (stages inside blocks of 2 * kSortLanes slots in shared memory), global (one compare-exchange
// step across the array) and out (the values, packed as the backend stores 8- and 16-bit types,
// or int64 indices as two words). Keys are one uint, or a uvec2 for 8-byte types, so neither
// shaderInt64 nor shaderFloat64 is needed. Invocations loop over the items past the grid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/dtype.h"

namespace kiln::vulkan {

enum class SortStage { Keys, Local, Global, Out };

// Push constants, in the shader's order. Bindings (or, by address, address[]): 0 the input,
// 1 the keys, 2 the indices, 3 the output.
struct SortPush {
  uint32_t n = 0, inner = 0, plog = 0, used = 0;  // used: rows * P slots
  uint32_t slots = 0, count = 0;                  // count: items the invocations loop over
  uint32_t total = 0;                             // output elements
  uint32_t total_order = 0, desc = 0, argsort = 0;
  uint32_t k0 = 0, k1 = 0, j0 = 0, steps = 1;  // as SortPass
  uint64_t address[4] = {0, 0, 0, 0};
};

constexpr int kSortLanes = 128;  // invocations per workgroup: the minimum every device allows

// Raises kiln::Error for a dtype outside the set.
std::string sort_glsl(Dtype d, SortStage stage, bool by_address);

}  // namespace kiln::vulkan

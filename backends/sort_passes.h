// The passes of a device bitonic sort of many rows at once (opencl/sort.h, the vulkan sort
// shaders): each row is padded to P, a power of two, with slots that sort last, and the rows
// lie end to end in one array of (key, index) pairs, so every pass covers all rows in one launch.
// Blocks of `block` slots (two per work-item of a work-group) are sorted and merged in local
// memory; a compare-exchange step wider than a block is a global pass over the whole array.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// Local: the stages k = k0, 2 k0, ..., k1 inside each block, the first from distance j0 down
// to 1 and the others from k / 2. Global: the step (k0, j0) across the array, and with
// steps = 2 the step (k0, j0 / 2) after it in the same pass (a work-item holds the four slots
// both steps touch), which halves the passes over memory.
struct SortPass {
  bool local = true;
  uint32_t k0 = 0, k1 = 0, j0 = 0;
  uint32_t steps = 1;
};

struct SortPlan {
  int64_t padded = 0;  // P: each row's slots, a power of two >= n
  int64_t slots = 0;   // the array: rows * P rounded up to whole blocks
  int64_t block = 0;
  std::vector<SortPass> passes;  // empty when P == 1 (nothing to exchange)
};

// The plan for `rows` rows of n elements with blocks of `block` slots (a power of two >= 2).
// Raises kiln::Error when the slots would not fit 32-bit indices (the kernels use them).
SortPlan plan_sort(int64_t rows, int64_t n, int64_t block);

}  // namespace kiln

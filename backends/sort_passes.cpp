#include "backends/sort_passes.h"

#include <algorithm>

#include "graph/error.h"

namespace kiln {

SortPlan plan_sort(int64_t rows, int64_t n, int64_t block) {
  if (block < 2 || (block & (block - 1)) != 0)
    throw_error("internal: sort block of ", block, " slots (must be a power of two >= 2)");
  SortPlan p;
  p.block = block;
  p.padded = 1;
  while (p.padded < n) p.padded *= 2;
  const int64_t limit = int64_t{1} << 31;
  if (n > limit || rows > limit / p.padded)
    throw_error("sort of ", rows, " rows of ", n, " elements needs ", rows, " x ", p.padded,
                " padded slots on the device, beyond its 32-bit indices (at most 2^31 slots)");
  p.slots = (rows * p.padded + block - 1) / block * block;
  if (p.padded == 1) return p;
  // Rows no longer than a block sort entirely in local memory; longer ones sort their blocks
  // there, then each stage k > block takes global steps down to j = block (two a pass while
  // both are wide) and finishes locally.
  auto first = static_cast<uint32_t>(std::min(p.padded, block));
  p.passes.push_back({true, 2, first, 1});
  for (int64_t k = 2 * block; k <= p.padded; k *= 2) {
    for (int64_t j = k / 2; j >= block;) {
      const uint32_t steps = j / 2 >= block ? 2 : 1;
      p.passes.push_back({false, static_cast<uint32_t>(k), static_cast<uint32_t>(k),
                          static_cast<uint32_t>(j), steps});
      j >>= steps;
    }
    p.passes.push_back({true, static_cast<uint32_t>(k), static_cast<uint32_t>(k),
                        static_cast<uint32_t>(block / 2)});
  }
  return p;
}

}  // namespace kiln

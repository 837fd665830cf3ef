// Parallel full reductions. A kernel that reduces everything (no kept axes) has one output
// point, so chunking the kept domain cannot spread it over threads; one core reads only ~8 of
// the ~16 GB/s two cores read on this machine. Such a kernel (one constant reduced axis after
// backends/canonical.h merging, sum/prod/max/min, at least kMinElements long) is rewritten into
//   part:    domain [kParts (kept), M (reduced)] writing kParts partial results to a scratch
//            buffer (float sums/products as float64 partials, so nothing is rounded early),
//   tail:    the same over the N - kParts*M leftover elements (partial kParts),
//   combine: domain [kParts + 1 (reduced)] reducing the partials in order, then the original
//            epilogue and stores.
// kParts is fixed (not the thread count), so results do not depend on the machine. Argmax stays
// single-threaded (its partials would need a value and a position).
#pragma once

#include <cstdint>
#include <optional>

#include "backends/kernel_ir.h"

namespace kiln::cpu {

struct SplitReduce {
  static constexpr int64_t kParts = 16;
  static constexpr int64_t kMinElements = int64_t{1} << 20;
  Kernel part, combine;
  std::optional<Kernel> tail;
  Dtype partial_dtype;  // of the scratch buffer (appended after the kernel's buffers)
};

// The split form of `canonical` (a merge_axes() result), or nothing when it does not apply.
std::optional<SplitReduce> split_full_reduction(const Kernel& canonical);

}  // namespace kiln::cpu

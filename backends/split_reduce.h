// Reductions on many workers, shared by the cpu and vulkan backends. A kernel that reduces
// everything (no kept axes) has one output point: one thread of the cpu backend, one workgroup
// (one core of lavapipe, one compute unit of a GPU) on vulkan. A row of millions of elements is
// one workgroup's loop on vulkan, which lavapipe cuts short (its shaders stop every loop after
// 65535 iterations). Such a kernel (kept axes K..., one constant reduced axis of N after axis
// merging, sum/prod/max/min, constant maps) is rewritten into
//   part:    domain [K..., parts (kept), M (reduced)] writing K x parts partial results to a
//            scratch buffer appended after the kernel's buffers,
//   tail:    the same over the N - parts*M leftover elements (partial number `parts`),
//   combine: domain [K..., parts (+1) (reduced)] reducing the partials in order, then the
//            original epilogue and stores.
// Float sums and products keep float64 partials where the backend has float64 (nothing rounded
// early), 16-bit max/min float32 ones (their value is float32 until the final store). The part
// count depends only on the kernel and per-backend constants (not the thread count), so results
// do not depend on the machine. Argmax is not split (its partials would need a value and a
// position).
#pragma once

#include <cstdint>
#include <optional>

#include "backends/kernel_ir.h"

namespace kiln {

struct SplitOptions {  // defaults: the cpu backend's
  int64_t parts = 16;
  int64_t min_elements = int64_t{1} << 20;
  bool float64_partials = true;  // false: float sums keep their own type (no float64 device)
  // At most this many elements per part: longer reductions get more parts (0: no limit).
  int64_t max_part = 0;
};

struct SplitReduce {
  Kernel part, combine;
  std::optional<Kernel> tail;
  Dtype partial_dtype;   // of the scratch buffer
  int64_t partials = 0;  // scratch elements
};

// The split form of `flat` (a kernel whose axes were merged: canonical.h's merge_axes or the
// vulkan backend's flatten_domain) when it reduces everything, or nothing when it does not apply.
std::optional<SplitReduce> split_full_reduction(const Kernel& flat, const SplitOptions& opt);

// The same for a kernel with kept axes whose rows are longer than opt.max_part (rows of at
// least opt.min_elements); nothing when it does not apply.
std::optional<SplitReduce> split_long_rows(const Kernel& flat, const SplitOptions& opt);

}  // namespace kiln

// Full reductions on many workgroups. A kernel reducing everything has one output point, hence
// one workgroup: one core of lavapipe, one compute unit of a GPU. Such a kernel (one constant
// reduced axis after flatten_domain, sum/prod/max/min, at least kMinElements long) runs as
//   part:    domain [kParts (kept), n / kParts (reduced)] writing kParts partials to a scratch
//            buffer appended after the kernel's buffers (float sums and products as float64
//            partials where the device has shaderFloat64, else float32);
//   tail:    the n mod kParts leftover elements into partial kParts;
//   combine: the partials reduced in order, then the original epilogue and stores.
// kParts is fixed, so results do not depend on the device. Argmax is not split (its partials
// would need a value and a position).
#pragma once

#include <cstdint>
#include <optional>

#include "backends/kernel_ir.h"

namespace kiln::vulkan {

struct SplitReduce {
  static constexpr int64_t kParts = 64;
  static constexpr int64_t kMinElements = int64_t{1} << 16;
  Kernel part, combine;
  std::optional<Kernel> tail;
  Dtype partial = float32;
  int64_t partials = 0;  // scratch elements
};

// The split form of a flatten_domain() result, or nothing when it does not apply.
std::optional<SplitReduce> split_full_reduction(const Kernel& flat, bool has_float64);

}  // namespace kiln::vulkan

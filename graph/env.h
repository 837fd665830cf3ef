// Settings read from the environment: a whole number that Kiln takes as a size or a count
// (KILN_CPU_POOL_BYTES, KILN_OPENCL_POOL_BYTES, KILN_VULKAN_POOL_BYTES, KILN_NONTEMPORAL_BYTES).
// A value that is not one raises kiln::Error naming the variable and what it holds, instead of
// reading as 0 and silently turning a feature off.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln {

// The value of `name` as a whole number >= 0; nullopt when unset or empty. Raises kiln::Error
// for anything else (signs, units, trailing text, values past 2^62), saying `what` it sets.
std::optional<uint64_t> env_count(const char* name, const char* what);

}  // namespace kiln

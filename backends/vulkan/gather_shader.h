// The GLSL of Kiln's Vulkan gather (Op::Gather: take, take_along_axis, fancy indexing): each
// invocation writes one 32-bit word of the (outer, m, inner) output, reading each element's
// int64 index (as two 32-bit words, so no shaderInt64 is needed), applying the index rule
// (NativeArgs: negative from the end, clamped to [0, n - 1]) and copying the element's bits.
// A gather computes nothing, so one shader per element size serves every dtype: 8-bit and
// 16-bit types are packed 4 or 2 to a word as the backend stores them (an invocation owns its
// output word, so no atomics; the last word keeps the bytes past the output), 4-byte types are
// one uint, 8-byte types one uvec2 (float64 needs no shaderFloat64). Invocations loop over the
// words past the grid. Sizes and, in the by-address form, the buffers' device addresses are
// push constants (GatherPush).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::vulkan {

// Push constants, in the shader's order. Every extent fits 32 bits: the backend binds no buffer
// past 2^31 bytes.
struct GatherPush {
  uint32_t outer = 0, n = 0, inner = 0, m = 0;
  uint32_t total = 0;  // output elements
  uint32_t words = 0;  // output words the invocations write
  uint32_t shared_index = 0, pad = 0;
  uint64_t address[3] = {0, 0, 0};  // a, indices, out: the by-address form only
};

constexpr int kGatherLanes = 64;  // invocations per workgroup

// Elements of `element_bytes` (1, 2, 4 or 8) per word an invocation writes (4, 2, 1, 1).
inline int64_t gather_elements_per_word(size_t element_bytes) {
  return element_bytes < 4 ? static_cast<int64_t>(4 / element_bytes) : 1;
}

// `by_address`: the buffers are reached through their device addresses (beyond
// maxStorageBufferRange) and none is bound; else a, indices and out are bindings 0, 1, 2.
// Raises kiln::Error for an element size other than 1, 2, 4 or 8.
std::string gather_glsl(size_t element_bytes, bool by_address);

// GLSL of `uint <name>(uint g)`: the position in the (outer, n, inner) operand of element g of
// the (outer, m, inner) side, its int64 index read as (low, high) words from buffer `indices`
// and put through the index rule. The gather reads from it; scatter_add adds into it.
std::string indexed_position_glsl(const char* name, const char* indices);

}  // namespace kiln::vulkan

// The GLSL of Kiln's Vulkan scatter_add (Op::ScatterAdd: scatter_add, scatter_add_along_axis,
// at[].add), O(n + m) where the Kernel IR lowering (native_kernels.h) is O(n m): the base is
// copied to the output (vkCmdCopyBuffer), then one invocation per update reads its int64 index
// (two 32-bit words), applies the index rule (NativeArgs: negative from the end, clamped to
// [0, n - 1]) and adds the update into its slot with an atomic: atomicAdd for 32-bit integers,
// GL_EXT_shader_atomic_int64 for 64-bit ones (shaderBufferInt64Atomics), a compare-and-swap loop
// on the bits for floats (float64 also needs shaderFloat64). 8- and 16-bit types and bool, packed
// 4 or 2 to a word as the backend stores them, accumulate in a 32-bit temporary instead (uint;
// float bits for float16/bfloat16; atomicOr for bool): a widening pass fills it from the base
// and a rounding pass packs it into the output once at the end (an invocation owns an output
// word; the last keeps the bytes past the output), as the reference rounds. Invocations loop
// over the elements past the grid. Sizes and, in the by-address form, the buffers' device
// addresses are push constants (ScatterPush).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/vulkan/float_controls.h"
#include "graph/dtype.h"

namespace kiln::vulkan {

// Push constants, in the shader's order. Every extent fits 32 bits: the backend binds no buffer
// past 2^31 bytes.
struct ScatterPush {
  uint32_t outer = 0, n = 0, inner = 0, m = 0;
  uint32_t count = 0;  // updates (the add pass) or output elements (widen, narrow)
  uint32_t words = 0;  // what the invocations step over: updates, elements or output words
  uint32_t shared_index = 0, pad = 0;
  // The by-address form only, the pass's buffers in binding order.
  uint64_t address[3] = {0, 0, 0};
};

enum class ScatterPass {
  Widen,   // bindings: base (packed), temporary
  Add,     // bindings: indices, updates, accumulator (the output or the temporary)
  Narrow,  // bindings: temporary, output (packed)
};

// The float controls a device offers (PhysicalInfo keep_*): the add pass asks for them, so that
// NaN, infinities, signed zeros and denormals add as the reference's do on a driver that would
// otherwise assume them away or flush denormals.
using ScatterFloatModes = FloatModes;

// Whether dtype d accumulates in a 32-bit temporary (8- and 16-bit types and bool).
inline bool scatter_add_is_wide(Dtype d) { return d.size() < 4; }

// Storage buffers a pass binds.
inline int scatter_bindings(ScatterPass p) { return p == ScatterPass::Add ? 3 : 2; }

// The shader of one pass for dtype d. `by_address`: the buffers are reached through their
// device addresses and none is bound.
std::string scatter_glsl(Dtype d, ScatterPass pass, bool by_address,
                         const ScatterFloatModes& modes = {});

}  // namespace kiln::vulkan

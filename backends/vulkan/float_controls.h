// The SPIR-V float-controls execution modes a generated shader asks for (SPV_KHR_float_controls
// through GL_EXT_spirv_intrinsics), so the reference's NaN, infinities, signed zeros and
// denormals hold on drivers that would otherwise assume them away. One emitter for every shader.
#pragma once

#include <ostream>

namespace kiln::vulkan {

// Which modes to ask for, by float width: SignedZeroInfNanPreserve (keep_nan) and
// DenormPreserve (keep_denorm).
struct FloatModes {
  bool keep_nan32 = false, keep_denorm32 = false, keep_nan64 = false, keep_denorm64 = false;
};

// Writes the extension line and one spirv_execution_mode per mode that is on (32-bit modes
// first); nothing when none is.
void emit_float_controls(std::ostream& os, const FloatModes& m);

}  // namespace kiln::vulkan

#include "backends/vulkan/float_controls.h"

namespace kiln::vulkan {

void emit_float_controls(std::ostream& os, const FloatModes& m) {
  struct Mode {
    bool on;
    int capability, mode, width;
  };
  // SignedZeroInfNanPreserve: capability 4466, mode 4461; DenormPreserve: 4464, 4459.
  const Mode modes[] = {{m.keep_nan32, 4466, 4461, 32},
                        {m.keep_denorm32, 4464, 4459, 32},
                        {m.keep_nan64, 4466, 4461, 64},
                        {m.keep_denorm64, 4464, 4459, 64}};
  bool any = false;
  for (const Mode& x : modes) any = any || x.on;
  if (!any) return;
  os << "#extension GL_EXT_spirv_intrinsics : require\n";
  for (const Mode& x : modes)
    if (x.on)
      os << "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = ["
         << x.capability << "], " << x.mode << ", " << x.width << ");\n";
}

}  // namespace kiln::vulkan

// The GLSL helper functions every generated Vulkan shader starts with: 16-bit float conversions
// (round to nearest even, written out because packHalf2x16's rounding is unspecified), integer
// power, counter-based random bits, erf, and float64 exp/log/sin/cos/tanh/erf/pow (GLSL has
// no double-precision transcendentals). Only the parts the device supports are included.
#pragma once

#include <string>

namespace kiln::vulkan {

std::string glsl_prelude(bool float64, bool int64);

}  // namespace kiln::vulkan

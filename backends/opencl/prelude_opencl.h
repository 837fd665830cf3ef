// The OpenCL C helper functions every generated program starts with: 16-bit float conversions
// (graph/float16.h's rounding in integer code), counter-based random bits, erf as a rational fit
// (scalar and 16-lane), and integer power.
#pragma once

#include <string>

namespace kiln::opencl {

const std::string& opencl_prelude();
// kiln_erf4: the prelude's erf over float4 lanes, for a GPU's float4 element-wise kernels.
const std::string& opencl_erf4();

}  // namespace kiln::opencl

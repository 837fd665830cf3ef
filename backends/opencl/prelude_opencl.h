// The OpenCL C helper functions every generated program starts with: 16-bit float conversions
// (graph/float16.h's rounding in integer code), counter-based random bits, erf as a rational fit
// (scalar and 16-lane), and integer power.
#pragma once

namespace kiln::opencl {

const char* opencl_prelude();

}  // namespace kiln::opencl

// The OpenCL C API as the opencl backend uses it: OpenCL 1.2 entry points only (PoCL 3.1 and
// every GPU vendor's driver provide them), plus checked-call helpers that turn a failing
// cl_int into a kiln::Error naming the call and the error code.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

namespace kiln::opencl {

// "CL_OUT_OF_RESOURCES (-5)" for an error code.
std::string cl_error_name(cl_int err);

// Throws kiln::Error "opencl: <what> failed: <error>" unless err is CL_SUCCESS.
void cl_check(cl_int err, const char* what);

// String and scalar device queries.
std::string device_string(cl_device_id d, cl_device_info what);
std::string platform_string(cl_platform_id p, cl_platform_info what);
// The compiler's log of the last build of `p` on `d` ("" when there is none).
std::string program_build_log(cl_device_id d, cl_program p);
template <typename T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  cl_check(clGetDeviceInfo(d, what, sizeof v, &v, nullptr), "clGetDeviceInfo");
  return v;
}

}  // namespace kiln::opencl

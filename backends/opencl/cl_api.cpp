#include "backends/opencl/cl_api.h"

#include <vector>

#include "graph/error.h"

namespace kiln::opencl {

std::string cl_error_name(cl_int err) {
  const char* name = "unknown error";
  switch (err) {
    case CL_DEVICE_NOT_FOUND: name = "CL_DEVICE_NOT_FOUND"; break;
    case CL_DEVICE_NOT_AVAILABLE: name = "CL_DEVICE_NOT_AVAILABLE"; break;
    case CL_COMPILER_NOT_AVAILABLE: name = "CL_COMPILER_NOT_AVAILABLE"; break;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: name = "CL_MEM_OBJECT_ALLOCATION_FAILURE"; break;
    case CL_OUT_OF_RESOURCES: name = "CL_OUT_OF_RESOURCES"; break;
    case CL_OUT_OF_HOST_MEMORY: name = "CL_OUT_OF_HOST_MEMORY"; break;
    case CL_BUILD_PROGRAM_FAILURE: name = "CL_BUILD_PROGRAM_FAILURE"; break;
    case CL_INVALID_VALUE: name = "CL_INVALID_VALUE"; break;
    case CL_INVALID_DEVICE: name = "CL_INVALID_DEVICE"; break;
    case CL_INVALID_BINARY: name = "CL_INVALID_BINARY"; break;
    case CL_INVALID_BUILD_OPTIONS: name = "CL_INVALID_BUILD_OPTIONS"; break;
    case CL_INVALID_PROGRAM_EXECUTABLE: name = "CL_INVALID_PROGRAM_EXECUTABLE"; break;
    case CL_INVALID_KERNEL_NAME: name = "CL_INVALID_KERNEL_NAME"; break;
    case CL_INVALID_KERNEL_ARGS: name = "CL_INVALID_KERNEL_ARGS"; break;
    case CL_INVALID_ARG_INDEX: name = "CL_INVALID_ARG_INDEX"; break;
    case CL_INVALID_ARG_VALUE: name = "CL_INVALID_ARG_VALUE"; break;
    case CL_INVALID_ARG_SIZE: name = "CL_INVALID_ARG_SIZE"; break;
    case CL_INVALID_WORK_GROUP_SIZE: name = "CL_INVALID_WORK_GROUP_SIZE"; break;
    case CL_INVALID_BUFFER_SIZE: name = "CL_INVALID_BUFFER_SIZE"; break;
    case CL_INVALID_MEM_OBJECT: name = "CL_INVALID_MEM_OBJECT"; break;
    case CL_INVALID_CONTEXT: name = "CL_INVALID_CONTEXT"; break;
    case CL_INVALID_COMMAND_QUEUE: name = "CL_INVALID_COMMAND_QUEUE"; break;
    case CL_INVALID_EVENT: name = "CL_INVALID_EVENT"; break;
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR (no ICD)"; break;
    default: break;
  }
  return std::string(name) + " (" + std::to_string(err) + ")";
}

void cl_check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) throw_error("opencl: ", what, " failed: ", cl_error_name(err));
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  cl_check(clGetDeviceInfo(d, what, 0, nullptr, &n), "clGetDeviceInfo");
  std::vector<char> s(n + 1, '\0');
  cl_check(clGetDeviceInfo(d, what, n, s.data(), nullptr), "clGetDeviceInfo");
  return std::string(s.data());
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  cl_check(clGetPlatformInfo(p, what, 0, nullptr, &n), "clGetPlatformInfo");
  std::vector<char> s(n + 1, '\0');
  cl_check(clGetPlatformInfo(p, what, n, s.data(), nullptr), "clGetPlatformInfo");
  return std::string(s.data());
}

std::string program_build_log(cl_device_id d, cl_program p) {
  size_t n = 0;
  if (clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::vector<char> log(n + 1, '\0');
  if (clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr) != CL_SUCCESS)
    return "";
  // Drivers pad the log with whitespace (PoCL returns "\n" for a clean build).
  std::string s(log.data());
  size_t end = s.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? "" : s.substr(0, end + 1);
}

}  // namespace kiln::opencl

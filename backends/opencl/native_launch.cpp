#include "backends/opencl/native_launch.h"

#include <algorithm>

#include "graph/error.h"

namespace kiln::opencl {

cl_mem mem_on(ClDevice& dev, Buffer* b, const NativeArgs& a) {
  auto* cb = dynamic_cast<ClBuffer*>(b);
  if (!cb || &cb->cl_device() != &dev)
    throw_error("opencl: ", native_name(a), " got a buffer that is not on ", dev.label(),
                " (the plan must copy it there first)");
  return cb->mem();
}

cl_kernel make_kernel(cl_program p, const char* name, const char* what) {
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, name, &err);
  if (err != CL_SUCCESS) cl_check(err, (std::string("clCreateKernel (") + what + ")").c_str());
  return k;
}

namespace detail {

void set_arg(cl_kernel k, cl_uint i, size_t size, const void* value, const char* what) {
  cl_int err = clSetKernelArg(k, i, size, value);
  if (err != CL_SUCCESS) cl_check(err, (std::string("clSetKernelArg (") + what + ")").c_str());
}

void enqueue(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_event* ev,
             const char* what) {
  cl_int err =
      clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, local ? &local : nullptr, 0, nullptr, ev);
  if (err != CL_SUCCESS)
    cl_check(err, (std::string("clEnqueueNDRangeKernel (") + what + ")").c_str());
}

}  // namespace detail

size_t chunked_grid(const ClDevice& dev, size_t local, int64_t total, cl_long& chunk) {
  auto l = static_cast<int64_t>(local);
  int64_t groups = (total + l - 1) / l;
  if (dev.cpu) groups = std::min<int64_t>(groups, int64_t{4} * dev.compute_units);
  chunk = (total + groups * l - 1) / (groups * l);
  return static_cast<size_t>(groups * l);
}

}  // namespace kiln::opencl

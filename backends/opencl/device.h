// OpenCL devices as Kiln sees them: every device of every platform the ICD loader reports,
// numbered opencl:0, opencl:1, ... in platform order, each with what `kiln devices` prints and,
// when it cannot be used, why (OpenCL older than 1.2, no compiler, a probe kernel that does not
// build). Discovered when the opencl backend is first used (backends/registry.h), so a process
// that never uses OpenCL never loads the ICD's driver. A usable device owns its context and a
// transfer queue for blocking Buffer reads and writes. KILN_OPENCL_HIDE_FP64=1 hides cl_khr_fp64
// (to test the no-fp64 path on PoCL); KILN_OPENCL_GPU_LAYOUT=1 makes a CPU device take the GPU code
// layout (codegen.h DeviceCaps).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/opencl/cl_api.h"
#include "backends/opencl/codegen.h"

namespace kiln::opencl {

struct ClDevice {
  int index = 0;
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name, vendor, driver, version, platform_name, platform_version;
  cl_uint compute_units = 1;
  cl_ulong memory = 0, max_alloc = 0, cache = 0;  // cache: CL_DEVICE_GLOBAL_MEM_CACHE_SIZE
  size_t max_work_group = 1;
  bool fp64 = false, int64 = false, correct_divide_sqrt = false, cpu = false;
  bool available = false;
  std::string reason;
  cl_context context = nullptr;
  cl_command_queue transfer = nullptr;  // blocking reads/writes of Buffer::read/write
  std::mutex transfer_mu;

  ClDevice() = default;
  ClDevice(const ClDevice&) = delete;
  ClDevice& operator=(const ClDevice&) = delete;
  ~ClDevice();

  DeviceCaps caps() const { return {fp64, int64, cpu}; }
  std::string label() const;        // "opencl:0 (pthread-skylake-avx512)"
  std::string description() const;  // the `kiln devices` line
  std::string build_options() const;
  // Everything a built binary depends on besides its source (the program cache's key).
  std::string identity() const;
};

// All devices; when there is none (no ICD, no platform) one unavailable entry saying why.
std::vector<std::unique_ptr<ClDevice>> discover();

// The work-group size Kiln launches `kernel` with on `dev`: the largest power of two within the
// kernel's limit, the device's and 256 (which bounds the __local arrays of a reduction, 256 * 20
// bytes).
size_t local_size(const ClDevice& dev, cl_kernel kernel);

}  // namespace kiln::opencl

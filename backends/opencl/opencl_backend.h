// The `opencl` backend: Kernel IR compiled to OpenCL C 1.2 (codegen.h) for every device the ICD
// loader reports (device.h; PoCL on this machine, any GPU vendor's driver elsewhere), built
// programs cached on disk (program_cache.h), device memory from a pool per device (memory.h).
// Each lane gets its own in-order cl_command_queue; enqueued work returns an Event completed by
// an OpenCL event callback, so the executor's async path waits without blocking a thread.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace kiln {

std::shared_ptr<Backend> make_opencl_backend();

namespace opencl {
// Counters for tests: programs built from source, loaded from the disk cache, and kernels
// found in the in-memory cache, since the process started.
struct BuildStats {
  int64_t built = 0, from_disk = 0, memory_hits = 0;
};
BuildStats build_stats();
}  // namespace opencl

}  // namespace kiln

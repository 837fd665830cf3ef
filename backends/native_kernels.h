// Native primitives (NativeArgs) as plain Kernel IR, for backends that have no kernel of their
// own for one (on opencl and vulkan today: scatter_add of a 64-bit type on a device without
// 64-bit atomics; gathers, scatter_add, sorts and scans have kernels of their own there:
// backends/opencl/gather.h, scatter.h, sort.h and scan.h, backends/vulkan/gather_shader.h,
// scatter_shader.h, sort_shader.h and scan_shader.h; the other lowerings stay for other
// backends and tests): each becomes one or two reductions over a pair of positions, so it runs
// on the device it was asked for with the kernels every backend already compiles. The cost is
// O(n^2) work per row for sort and scans and O(n m) for gathers and scatters, where dedicated
// kernels would be O(n log n) and O(n): correct everywhere, fast on none. The backend's own
// cache keeps the compiled kernels.
#pragma once

#include "backends/backend.h"

namespace kiln {

// Compiles (through `backend`'s cache) and enqueues on `queue` the kernels computing `args`, with
// the temporaries they need; returns the event of the last one (the queue is in order), which
// keeps the temporaries alive until it completes.
EventPtr enqueue_native_as_kernels(Backend& backend, int device, Queue& queue,
                                   const NativeArgs& args);

// The kernels alone, for tests: each with the buffers it binds (>= 0: args.buffers[i]; < 0:
// temporary -1 - i, of temp_bytes[-1 - i] bytes).
struct NativeKernels {
  std::vector<Kernel> kernels;
  std::vector<std::vector<int>> bindings;
  std::vector<size_t> temp_bytes;
  bool copy = false;  // nothing to compute: out = a (a scatter of no updates)
};
NativeKernels native_kernels(const NativeArgs& args);

}  // namespace kiln

// Running a row kernel (kernel_ir.h, invariant 6) as its passes, one kernel after another on
// the same queue: what the executor does for a backend that does not take row kernels
// (Backend::runs_row_kernels: reference, opencl, vulkan, plugins), and the cpu backend for rows
// too long to stay in its cache. Each pass is compiled by the backend's ordinary path (its
// splits, its limits), and the queue's order carries each pass's stores to the next.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace kiln {

struct PassKernels : CompiledKernel {
  std::vector<std::shared_ptr<const CompiledKernel>> passes;  // pass_kernel(i), compiled
};

using CompileOne = std::function<std::shared_ptr<const CompiledKernel>(const Kernel&)>;
using EnqueueOne = std::function<EventPtr(const CompiledKernel&, const KernelArgs&)>;

// Every pass of row kernel `k` compiled by `compile_one` (k was validated).
std::shared_ptr<const CompiledKernel> compile_passes(const Kernel& k,
                                                     const CompileOne& compile_one);

// `k` as passes, or null when it is a kernel of another kind.
const PassKernels* as_passes(const CompiledKernel& k);

// Enqueues each pass with the row kernel's arguments (every pass has its buffers); returns the
// last pass's event (the queue is in order, so it completes after the others).
EventPtr enqueue_passes(const PassKernels& k, const KernelArgs& args, const EnqueueOne& enqueue);

}  // namespace kiln

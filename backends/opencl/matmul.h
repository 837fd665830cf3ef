// matmul on OpenCL: C[b] = A[b] @ B[b] for every batch, row-major. float32 and float64 go to
// CLBlast's batched GEMM when Kiln is built with it (libclblast-dev; accumulates in the dtype,
// so float32 results differ from the reference's double sums within rtol ~k * 2^-24). Other
// dtypes run a plain kernel with the reference's semantics (16-bit floats widened to float32
// and rounded at the store, integers wrapping, float sums in double where the device has fp64),
// one work-item per output element: correct on every device, not fast.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/memory.h"

namespace kiln::opencl {

// What `kiln devices` says about matmul on opencl.
std::string matmul_libraries();

// Whether enqueue_matmul may block the calling thread: CLBlast's batched GEMM writes its
// per-batch arguments with blocking transfers on `q`, which wait for every command before them
// (host_gate.h keeps such a call from waiting for host work). The plain kernel never blocks.
bool matmul_may_block(const ClDevice& dev, const MatmulArgs& a);

// Enqueues the matmul on `q`; returns its event (null when there is nothing to do). `keep`
// receives what must live until it completes.
cl_event enqueue_matmul(ClDevice& dev, ClPool& pool, cl_command_queue q, const MatmulArgs& a,
                        std::vector<std::shared_ptr<void>>& keep);

}  // namespace kiln::opencl

// The `cpu` backend: Kernel IR compiled to native code by LLVM 15's ORC JIT (codegen.h,
// jit.h), run in parallel chunks on oneTBB (execute.h), matmul through oneDNN and OpenBLAS
// (matmul.h), buffers from a reusing host-memory pool (buffer_pool.h). One device, cpu:0; queues
// run inline.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace kiln {

std::shared_ptr<Backend> make_cpu_backend();

}  // namespace kiln

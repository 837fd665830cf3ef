// Running a compiled kernel on the host: the launch splits the flattened kept domain into
// chunks run by oneTBB. Small launches (under ~64K element steps) run on the calling thread, so
// eager scalar work pays no scheduling cost. A full reduction (no kept axes) has a single kept
// point; large ones are rewritten into parallel partials first (split_reduce.h), small ones and
// argmax run on one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/jit.h"
#include "backends/kernel_ir.h"

namespace kiln::cpu {

struct Launch {
  KernelFn fn = nullptr;
  std::vector<Dim> domain;  // of the canonical kernel
  int kept = 0;
};

void run_launch(const Launch& l, void* const* buffers, const int64_t* params);

}  // namespace kiln::cpu

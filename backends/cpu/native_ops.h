// The cpu backend's native primitives (NativeArgs, backends/backend.h): stable LSD radix sorts
// on order-preserving integer keys, scans in parallel chunks (a vector scan inside each), and
// gathers and scatters that move raw element bits. All run on the TBB arena, as kernels do.
#pragma once

#include "backends/backend.h"

namespace kiln::cpu {

void run_native(const NativeArgs& args);

}  // namespace kiln::cpu

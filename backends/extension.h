// What a backend author includes, beside kiln.h (which is the user API and has none of this):
// the Backend interface with its buffers, queues and events, Kernel IR and its validation
// (launch checks included), Kiln's scalar semantics, and register_backend. The built-in backends
// (reference, cpu) are written against exactly this and register through the same register_backend
// call.
#pragma once

#include "backends/backend.h"
#include "backends/kernel_ir.h"
#include "backends/launch_check.h"
#include "backends/registry.h"
#include "backends/scalar_ops.h"
#include "graph/buffer.h"

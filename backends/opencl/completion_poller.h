// Completion of OpenCL events on GPU devices, found by polling from one thread. NVIDIA's driver
// (580) runs clSetEventCallback callbacks up to ~10-16 ms after a kernel that was still running
// when the callback was set has ended, which made every waited-for call that long; a CPU device
// (PoCL) keeps the driver's callbacks, since polling there would take a core from its kernels.
#pragma once

#include <CL/cl.h>

#include <functional>

namespace kiln::opencl {

// Calls `done` with the event's final execution status (CL_COMPLETE, or a negative error) once
// the event has ended. The event is retained until then. Thread-safe.
void watch_completion(cl_event event, std::function<void(cl_int status)> done);

}  // namespace kiln::opencl

// Which backends exist, which of their devices are usable (and why not), and runtime selection.
// Built-in backends (cpu, reference) register through register_backend exactly as a plugin does;
// opencl and vulkan are listed as missing until they are built. Backend authors reach this
// through backends/extension.h; users see only devices() (backends/devices.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/devices.h"

namespace kiln {

// The backend serving `d`; raises kiln::Error naming the valid devices when `d` is unknown or
// its backend/device is unusable (with the backend's reason).
Backend& backend_for(const Device& d);

// Adds a backend at run time: the built-ins, a plugin, or a test double. Its name must be new;
// its devices are enumerated once, here (an exception there marks the backend unavailable).
void register_backend(std::shared_ptr<Backend> backend);

}  // namespace kiln

// Which backends exist, which of their devices are usable (and why not), and runtime selection.
// The built-in backends are cpu, opencl, vulkan and reference; register_backend adds plugins.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kiln {

// Every known backend's devices, available or not, with the reason when not.
std::vector<DeviceInfo> devices();

// The backend serving `d`; raises kiln::Error naming the valid devices when `d` is unknown or
// its backend/device is unusable (with the backend's reason).
Backend& backend_for(const Device& d);

// Adds a backend at run time (a plugin, or a test double). Its name must be new.
void register_backend(std::shared_ptr<Backend> backend);

}  // namespace kiln

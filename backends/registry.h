// Which backends exist, which of their devices are usable (and why not), and runtime selection.
// Registering is cheap (a name and a factory); a backend is made and its devices enumerated on
// first use (devices(), backend_for), so a process that only uses cpu never loads a GPU driver.
// Built-in backends register through register_backend exactly as a plugin does; opencl and
// vulkan are listed as missing until built. Backend authors reach this through
// backends/extension.h; users see only devices() (backends/devices.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/devices.h"

namespace kiln {

// The backend serving `d`, started if it was not; raises kiln::Error naming the valid devices
// when `d` is unknown or its backend/device is unusable (with the backend's reason).
Backend& backend_for(const Device& d);

// Makes a backend named as registered; called at most once, on first use of the name. An
// exception there marks the backend unavailable with the exception's message.
using BackendFactory = std::function<std::shared_ptr<Backend>()>;

// Adds a backend at run time: the built-ins, a plugin, or a test double. The name must be
// non-empty, without ':' and new. Devices are enumerated once, on first use (an exception
// there marks the backend unavailable).
void register_backend(const std::string& name, BackendFactory factory);
void register_backend(std::shared_ptr<Backend> backend);

}  // namespace kiln

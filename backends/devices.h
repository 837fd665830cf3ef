// The devices a user can pick from: every known backend's devices, available or not, with the
// reason when not. Part of the user API (kiln.h); the backends behind them are in extension.h.
#pragma once

#include <string>
#include <vector>

#include "graph/device.h"

namespace kiln {

struct DeviceInfo {
  Device device;
  std::string description;  // "PoCL 3.1 pthread-skylake", "LLVM 15 ORC JIT, 2 threads"
  bool available = false;
  std::string reason;  // why not available
};

// "opencl:0 available PoCL 3.1 ...", or "vulkan:0 missing <why>": a line of `kiln devices`.
std::ostream& operator<<(std::ostream& os, const DeviceInfo& d);

// Every known backend's devices, available or not, with the reason when not.
std::vector<DeviceInfo> devices();

}  // namespace kiln

#include "backends/registry.h"

#include <map>
#include <mutex>
#include <sstream>

#include "backends/reference/reference.h"
#include "graph/device_hooks.h"
#include "graph/error.h"
#include "graph/immortal.h"
#ifdef KILN_HAVE_CPU_BACKEND
#include "backends/cpu/cpu_backend.h"
#endif
#ifdef KILN_HAVE_VULKAN_BACKEND
#include "backends/vulkan/vulkan_backend.h"
#endif
#ifdef KILN_HAVE_OPENCL_BACKEND
#include "backends/opencl/opencl_backend.h"
#endif

namespace kiln {

namespace {

struct Entry {
  std::shared_ptr<Backend> backend;  // null when not built into this Kiln
  std::string missing_reason;
  std::vector<DeviceInfo> devices;  // enumerated once
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> entries;
  std::vector<std::string> order;
  std::once_flag builtins;

  // A backend that is known but not built into this Kiln: listed by devices() with the reason.
  void add_missing(const std::string& name, const std::string& why) {
    Entry e;
    e.missing_reason = why;
    e.devices = {DeviceInfo{Device{name, 0}, name, false, why}};
    add_entry(name, std::move(e));
  }

  void add_entry(const std::string& name, Entry e) {
    entries[name] = std::move(e);
    order.push_back(name);
  }
};

// True on the thread that is registering the built-ins: their register_backend calls must not
// wait for the built-ins to be registered.
thread_local bool t_registering_builtins = false;

// The built-in backends, registered as a plugin registers (register_backend), in the order
// devices() lists them.
void register_builtins(Registry& r) {
  struct Flag {  // RAII, so that a throwing built-in leaves the flag clear
    Flag() { t_registering_builtins = true; }
    ~Flag() { t_registering_builtins = false; }
  } flag;
#ifdef KILN_HAVE_CPU_BACKEND
  register_backend(make_cpu_backend());
#else
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.add_missing("cpu", "the cpu backend (LLVM 15 ORC JIT) is not built into this Kiln");
  }
#endif
#ifdef KILN_HAVE_OPENCL_BACKEND
  register_backend(make_opencl_backend());
#else
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.add_missing("opencl",
                  "the opencl backend is not built into this Kiln (needs the OpenCL headers and "
                  "ICD loader: opencl-headers, ocl-icd-opencl-dev)");
  }
#endif
#ifdef KILN_HAVE_VULKAN_BACKEND
  register_backend(make_vulkan_backend());
#else
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.add_missing("vulkan",
                  "the vulkan backend (Vulkan loader + glslang) is not built into this Kiln");
  }
#endif
  register_backend(make_reference_backend());
}

// The registry, with the built-ins registered before anyone else can look or add.
Registry& registry() {
  static Immortal<Registry> reg;  // backends outlive work still running at exit
  Registry& r = reg.get();
  if (!t_registering_builtins) std::call_once(r.builtins, [&] { register_builtins(r); });
  return r;
}

std::string valid_list(Registry& r) {
  std::ostringstream os;
  bool first = true;
  for (const auto& name : r.order)
    for (const DeviceInfo& d : r.entries[name].devices)
      if (d.available) os << (first ? "" : ", ") << d.device, first = false;
  return first ? "none" : os.str();
}

void check_device_hook(const Device& d) { backend_for(d); }

// Installed before main so that device("...") is checked even if nothing else touched backends.
[[maybe_unused]] const bool g_installed = [] {
  set_device_checker(&check_device_hook);
  return true;
}();

}  // namespace

std::vector<DeviceInfo> devices() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<DeviceInfo> out;
  for (const auto& name : r.order)
    for (const DeviceInfo& d : r.entries[name].devices) out.push_back(d);
  return out;
}

Backend& backend_for(const Device& d) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(d.backend);
  if (it == r.entries.end()) {
    std::ostringstream names;
    for (size_t i = 0; i < r.order.size(); ++i) names << (i ? ", " : "") << r.order[i];
    throw_error("unknown device '", d, "': no backend named '", d.backend,
                "' (backends: ", names.str(), "; usable devices: ", valid_list(r), ")");
  }
  Entry& e = it->second;
  if (!e.backend)
    throw_error("device ", d, " is not available: ", e.missing_reason,
                " (usable devices: ", valid_list(r), ")");
  if (d.index < 0 || d.index >= static_cast<int>(e.devices.size()))
    throw_error("device ", d, " does not exist: backend '", d.backend, "' has ", e.devices.size(),
                " device(s) (usable devices: ", valid_list(r), ")");
  const DeviceInfo& info = e.devices[d.index];
  if (!info.available)
    throw_error("device ", d, " is not available: ", info.reason,
                " (usable devices: ", valid_list(r), ")");
  return *e.backend;
}

void register_backend(std::shared_ptr<Backend> backend) {
  if (!backend) throw_error("register_backend: null backend");
  std::string name = backend->name();
  if (name.empty() || name.find(':') != std::string::npos)
    throw_error("register_backend: invalid backend name '", name,
                "' (a non-empty name without ':', as in device(\"name:0\"))");
  Registry& r = registry();
  // Devices are enumerated once, outside the lock (a driver may take its time).
  Entry e;
  try {
    e.devices = backend->devices();
  } catch (const std::exception& ex) {
    e.devices = {DeviceInfo{Device{name, 0}, name, false, ex.what()}};
  }
  e.backend = std::move(backend);
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.entries.count(name))
    throw_error("register_backend: a backend named '", name, "' already exists");
  r.add_entry(name, std::move(e));
}

}  // namespace kiln

#include "backends/registry.h"

#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/reference/reference.h"
#include "graph/device_hooks.h"
#include "graph/error.h"
#include "graph/immortal.h"
#include "graph/log.h"
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

// One registered name. `factory`, `missing` and `name` are fixed at registration; `backend`
// and `devices` are written once, inside `started`, and read only after it.
struct Entry {
  std::string name;
  BackendFactory factory;  // null when the backend is not built into this Kiln
  std::string missing;     // why not, then
  std::once_flag started;
  std::shared_ptr<Backend> backend;
  std::vector<DeviceInfo> devices;
};

std::vector<DeviceInfo> unavailable(const std::string& name, const std::string& why) {
  return {DeviceInfo{Device{name, 0}, name, false, why}};
}

// Makes the backend and enumerates its devices, once. Runs outside the registry's lock: a
// driver may take its time, and a factory may itself register or look up other backends.
void start(Entry& e) {
  std::call_once(e.started, [&e] {
    if (!e.factory) {
      e.devices = unavailable(e.name, e.missing);
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
      std::shared_ptr<Backend> b = e.factory();
      if (!b) throw_error("the factory of backend '", e.name, "' returned no backend");
      if (b->name() != e.name)
        throw_error("the factory of backend '", e.name, "' made a backend named '", b->name(), "'");
      e.devices = b->devices();
      e.backend = std::move(b);
    } catch (const std::exception& ex) {
      e.devices = unavailable(e.name, ex.what());
    } catch (...) {
      e.devices = unavailable(e.name, "starting the backend raised an unknown exception");
    }
    if (e.devices.empty()) e.devices = unavailable(e.name, "the backend reports no device");
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    logging::debug("started backend ", e.name, " in ", ms,
                   " ms: ", e.backend ? "" : "unavailable, ", e.devices.size(), " device(s)");
  });
}

class Registry {
 public:
  // The built-ins: cheap to list (a name and a factory each), in the order devices() shows them.
  Registry() {
#ifdef KILN_HAVE_CPU_BACKEND
    add("cpu", &make_cpu_backend, "");
#else
    add("cpu", nullptr, "the cpu backend (LLVM 15 ORC JIT) is not built into this Kiln");
#endif
#ifdef KILN_HAVE_OPENCL_BACKEND
    add("opencl", &make_opencl_backend, "");
#else
    add("opencl", nullptr,
        "the opencl backend is not built into this Kiln (needs the OpenCL headers and ICD "
        "loader: opencl-headers, ocl-icd-opencl-dev)");
#endif
#ifdef KILN_HAVE_VULKAN_BACKEND
    add("vulkan", &make_vulkan_backend, "");
#else
    add("vulkan", nullptr,
        "the vulkan backend (Vulkan loader + glslang) is not built into this Kiln");
#endif
    add("reference", &make_reference_backend, "");
  }

  void add(const std::string& name, BackendFactory factory, const std::string& missing) {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_name_.count(name))
      throw_error("register_backend: a backend named '", name, "' already exists");
    auto e = std::make_unique<Entry>();
    e->name = name;
    e->factory = std::move(factory);
    e->missing = missing;
    by_name_[name] = e.get();
    order_.push_back(std::move(e));
  }

  // Entries never move or go away, so a pointer stays valid after the lock is released.
  Entry* find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  std::vector<Entry*> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry*> out;
    for (const auto& e : order_) out.push_back(e.get());
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> order_;
  std::map<std::string, Entry*> by_name_;
};

Registry& registry() {
  static Immortal<Registry> reg;  // backends outlive work still running at exit
  return reg.get();
}

// Every usable device; starts every backend (only error messages need it).
std::string valid_list() {
  std::ostringstream os;
  bool first = true;
  for (Entry* e : registry().all()) {
    start(*e);
    for (const DeviceInfo& d : e->devices)
      if (d.available) os << (first ? "" : ", ") << d.device, first = false;
  }
  return first ? "none" : os.str();
}

void check_name(const std::string& name) {
  if (name.empty() || name.find(':') != std::string::npos)
    throw_error("register_backend: invalid backend name '", name,
                "' (a non-empty name without ':', as in device(\"name:0\"))");
}

void check_device_hook(const Device& d) { backend_for(d); }

// Installed before main so that device("...") is checked even if nothing else touched backends.
[[maybe_unused]] const bool g_installed = [] {
  set_device_checker(&check_device_hook);
  return true;
}();

}  // namespace

std::ostream& operator<<(std::ostream& os, const DeviceInfo& d) {
  return os << d.device.str() << " " << (d.available ? "available " : "missing ")
            << (d.available ? d.description : d.reason);
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (Entry* e : registry().all()) {
    start(*e);
    out.insert(out.end(), e->devices.begin(), e->devices.end());
  }
  return out;
}

Backend& backend_for(const Device& d) {
  Entry* e = registry().find(d.backend);
  if (!e) {
    std::ostringstream names;
    bool first = true;
    for (Entry* x : registry().all()) names << (first ? "" : ", ") << x->name, first = false;
    throw_error("unknown device '", d, "': no backend named '", d.backend,
                "' (backends: ", names.str(), "; usable devices: ", valid_list(), ")");
  }
  start(*e);
  if (!e->backend)
    throw_error("device ", d, " is not available: ", e->devices.front().reason,
                " (usable devices: ", valid_list(), ")");
  if (d.index < 0 || d.index >= static_cast<int>(e->devices.size()))
    throw_error("device ", d, " does not exist: backend '", d.backend, "' has ", e->devices.size(),
                " device(s) (usable devices: ", valid_list(), ")");
  const DeviceInfo& info = e->devices[d.index];
  if (!info.available)
    throw_error("device ", d, " is not available: ", info.reason,
                " (usable devices: ", valid_list(), ")");
  return *e->backend;
}

void register_backend(const std::string& name, BackendFactory factory) {
  check_name(name);
  if (!factory) throw_error("register_backend: no factory for backend '", name, "'");
  registry().add(name, std::move(factory), "");
}

void register_backend(std::shared_ptr<Backend> backend) {
  if (!backend) throw_error("register_backend: null backend");
  std::string name = backend->name();
  check_name(name);
  registry().add(
      name, [b = std::move(backend)] { return b; }, "");
}

}  // namespace kiln

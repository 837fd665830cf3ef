#include "backends/registry.h"

#include <map>
#include <mutex>
#include <sstream>

#include "backends/reference/reference.h"
#include "graph/error.h"
#ifdef KILN_HAVE_CPU_BACKEND
#include "backends/cpu/cpu_backend.h"
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

  Registry() {
    add("cpu",
#ifdef KILN_HAVE_CPU_BACKEND
        make_cpu_backend(), "");
#else
        nullptr, "the cpu backend (LLVM 15 ORC JIT) is not built into this Kiln");
#endif
    add("opencl",
#ifdef KILN_HAVE_OPENCL_BACKEND
        make_opencl_backend(), "");
#else
        nullptr,
        "the opencl backend is not built into this Kiln (needs the OpenCL headers and "
        "ICD loader: opencl-headers, ocl-icd-opencl-dev)");
#endif
    add("vulkan", nullptr, "the vulkan backend is not built into this Kiln yet");
    add("reference", make_reference_backend(), "");
  }

  void add(const std::string& name, std::shared_ptr<Backend> b, const std::string& why) {
    Entry e;
    e.backend = std::move(b);
    e.missing_reason = why;
    if (e.backend) {
      try {
        e.devices = e.backend->devices();
      } catch (const std::exception& ex) {
        e.devices = {DeviceInfo{Device{name, 0}, name, false, ex.what()}};
      }
    } else {
      e.devices = {DeviceInfo{Device{name, 0}, name, false, why}};
    }
    entries[name] = std::move(e);
    order.push_back(name);
  }
};

Registry& registry() {
  static Registry r;
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
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string name = backend->name();
  if (r.entries.count(name))
    throw_error("register_backend: a backend named '", name, "' already exists");
  r.add(name, std::move(backend), "");
}

}  // namespace kiln

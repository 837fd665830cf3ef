// A process that only uses cpu: one eager op and one compiled call on the default device. With
// --check-maps it then fails if a GPU driver or its compiler is mapped (/proc/self/maps):
// devices are discovered on first use, so PoCL, lavapipe and their kin must never load here.
// With --all-devices it first lists devices() and checks that the drivers it reports usable are
// mapped, the control showing the check can see them. Without flags it only runs the op: the
// program whose start-up to first result is timed (docs/development.md).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kiln.h"

namespace {

// Shared libraries the OpenCL ICD loader and the Vulkan loader would load: the drivers named in
// their manifests, and the compilers those drivers link.
std::set<std::string> driver_libraries() {
  std::set<std::string> libs = {"libpocl", "libvulkan_lvp", "libclang-cpp", "libvulkan_radeon",
                                "libvulkan_intel"};
  auto add_from = [&](const std::string& dir, const std::regex& pattern) {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
      std::ifstream in(f.path());
      std::string text((std::istreambuf_iterator<char>(in)), {});
      std::smatch m;
      if (std::regex_search(text, m, pattern))
        libs.insert(std::filesystem::path(m[1].str()).filename().string());
    }
  };
  add_from("/etc/OpenCL/vendors", std::regex(R"(^\s*(\S+))"));
  add_from("/usr/share/vulkan/icd.d", std::regex(R"re("library_path"\s*:\s*"([^"]+)")re"));
  return libs;
}

// The mapped files whose name contains one of `libs`.
std::vector<std::string> mapped(const std::set<std::string>& libs) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> out;
  for (std::string line; std::getline(maps, line);) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string name = std::filesystem::path(path).filename().string();
    for (const std::string& lib : libs)
      if (name.find(lib) != std::string::npos) out.insert(path);
  }
  return {out.begin(), out.end()};
}

bool cpu_work() {
  kiln::Array y = kiln::exp(kiln::array({0.0f, 1.0f, 2.0f}, {3}));
  kiln::eval(y);
  auto f = kiln::compile(
      [](const std::vector<kiln::Array>& in) { return std::vector<kiln::Array>{in[0] * 2.0f}; });
  float twice = f({y})[0].to_vector<float>()[1];
  return y.to_vector<float>()[0] == 1.0f && std::abs(twice - 2 * 2.7182817f) < 1e-5f;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    bool all = mode == "--all-devices";
    std::vector<std::string> usable;
    if (all)
      for (const kiln::DeviceInfo& d : kiln::devices())
        if (d.available) usable.push_back(d.device.backend);
    if (!cpu_work()) {
      std::cerr << "wrong values from the cpu work\n";
      return 1;
    }
    if (mode.empty()) return 0;
    std::vector<std::string> found = mapped(driver_libraries());
    if (!all) {
      for (const std::string& f : found) std::cerr << "a cpu-only process mapped " << f << "\n";
      return found.empty() ? 0 : 1;
    }
    bool gpu = false;
    for (const std::string& b : usable) gpu |= b == "opencl" || b == "vulkan";
    if (gpu && found.empty()) {
      std::cerr << "devices() reports opencl or vulkan usable, yet no driver is mapped: the "
                   "check cannot see drivers\n";
      return 1;
    }
    std::cout << (gpu ? "drivers mapped after devices(): " : "no GPU backend usable here\n");
    for (const std::string& f : found) std::cout << f << " ";
    std::cout << "\n";
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
}

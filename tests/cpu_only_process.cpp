// A process that only uses cpu: one eager op and one compiled call on the default device. With
// --check-maps it then fails if a GPU driver or its compiler is mapped (/proc/self/maps):
// devices are discovered on first use, so PoCL, lavapipe and their kin must never load here.
// With --all-devices it first lists devices() and checks that the drivers it reports usable are
// mapped, the control showing the check can see them. Without flags it only runs one eager op:
// the program whose start-up to first result is timed (cold caches: empty KILN_CACHE_DIR).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln.h"

namespace {

// Shared libraries the OpenCL ICD loader and the Vulkan loader would load: the drivers named in
// their manifests, and the compilers those drivers link.
std::set<std::string> driver_libraries() {
  std::set<std::string> libs = {"libpocl", "libvulkan_lvp", "libclang-cpp", "libvulkan_radeon",
                                "libvulkan_intel"};
  auto add_file = [&](const std::filesystem::path& f, const std::regex& pattern) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::smatch m;
    if (!std::regex_search(text, m, pattern)) return;
    // Up to ".so": the maps show the file a soname links to (libGLX_nvidia.so.0 is mapped as
    // libGLX_nvidia.so.580.159.04).
    std::string name = std::filesystem::path(m[1].str()).filename().string();
    libs.insert(name.substr(0, name.find(".so")) + ".so");
  };
  // A directory's manifests, or the files of a ':'-separated list (the loaders' variables).
  auto add_from = [&](const std::string& where, const std::regex& pattern) {
    std::error_code ec;
    if (std::filesystem::is_directory(where, ec)) {
      for (const auto& f : std::filesystem::directory_iterator(where, ec))
        add_file(f.path(), pattern);
      return;
    }
    std::stringstream list(where);
    for (std::string f; std::getline(list, f, ':');)
      if (!f.empty()) add_file(f, pattern);
  };
  const std::regex icd(R"(^\s*(\S+))"), json(R"re("library_path"\s*:\s*"([^"]+)")re");
  add_from("/etc/OpenCL/vendors", icd);
  add_from("/usr/share/vulkan/icd.d", json);
  for (const char* var : {"OCL_ICD_VENDORS", "OCL_ICD_FILENAMES"})
    if (const char* v = std::getenv(var)) add_from(v, icd);
  for (const char* var : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"})
    if (const char* v = std::getenv(var)) add_from(v, json);
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

bool first_eager_op() {
  kiln::Array y = kiln::exp(kiln::array({0.0f, 1.0f, 2.0f}, {3}));
  kiln::eval(y);
  return y.to_vector<float>()[0] == 1.0f;
}

bool cpu_work() {
  kiln::Array y = kiln::exp(kiln::array({0.0f, 1.0f, 2.0f}, {3}));
  kiln::eval(y);
  auto f = kiln::compile(
      [](const std::vector<kiln::Array>& in) { return std::vector<kiln::Array>{in[0] * 2.0f}; });
  float twice = f({y})[0].to_vector<float>()[1];
  return y.to_vector<float>()[0] == 1.0f && std::abs(twice - 2 * 2.7182817f) < 1e-5f;
}

// --check-maps: cpu work, then no driver may be mapped.
int check_maps() {
  if (!cpu_work()) return std::cerr << "wrong values from the cpu work\n", 1;
  std::vector<std::string> found = mapped(driver_libraries());
  for (const std::string& f : found) std::cerr << "a cpu-only process mapped " << f << "\n";
  return found.empty() ? 0 : 1;
}

// --all-devices: the control; after devices() the usable drivers must show in the maps.
int check_all_devices() {
  bool gpu = false;
  for (const kiln::DeviceInfo& d : kiln::devices())
    gpu |= d.available && (d.device.backend == "opencl" || d.device.backend == "vulkan");
  if (!cpu_work()) return std::cerr << "wrong values from the cpu work\n", 1;
  std::vector<std::string> found = mapped(driver_libraries());
  if (gpu && found.empty())
    return std::cerr << "devices() reports opencl or vulkan usable, yet no driver is mapped: "
                        "the check cannot see drivers\n",
           1;
  std::cout << (gpu ? "drivers mapped after devices(): " : "no GPU backend usable here\n");
  for (const std::string& f : found) std::cout << f << " ";
  std::cout << "\n";
  return 0;
}

// --concurrent: threads that start at once ask for every backend in a fresh process; each
// backend starts once, and every thread sees the same devices.
int concurrent_first_use() {
  std::atomic<int> ready{0};
  const int n = 6;
  std::vector<std::vector<std::string>> seen(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      const char* names[] = {"cpu", "opencl", "vulkan", "reference"};
      try {
        (void)kiln::device(names[t % 4]);
      } catch (const kiln::Error&) {  // not usable here: devices() says why
      }
      for (const kiln::DeviceInfo& d : kiln::devices())
        seen[t].push_back(d.device.str() + (d.available ? " available" : " missing: " + d.reason));
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < n; ++t)
    if (seen[t] != seen[0]) return std::cerr << "threads saw different device lists\n", 1;
  return cpu_work() ? 0 : 1;
}

// --exit-with-work: a compiled call leaves long opencl work running when main returns, and a
// handler registered with atexit before vulkan starts (as a library finaliser would be) checks
// that the work has ended by the time it runs: Kiln finishes device work at exit before the
// finalisers of every library loaded so far (graph/at_exit.h). Before that, PoCL could still be
// compiling the kernel in LLVM while lavapipe's finaliser ran, and the process crashed.
// The vulkan part: a loop whose later steps are held in a batch behind the first ones (the
// calls outrun lavapipe) when main returns; they too must have run by then.
std::optional<kiln::Array> g_pending, g_pending_loop;  // constructed before the handler

void pending_work_has_ended() {
  using Entry = std::pair<std::optional<kiln::Array>*, const char*>;
  for (auto [pending, what] : {Entry{&g_pending, "opencl work"},
                               Entry{&g_pending_loop, "a vulkan loop's batched steps"}}) {
    if (!*pending || (*pending)->is_evaluated()) continue;
    // The completion callback may trail the queue's finish by a moment.
    for (int i = 0; i < 500 && !(*pending)->is_evaluated(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!(*pending)->is_evaluated()) {
      std::cerr << what
                << " was still running when a finaliser registered before vulkan "
                   "started ran\n";
      std::_Exit(3);
    }
  }
}

int exit_with_work() {
  for (const kiln::DeviceInfo& d : kiln::devices())
    if ((d.device.backend == "opencl" || d.device.backend == "vulkan") && !d.available)
      return std::cout << "skipped: " << d.device.str() << " is not usable: " << d.reason << "\n",
             77;
  kiln::Device cl = kiln::device("opencl"), vk = kiln::device("vulkan");
  auto f = kiln::compile([](const std::vector<kiln::Array>& in) {
    kiln::Array x = in[0];
    for (int i = 0; i < 40; ++i) x = kiln::sin(x) * 1.5f + kiln::cos(x);
    return std::vector<kiln::Array>{x};
  });
  {
    kiln::StreamScope on_cl(cl);
    kiln::Array x = kiln::random::uniform({1 << 22}, kiln::float32, kiln::random::key(7));
    kiln::eval(x);
    g_pending = f({x})[0];  // returns while the device works
  }
  std::atexit(pending_work_has_ended);
  kiln::Array y = kiln::ones({4}, kiln::float32, vk) + 1.0f;
  if (y.to_vector<float>()[0] != 2.0f) return std::cerr << "wrong vulkan result\n", 1;
  {
    kiln::StreamScope on_vk(vk);
    auto step = kiln::compile(
        [](const std::vector<kiln::Array>& in) { return std::vector<kiln::Array>{in[0] * 0.5f}; });
    kiln::Array z = kiln::ones({1000}, kiln::float32, vk);
    kiln::eval(step({z}));  // compiled now: the steps left at exit are short
    for (int i = 0; i < 200; ++i) z = step({z})[0];
    g_pending_loop = z;
  }
  if (g_pending->is_evaluated())
    std::cerr << "note: the opencl work ended before main returned; the check proves nothing\n";
  if (g_pending_loop->is_evaluated())
    std::cerr << "note: the vulkan loop ended before main returned; its check proves nothing\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode.empty()) return first_eager_op() ? 0 : 1;
    if (mode == "--check-maps") return check_maps();
    if (mode == "--all-devices") return check_all_devices();
    if (mode == "--concurrent") return concurrent_first_use();
    if (mode == "--exit-with-work") return exit_with_work();
    std::cerr << "usage: cpu_only_process [--check-maps | --all-devices | --concurrent | "
                 "--exit-with-work]\n";
    return 2;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
}

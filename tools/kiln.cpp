// The `kiln` command: `kiln devices` lists every backend and device (available or not, and why);
// `kiln demo` is the short showcase that `make demo` runs.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "kiln.h"

namespace {

int cmd_devices() {
  for (const kiln::DeviceInfo& d : kiln::devices()) {
    std::printf("%-12s %-10s %s\n", d.device.str().c_str(), d.available ? "available" : "missing",
                d.available ? d.description.c_str() : d.reason.c_str());
  }
  std::printf("default: %s\n", kiln::default_device().str().c_str());
  return 0;
}

int cmd_demo(const std::string& trace_path) {
  using namespace kiln;
  std::printf("== devices\n");
  cmd_devices();

  Device dev = default_device();
  std::printf("\n== eager gelu on %s: x * (1 + erf(x / sqrt(2))) / 2\n", dev.str().c_str());
  ProfileScope profile;
  Array x = random::normal({256, 1024}, float32, random::key(42));
  Array y = x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f;
  Array m = mean(y);
  Array top = argmax(max(y, 1));
  eval({y, m, top});
  std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double ref = xs[i] * 0.5 * (1.0 + std::erf(xs[i] / std::sqrt(2.0)));
    worst = std::max(worst, std::fabs(ref - ys[i]));
  }
  std::printf("shape %s, mean %.6f, row with the largest value %lld, max |error| vs libm %.3g\n",
              to_string(y.shape()).c_str(), m.item<float>(), (long long)top.item<int64_t>(), worst);

  std::printf("\n== where the tasks ran (ProfileScope)\n");
  std::map<std::string, std::pair<int, double>> by_name;
  for (const TaskEvent& e : profile.events()) {
    auto& [count, us] = by_name[e.name + " on " + e.stream.str()];
    count++;
    us += (e.end_ns - e.start_ns) / 1000.0;
  }
  for (const auto& [name, stat] : by_name)
    std::printf("  %-40s x%-3d %9.1f us\n", name.c_str(), stat.first, stat.second);
  if (!trace_path.empty()) {
    profile.write_chrome_trace(trace_path);
    std::printf("Chrome trace written to %s\n", trace_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: compile array functions into fused kernels and run them as task graphs"};
  app.require_subcommand(1);
  auto* devices = app.add_subcommand("devices", "list every backend and device, and why not");
  auto* demo = app.add_subcommand("demo", "a short showcase on the default device");
  std::string trace;
  demo->add_option("--trace", trace, "write a Chrome trace of the demo's tasks to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices) return cmd_devices();
    if (*demo) return cmd_demo(trace);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

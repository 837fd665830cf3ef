// The vulkan backend in numbers, printed by a plain main (lavapipe here: a CPU rasteriser, so the
// ratios to the cpu backend describe lavapipe as much as Kiln):
//  - compiled gelu x*(1+erf(x/sqrt 2))/2 on (8, 1000, 4096) float32 (131 MB, just under
//    lavapipe's 128 MiB maxStorageBufferRange) on vulkan:0 against the cpu backend in alternating
//    rounds, with a memcpy of the same bytes as the bandwidth floor;
//  - dispatch latency of a cached compiled call (x + 1 on 16 floats) on a vulkan stream and on cpu;
//  - the first call of a compiled function in a fresh process with empty disk caches (cold) and
//    again in another fresh process with the caches it left (warm: Kiln's SPIR-V cache and
//    Mesa's shader cache);
//  - matmul 1024 x 1024 x 1024 float32 GFLOP/s on vulkan:0 and on cpu.
//   build/benchmarks/bench_vulkan [gelu|dispatch|first|matmul]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

template <typename F>
double median_ms(int n, F f) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

bool have(const char* backend) {
  for (const DeviceInfo& d : devices())
    if (d.device.backend == backend && d.available) return true;
  return false;
}

// cpu and vulkan are timed in alternating rounds, so that the shared machine's drift (its memory
// bandwidth moves by 1.5x between minutes) hits both alike: per device the median of 7 rounds,
// and the median of the per-round ratios.
void bench_gelu() {
  const Shape shape = {8, 1000, 4096};
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; });
  Array xv = random::normal(shape, float32, random::key(1), device("vulkan"));
  Array xc = random::normal(shape, float32, random::key(1), device("cpu"));
  eval({xv, xc});
  auto once = [&](const char* dev, const Array& x) {
    StreamScope scope(device(dev));
    auto t0 = Clock::now();
    eval(f({x}));
    return ms_since(t0);
  };
  once("vulkan", xv), once("cpu", xc);  // compile and warm up
  std::vector<double> v, c, r;
  for (int i = 0; i < 7; ++i) {
    v.push_back(once("vulkan", xv));
    c.push_back(once("cpu", xc));
    r.push_back(v.back() / c.back());
  }
  auto median = [](std::vector<double> t) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
  };
  size_t bytes = 8 * 1000 * 4096 * 4;
  std::vector<char> a(bytes, 1), b(bytes);
  double copy = median_ms(5, [&] { std::memcpy(b.data(), a.data(), bytes); });
  std::printf(
      "gelu (8,1000,4096) f32: vulkan:0 %.1f ms, cpu %.1f ms -> vulkan/cpu %.2fx (median of "
      "per-round ratios, alternating rounds; goal <= 5x); memcpy of the bytes %.1f ms\n",
      median(v), median(c), median(r), copy);
}

void bench_dispatch() {
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + 1.0f}; });
  for (const char* name : {"vulkan", "cpu"}) {
    Device d = device(name);
    StreamScope scope(new_stream(d));
    Array x = full({16}, 1.0f, float32, d);
    eval(x);
    for (int i = 0; i < 50; ++i) eval(f({x}));
    const int n = 2000;
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) eval(f({x}));
    double round_trip = 1e3 * ms_since(t0) / n;
    // The call alone: it returns once its work is submitted (the wait is not timed).
    std::vector<double> call(n);
    for (int i = 0; i < n; ++i) {
      auto t1 = Clock::now();
      std::vector<Array> out = f({x});
      call[i] = 1e3 * ms_since(t1);
      eval(out);
    }
    std::nth_element(call.begin(), call.begin() + n / 2, call.end());
    std::printf(
        "dispatch latency, cached compiled call on a %s stream: the call returns in %.1f us "
        "(median); call + wait for the result %.1f us/call\n",
        name, call[n / 2], round_trip);
  }
}

// In a child process: the first call of a compiled function (a kernel no other part of this
// benchmark builds).
int first_call_child() {
  Device d = device("vulkan");
  StreamScope scope(d);
  Array x = full({1000}, 0.25f, float32, d);
  eval(x);
  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{sum(tanh(in[0]) * sigmoid(in[0]) + erf(in[0] * 3.0f))};
  });
  auto t0 = Clock::now();
  eval(f({x}));
  std::printf("%.2f\n", ms_since(t0));
  return 0;
}

void bench_first_call(const char* self) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_bench_vulkan_" + std::to_string(::getpid())))
          .string();
  std::string cmd = "KILN_CACHE_DIR=" + dir + " XDG_CACHE_HOME=" + dir + " " + self + " --child";
  double t[2] = {0, 0};
  for (double& v : t) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p || std::fscanf(p, "%lf", &v) != 1) v = NAN;
    if (p) pclose(p);
  }
  std::printf(
      "first call of a compiled function in a fresh process: cold %.1f ms, warm (disk "
      "caches) %.1f ms\n",
      t[0], t[1]);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void bench_matmul() {
  const int64_t n = 1024;
  for (const char* name : {"vulkan", "cpu"}) {
    Device d = device(name);
    StreamScope scope(d);
    Array a = random::normal({n, n}, float32, random::key(2), d);
    Array b = random::normal({n, n}, float32, random::key(3), d);
    eval({a, b});
    eval(matmul(a, b));
    double ms = median_ms(3, [&] { eval(matmul(a, b)); });
    std::printf("matmul %lldx%lldx%lld f32 on %s: %.1f ms, %.1f GFLOP/s\n",
                static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n),
                name, ms, 2.0 * n * n * n / ms / 1e6);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return first_call_child();
  if (!have("vulkan") || !have("cpu")) {
    std::printf("bench_vulkan needs the vulkan and cpu backends\n");
    return 0;
  }
  // An argument picks one part: gelu, dispatch, first, matmul (for profiling).
  std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "gelu") bench_gelu();
  if (only.empty() || only == "dispatch") bench_dispatch();
  if (only.empty() || only == "first") bench_first_call(argv[0]);
  if (only.empty() || only == "matmul") bench_matmul();
  return 0;
}

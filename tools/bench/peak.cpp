// The bounds `kiln bench` compares with, measured in the same run: the copy bandwidth of this
// machine (a parallel copy far larger than the caches, bytes read plus written) and its float32
// FMA peak (fma_peak.h: the loop benchmarks/bench_matmul.cpp measures, on every thread).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "tools/bench/fma_peak.h"
#include "tools/bench/suite.h"

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

int hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

template <typename F>
double on_every_thread(int n, F f) {
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double copy_gbps(size_t bytes, int threads) {
  bytes = std::max<size_t>(bytes / 2, 4096 * threads);  // half read, half written
  auto src = std::make_unique<char[]>(bytes), dst = std::make_unique<char[]>(bytes);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  double best = 1e30;
  int reps = static_cast<int>(std::clamp<size_t>((size_t(1) << 30) / bytes, 5, 200));
  for (int rep = 0; rep < reps; ++rep)
    best = std::min(best, on_every_thread(threads, [&](int i) {
                      size_t chunk = bytes / threads, at = chunk * i;
                      std::memcpy(dst.get() + at, src.get() + at,
                                  i == threads - 1 ? bytes - at : chunk);
                    }));
  return 2.0 * bytes / best / 1e9;
}

}  // namespace

double copy_gbps_at(double bytes, int threads) {
  return copy_gbps(static_cast<size_t>(bytes), threads);
}

Machine measure_machine() {
  Machine m;
  m.cpu = cpu_name();
  m.threads = hardware_threads();
  m.copy_gbps = copy_gbps(size_t(512) << 20, m.threads);
  m.peak_gflops_f32 = fma_gflops(false, m.threads);
  m.peak_isa = fma_kernel(false).isa;
  return m;
}

}  // namespace kiln::bench

// How close compiled element-wise kernels come to a device's memory bandwidth (issue 20, item
// 8): gelu and x + 1 over N float32 on one device, K calls issued back to back (a call returns
// once its work is submitted) and waited for together, so a call's time is its kernel's and not
// a round trip. Prints GB/s counting the bytes read plus the bytes written, to be set against
// the device's own copy bandwidth measured beside it (on a GPU, the vendor library's
// device-to-device copy; on a CPU, memcpy, which this prints). Each kernel is timed twice: K
// calls back to back (K outputs live) and each call waited for (one output live, its buffer
// reused).
//   build/benchmarks/bench_bandwidth DEVICE [MiB per array, default 512] [calls, default 10]
//   build/benchmarks/bench_bandwidth --devices   (every device, with why one is not usable)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

// Where a waited-for call's time goes: the call (submission), the wait, dropping the output.
struct Phases {
  double call = 0, wait = 0, drop = 0;
};

double since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The median over 5 rounds of one round's time per call, each round K calls: back to back then
// one wait (K outputs live at once), or each waited for (one output live: its buffer is reused).
double ms_per_call(const CompiledFunction& f, const Array& x, int calls, bool wait_each,
                   Phases& phases) {
  std::vector<double> rounds;
  for (int r = 0; r < 6; ++r) {
    std::vector<Array> out;
    Phases p;
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
      auto t1 = Clock::now();
      out.push_back(f({x})[0]);
      p.call += since(t1);
      if (!wait_each) continue;
      t1 = Clock::now();
      eval(out);
      p.wait += since(t1);
      t1 = Clock::now();
      out.clear();
      p.drop += since(t1);
    }
    eval(out);
    double ms = since(t0);
    if (r == 0) continue;  // round 0 compiles and fills the buffer pool
    rounds.push_back(ms / calls);
    phases.call += p.call / calls / 5, phases.wait += p.wait / calls / 5;
    phases.drop += p.drop / calls / 5;
  }
  std::nth_element(rounds.begin(), rounds.begin() + rounds.size() / 2, rounds.end());
  return rounds[rounds.size() / 2];
}

double memcpy_gbs(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * bytes / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_bandwidth DEVICE [MiB] [calls]\n");
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--devices") {
    for (const DeviceInfo& d : devices())
      std::printf("%-10s %s %s\n", d.device.str().c_str(),
                  d.available ? "usable: " : "NOT usable: ",
                  (d.available ? d.description : d.reason).c_str());
    return 0;
  }
  const double mib = argc > 2 ? std::atof(argv[2]) : 512;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 10;
  const int64_t n = static_cast<int64_t>(mib * 1024 * 1024 / 4);
  if (n <= 0 || calls <= 0) {
    std::fprintf(stderr, "bench_bandwidth: MiB and calls must be positive\n");
    return 2;
  }
  try {
    Device d = device(name);
    StreamScope scope(d);
    Array x = random::normal({n}, float32, random::key(1), d);
    eval(x);
    auto f_gelu =
        compile([](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; });
    auto f_add =
        compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + 1.0f}; });
    const double bytes = 2.0 * 4.0 * static_cast<double>(n);  // read once, write once
    for (auto [what, f] : {std::pair{"x + 1", &f_add}, std::pair{"gelu", &f_gelu}})
      for (bool wait_each : {false, true}) {
        Phases ph;
        double ms = ms_per_call(*f, x, calls, wait_each, ph);
        std::printf(
            "%-5s on %s, %.0f MiB in and out, %s: %.3f ms per call, %.1f GB/s (read + "
            "written; median of 5 rounds of %d calls)",
            what, name.c_str(), mib, wait_each ? "each call waited for" : "back to back", ms,
            bytes / ms / 1e6, calls);
        if (wait_each)
          std::printf("; mean call %.3f ms, wait %.3f, drop %.3f", ph.call, ph.wait, ph.drop);
        std::printf("\n");
      }
    std::printf("memcpy of %.0f MiB on the host: %.1f GB/s (read + written)\n", mib,
                memcpy_gbs(static_cast<size_t>(n) * 4));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_bandwidth: %s\n", e.what());
    return 1;
  }
  return 0;
}

// A device loop without round trips (issue 20, item 5): `x = f(x)` for 5,000 steps on an opencl
// and a vulkan stream, f(x) = x * 0.5 + 1 on 1,000 float32, against the two costs that bound
// it in the same run: the submission alone (a call on a ready input that returns without
// waiting, in groups of 64 so that none waits behind a backlog), the same calls until their work
// has completed (the device's throughput: on PoCL and lavapipe the "device" is these same CPU
// cores) and the round trip (a call, then waiting for its result). A loop that binds each step's
// in-flight output to the next call costs about a submission per step in its calls, and the
// device's throughput to its end; one that waits for every result costs a round trip. Goal: loop
// <= 1.5x the submission. Lavapipe hands every dispatch to its worker threads and waits for them
// (tens of us a dispatch on 2 cores), so its vulkan line is run again in a second process with
// LP_NUM_THREADS=0, where lavapipe runs each dispatch on its queue thread (one core for all).
//   build/benchmarks/bench_device_loop [steps [backend]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Costs {  // microseconds per step
  double submit = 0, drained = 0, round_trip = 0, loop_calls = 0, loop = 0;
};

// One round of the three cases, each `steps` calls, on the caller's stream.
Costs round(const CompiledFunction& f, Device d, int steps) {
  Costs c;
  Array ready = full({1000}, 3.0f, float32, d);
  eval(ready);
  std::vector<Array> keep;  // outputs live until the round's end: the timing excludes freeing
  keep.reserve(static_cast<size_t>(steps));
  // The submission alone: calls in groups of kGroup, each group waited for untimed, so that no
  // call waits behind a backlog (an opencl stream bounds the calls in flight: calls_ahead).
  constexpr int kGroup = 64;
  for (int i = 0; i < steps; i += kGroup) {
    auto t0 = Clock::now();
    for (int j = i; j < std::min(steps, i + kGroup); ++j) keep.push_back(f({ready})[0]);
    c.submit += us_since(t0);
    eval(keep);
  }
  c.submit /= steps;
  keep.clear();
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) keep.push_back(f({ready})[0]);
  eval(keep);
  c.drained = us_since(t0) / steps;
  keep.clear();

  t0 = Clock::now();
  for (int i = 0; i < steps; ++i) eval(f({ready})[0]);
  c.round_trip = us_since(t0) / steps;

  Array x = ready;
  t0 = Clock::now();
  for (int i = 0; i < steps; ++i) x = f({x})[0];
  c.loop_calls = us_since(t0) / steps;
  eval(x);
  c.loop = us_since(t0) / steps;
  // x_k -> 2 (the fixed point of x * 0.5 + 1): check the loop computed it.
  std::vector<float> v = x.to_vector<float>();
  if (std::abs(v[0] - 2.0f) > 1e-5f || std::abs(v.back() - 2.0f) > 1e-5f) {
    std::fprintf(stderr, "bench_device_loop: wrong loop result %g on %s\n", v[0], d.str().c_str());
    std::exit(1);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 5000;
  std::vector<std::string> names = {"opencl", "vulkan"};
  if (argc > 2) names = {argv[2]};
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 0.5f + 1.0f}; });
  if (argc <= 2)
    std::printf("x = f(x), f(x) = x * 0.5 + 1 on 1,000 float32, %d steps; median of 5 rounds\n",
                steps);
  for (const std::string& name : names) {
    Device d;
    try {
      d = device(name);
    } catch (const Error& e) {
      std::printf("%s: not available (%s)\n", name.c_str(), e.what());
      continue;
    }
    StreamScope scope(new_stream(d));
    round(f, d, 200);  // compile and warm the queue
    std::vector<Costs> rounds;
    for (int r = 0; r < 5; ++r) rounds.push_back(round(f, d, steps));
    auto med = [&](double Costs::*m) {
      std::vector<double> v;
      for (const Costs& c : rounds) v.push_back(c.*m);
      return median(v);
    };
    double s = med(&Costs::submit), dr = med(&Costs::drained), t = med(&Costs::round_trip);
    double lc = med(&Costs::loop_calls), l = med(&Costs::loop);
    std::printf(
        "%-8s submission %.1f us/call (%.1f until complete), round trip %.1f us/call; loop: calls "
        "%.1f us/step, to the result %.1f us/step = %.2fx the submission (goal <= 1.5x), %.2fx "
        "the submitted work until complete, %.2fx the round trip\n",
        d.str().c_str(), s, dr, t, lc, l, l / s, l / dr, l / t);
  }
  if (argc > 2 || std::getenv("LP_NUM_THREADS")) return 0;
  std::printf(
      "vulkan with LP_NUM_THREADS=0 (lavapipe runs each dispatch on its queue thread; "
      "other drivers ignore it):\n");
  std::fflush(stdout);
  std::string again =
      "LP_NUM_THREADS=0 '" + std::string(argv[0]) + "' " + std::to_string(steps) + " vulkan";
  return std::system(again.c_str()) == 0 ? 0 : 1;
}

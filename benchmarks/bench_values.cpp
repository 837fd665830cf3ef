// Values are launch arguments: what users write in loops, timed in one run. Each row compares a
// value that changes every step with one that does not (goal: ratio <= 1.2), and the eager
// per-op costs (goals: chain <= 1.5 us/op, eval(x + y) on 1k floats <= 4 us, normal(1024) <= 20
// us); then the compiled MLP block (bench_matmul compares it with JAX) and the first call of a
// compiled gelu in a fresh process (bench_compile --first-call, disk cache cold then warm).
//   build/benchmarks/bench_values [reps]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

// Median microseconds of `reps` runs of step(i), after a warm-up of 20.
double median_us(int reps, const std::function<void(int)>& step) {
  for (int i = 0; i < 20; ++i) step(i);
  std::vector<double> t;
  t.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    step(i + 20);
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

double rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096.0 / (1 << 20);
}

void row(const char* what, double same, double distinct) {
  std::printf("%-58s %10.1f %10.1f %8.2fx\n", what, same, distinct, distinct / same);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::printf("device %s, %d reps, medians\n\n", default_device().str().c_str(), reps);
  std::printf("%-58s %10s %10s %9s\n", "same value vs a new value each step (us)", "same",
              "distinct", "ratio");

  Array x = random::uniform({65536}, float32, random::key(1));
  eval(x);
  double same = median_us(reps, [&](int) { eval(x * 0.5f); });
  double distinct = median_us(reps, [&](int i) { eval(x * (0.5f + 1e-4f * i)); });
  row("eager x * s, 65536 floats", same, distinct);

  auto f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0] * in[1]) + 1.0f}; });
  Array s0 = array(0.5f);
  same = median_us(reps, [&](int) { eval(f({x, s0})); });
  distinct = median_us(reps, [&](int i) { eval(f({x, array(0.5f + 1e-4f * i)})); });
  row("compiled exp(x * s) + 1 with s an input, 65536 floats", same, distinct);

  same = median_us(reps, [&](int) { eval(random::normal({1024}, float32, random::key(5))); });
  distinct = median_us(reps, [&](int) { eval(random::normal({1024})); });
  row("random::normal({1024}): key(5) vs a new key (default)", same, distinct);

  same = median_us(reps, [&](int) {
    auto g = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 0.5f}; });
    eval(g({x}));
  });
  distinct = median_us(reps, [&](int i) {
    float s = 0.5f + 1e-4f * i;
    auto g = compile([s](const std::vector<Array>& in) { return std::vector<Array>{in[0] * s}; });
    eval(g({x}));
  });
  row("a new compiled closure x * s per step, called once", same, distinct);

  std::printf("\n%-58s %10s\n", "eager per-op cost (us)", "median");
  int chain_reps = std::max(20, reps / 20);
  double chain = median_us(chain_reps, [](int) {
    Array y = array(0.0f);
    for (int k = 0; k < 1000; ++k) y = y + 1.0f;
    eval(y);
  });
  std::printf("%-58s %10.2f (goal <= 1.5)\n", "y = y + 1 x1000 on a 0-d array, one eval, per op",
              chain / 1000);
  Array a = random::uniform({1000}, float32, random::key(2));
  Array b = random::uniform({1000}, float32, random::key(3));
  eval({a, b});
  std::printf("%-58s %10.2f\n", "eval(x + y), 1000 floats",
              median_us(reps, [&](int) { eval(a + b); }));
  std::printf("%-58s %10.2f\n", "eval(random::normal({1024}))",
              median_us(reps, [&](int) { eval(random::normal({1024})); }));

  std::printf("\n%-58s %10s\n", "memory over 10,000 steps (MB of RSS growth)", "growth");
  Array small = random::uniform({4096}, float32, random::key(4));
  eval(small);
  for (int i = 0; i < 500; ++i) eval(small * (1.0f + i));  // warm the pool and caches
  double r0 = rss_mb();
  for (int i = 0; i < 10000; ++i) eval(small * (2.0f + 1e-3f * i));
  std::printf("%-58s %10.2f\n", "eager x * s with 10,000 distinct s", rss_mb() - r0);

  std::printf("\n%-58s %10s %10s\n", "compiled MLP block gelu(x@W1+b1)@W2+b2", "ms", "GFLOP/s");
  Array xm = random::normal({256, 1024}, float32, random::key(5));
  Array w1 = random::normal({1024, 4096}, float32, random::key(6)) * 0.03f;
  Array b1 = random::normal({4096}, float32, random::key(7));
  Array w2 = random::normal({4096, 1024}, float32, random::key(8)) * 0.015f;
  Array b2 = random::normal({1024}, float32, random::key(9));
  eval({xm, w1, b1, w2, b2});
  auto mlp = compile([](const std::vector<Array>& in) {
    Array h = matmul(in[0], in[1]) + in[2];
    h = h * (1.0f + erf(h / std::sqrt(2.0f))) / 2.0f;
    return std::vector<Array>{matmul(h, in[3]) + in[4]};
  });
  double ms = median_us(std::max(20, reps / 40), [&](int) { eval(mlp({xm, w1, b1, w2, b2})); });
  ms /= 1000;
  double flops = 2.0 * 2 * 256 * 1024 * 4096;
  std::printf("%-58s %10.2f %10.1f\n", "256x1024 -> 4096 -> 1024 float32", ms, flops / ms / 1e6);

  std::string dir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
  std::string cache =
      std::filesystem::temp_directory_path() / ("kiln-bench-values-" + std::to_string(::getpid()));
  std::string cmd = "KILN_CACHE_DIR=" + cache + " " + dir + "/bench_compile --first-call";
  auto child_ms = [&] {
    double v = -1;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      if (std::fscanf(p, "%lf", &v) != 1) v = -1;
      pclose(p);
    }
    return v;
  };
  double cold = child_ms(), warm = child_ms();
  std::filesystem::remove_all(cache);
  std::printf("\n%-58s %10.2f %10.2f (goals <= 25 / <= 1)\n",
              "first call of compiled gelu, ms: disk cache cold / warm", cold, warm);
  return 0;
}

// Memory and cold-compile behaviour of the cpu backend, as numbers printed by a plain main:
//  - RSS growth over many cycles of a workload (each cycle a lambda; warm-up cycles first):
//    kiln::compile of a lambda capturing a fresh 4096-float array, one call, drop (10,000
//    cycles). Add a case with one more cycles() line.
//  - RSS of a process that loads 300 structurally distinct kernels, with the default kernel
//    cache budget and with a 1 MB one (child processes, fresh disk cache each).
//  - First call of a compiled function of 16 kernels that cannot fuse (8 unary ops x sum/max
//    over rows), disk cache empty, in a fresh process: the executor compiles them concurrently.
//    Against the same 16 kernels as 16 single-kernel compiled functions called one after the
//    other (16 serial first calls), and against the 16-kernel function on 1 TBB thread.
//   build/benchmarks/bench_memory [cycles]     (default 10000)
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
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
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double resident_mb() {
  std::ifstream in("/proc/self/statm");
  double pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Runs `cycle(i)` for `warmup` cycles, then `n` measured ones; prints time and RSS growth.
void cycles(const char* name, int n, const std::function<void(int)>& cycle, int warmup = 200) {
  for (int i = 0; i < warmup; ++i) cycle(i);
  double before = resident_mb();
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) cycle(warmup + i);
  double ms = ms_since(t0);
  double after = resident_mb();
  std::printf(
      "%-44s %6d cycles  %8.1f us/cycle  RSS %7.1f -> %7.1f MB  growth %6.2f MB (goal < 8)\n", name,
      n, 1e3 * ms / n, before, after, after - before);
  std::fflush(stdout);
}

// kiln::compile of a lambda capturing a fresh 4096-float array; call once; drop.
void compile_call_drop(int i) {
  Array c = array(std::vector<float>(4096, static_cast<float>(i % 7)), {4096});
  auto f =
      compile([c](const std::vector<Array>& in) { return std::vector<Array>{in[0] * c + 1.0f}; });
  Array y = f({ones({4096})})[0];
  if (y.to_vector<float>()[0] != static_cast<float>(i % 7) + 1.0f) std::abort();
}

// ---- child processes ------------------------------------------------------------------------

// The JIT and the allocator warmed on an unrelated kernel, so a timing sees the kernels only.
Array warm_input(Shape shape) {
  Array x = random::normal(shape, float32, random::key(3));
  eval(x);
  return x;
}

// A chain of 10 unary ops picked by the bits of i: 1024 structurally distinct kernels.
Array distinct_chain(Array x, int i) {
  for (int b = 0; b < 10; ++b) x = (i >> b) & 1 ? sin(x) : tanh(x);
  return x;
}

// `--distinct N`: loads N distinct kernels (compiled, one call each); prints RSS growth in MB.
int distinct_kernels(int n) {
  StreamScope scope(device("cpu"));
  Array x = warm_input({256});
  eval(distinct_chain(x, 1023));
  double before = resident_mb();
  for (int i = 0; i < n; ++i) {
    auto f = compile(
        [i](const std::vector<Array>& in) { return std::vector<Array>{distinct_chain(in[0], i)}; });
    eval(f({x}));
  }
  std::printf("%.2f\n", resident_mb() - before);
  return 0;
}

// Output k of the 16: op k/2 of 8 unary ops, reduced over rows by sum (k even) or max.
Array sixteenth(const Array& x, int k) {
  static const std::function<Array(const Array&)> ops[8] = {
      [](const Array& a) { return exp(a); },   [](const Array& a) { return sin(a); },
      [](const Array& a) { return cos(a); },   [](const Array& a) { return tanh(a); },
      [](const Array& a) { return erf(a); },   [](const Array& a) { return sigmoid(a); },
      [](const Array& a) { return floor(a); }, [](const Array& a) { return ceil(a); }};
  Array v = ops[k / 2](x);
  return k % 2 == 0 ? sum(v, -1) : max(v, -1);
}

double cpu_ms() {  // user + system time of every thread of the process
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// `--sixteen one|separate`: first call(s) of the 16 kernels; prints wall ms, the number of
// tasks run, and the process's cpu ms (cpu / wall > 1: compiles ran in parallel).
int sixteen(const std::string& how) {
  StreamScope scope(device("cpu"));
  Array x = warm_input({64, 1024});
  ProfileScope prof;
  double cpu0 = cpu_ms();
  auto t0 = Clock::now();
  if (how == "one") {
    auto f = compile([](const std::vector<Array>& in) {
      std::vector<Array> out;
      for (int k = 0; k < 16; ++k) out.push_back(sixteenth(in[0], k));
      return out;
    });
    eval(f({x}));
  } else {
    for (int k = 0; k < 16; ++k) {
      auto f = compile(
          [k](const std::vector<Array>& in) { return std::vector<Array>{sixteenth(in[0], k)}; });
      eval(f({x}));
    }
  }
  double ms = ms_since(t0);
  std::printf("%.3f %zu %.3f\n", ms, prof.events().size(), cpu_ms() - cpu0);
  return 0;
}

// Runs this program with `args` in a fresh process; returns the numbers it printed.
std::vector<double> child(const std::string& args, const std::string& env) {
  std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::string dir =
      std::filesystem::temp_directory_path() / ("kiln-bench-memory-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string cmd = "KILN_CACHE_DIR=" + dir + " " + env + " " + self + " " + args;
  std::vector<double> out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    double v;
    while (std::fscanf(p, "%lf", &v) == 1) out.push_back(v);
    pclose(p);
  }
  std::filesystem::remove_all(dir);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// How much two threads get done here now, relative to one: 2.0 on an idle 2-core machine, less
// when other work shares the cores. The concurrent-compile ratio is bounded by it.
double parallel_capacity() {
  auto spin = [] {
    volatile double x = 0;
    for (int64_t i = 0; i < 100'000'000; ++i) x = x + 1e-9;
  };
  auto t0 = Clock::now();
  spin();
  double one = ms_since(t0);
  t0 = Clock::now();
  std::thread a(spin), b(spin);
  a.join(), b.join();
  return 2 * one / ms_since(t0);
}

void report_sixteen() {
  const int kRuns = 5;
  std::vector<double> one, separate, one_serial, one_cpu, separate_cpu;
  size_t kernels = 0;
  for (int r = 0; r < kRuns; ++r) {  // interleaved, so machine noise hits all three alike
    auto a = child("--sixteen one", "");
    auto b = child("--sixteen separate", "");
    auto c = child("--sixteen one", "KILN_BENCH_THREADS=1");
    if (a.size() < 3 || b.size() < 3 || c.size() < 3) {
      std::printf("16-kernel first call: a child failed\n");
      return;
    }
    one.push_back(a[0]), separate.push_back(b[0]), one_serial.push_back(c[0]);
    one_cpu.push_back(a[2]), separate_cpu.push_back(b[2]);
    kernels = static_cast<size_t>(a[1]);
  }
  double m1 = median(one), ms = median(separate), m1s = median(one_serial);
  double capacity = parallel_capacity();
  std::printf(
      "first call, 16 kernels (%zu tasks ran), empty disk cache, median of %d fresh processes:\n"
      "  one compiled function, kernels compiled concurrently (%d threads) %8.2f ms "
      "(cpu %.2f ms)\n"
      "  one compiled function on 1 TBB thread (compiled serially)       %8.2f ms\n"
      "  16 single-kernel compiled functions, called one after another  %8.2f ms "
      "(cpu %.2f ms)\n"
      "  16 separate / concurrent = %.2fx, 1 thread / concurrent = %.2fx (two spinning threads "
      "do %.2fx the work of one here now: the bound)\n",
      kernels, kRuns, oneapi::tbb::info::default_concurrency(), m1, median(one_cpu), m1s, ms,
      median(separate_cpu), ms / m1, m1s / m1, capacity);
}

void report_distinct() {
  const int n = 300;
  auto def = child("--distinct " + std::to_string(n), "");
  auto small = child("--distinct " + std::to_string(n), "KILN_KERNEL_CACHE_MB=1");
  std::printf(
      "RSS growth loading %d distinct kernels (one compiled call each): default kernel cache "
      "budget %.2f MB, KILN_KERNEL_CACHE_MB=1 %.2f MB\n",
      n, def.empty() ? NAN : def[0], small.empty() ? NAN : small[0]);
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<oneapi::tbb::global_control> threads;
  if (const char* t = std::getenv("KILN_BENCH_THREADS"))
    threads = std::make_unique<oneapi::tbb::global_control>(
        oneapi::tbb::global_control::max_allowed_parallelism, std::atoi(t));
  if (argc > 2 && std::string(argv[1]) == "--sixteen") return sixteen(argv[2]);
  if (argc > 2 && std::string(argv[1]) == "--distinct") return distinct_kernels(std::atoi(argv[2]));
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;

  StreamScope scope(device("cpu"));
  cycles("compile(lambda capturing 4096 floats)+call+drop", n, compile_call_drop);
  report_sixteen();
  report_distinct();
  return 0;
}

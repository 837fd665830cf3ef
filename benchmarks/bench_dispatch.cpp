// Dispatch cost of a cached compiled call: exp(-x) + y on scalars, call plus eval, on the cpu
// stream, as it runs by default (a small plan on an idle stream runs on the calling thread,
// executor/inline_policy.h) beside the same call handed to the stream's worker every time (the
// asynchronous path, the baseline) and the same expression evaluated eagerly (a new plan every
// time). Goal: the default path <= 1.5 us. Ends with a summary of the medians.
//   build/benchmarks/bench_dispatch [--benchmark_repetitions=N ...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "executor/inline_policy.h"
#include "kiln.h"

using namespace kiln;

namespace {

std::map<std::string, std::vector<double>> g_ns;  // per case, ns per iteration of each run

struct PolicyScope {
  InlinePolicy old;
  explicit PolicyScope(InlinePolicy p) : old(set_inline_policy(p)) {}
  ~PolicyScope() { set_inline_policy(old); }
};

// arg 0: the default (measured) policy; 1: always handed to the worker.
void BM_CompiledCall(benchmark::State& state) {
  PolicyScope policy(state.range(0) ? InlinePolicy::Never : InlinePolicy::Measured);
  StreamScope scope(device("cpu"));
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(-in[0]) + in[1]}; });
  Array x = array(0.5f), y = array(2.0f);
  eval({x, y});
  for (int i = 0; i < 100; ++i) eval(f({x, y}));  // trace, compile, measure the run
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Array r = f({x, y})[0];
    eval(r);
    benchmark::DoNotOptimize(r.node().get());
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  std::string name = state.range(0) ? "compiled, handed to the worker" : "compiled, default";
  g_ns[name].push_back(ns);
  state.SetLabel(name);
}
BENCHMARK(BM_CompiledCall)->Arg(0)->Arg(1)->UseRealTime();

void BM_EagerEval(benchmark::State& state) {
  StreamScope scope(device("cpu"));
  Array x = array(0.5f), y = array(2.0f);
  eval({x, y});
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Array r = exp(-x) + y;
    eval(r);
    benchmark::DoNotOptimize(r.node().get());
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  g_ns["eager"].push_back(ns);
  state.SetLabel("eager");
}
BENCHMARK(BM_EagerEval)->UseRealTime();

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  double def = median(g_ns["compiled, default"]);
  double worker = median(g_ns["compiled, handed to the worker"]);
  double eager = median(g_ns["eager"]);
  std::printf(
      "\n== summary (cpu stream, wall time per call + eval, medians of this run)\n"
      "compiled exp(-x) + y on 0-d arrays: %.2f us by default (goal <= 1.5 us), %.2f us handed "
      "to the stream's worker (%.1fx), eager %.2f us\n",
      def / 1e3, worker / 1e3, worker / def, eager / 1e3);
  return 0;
}

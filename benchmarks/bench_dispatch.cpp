// Dispatch cost of a cached compiled call: exp(-x) + y on scalars, call plus eval, on the
// default device; against the same expression evaluated eagerly (a new plan every time).
//   build/benchmarks/bench_dispatch
#include <benchmark/benchmark.h>

#include "kiln.h"

using namespace kiln;

static void BM_CompiledCall(benchmark::State& state) {
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(-in[0]) + in[1]}; });
  Array x = array(0.5f), y = array(2.0f);
  eval({x, y});
  f({x, y});  // trace and compile once
  for (auto _ : state) {
    Array r = f({x, y})[0];
    eval(r);
    benchmark::DoNotOptimize(r.node().get());
  }
  state.SetLabel(default_device().str());
}
BENCHMARK(BM_CompiledCall);

static void BM_EagerEval(benchmark::State& state) {
  Array x = array(0.5f), y = array(2.0f);
  eval({x, y});
  for (auto _ : state) {
    Array r = exp(-x) + y;
    eval(r);
    benchmark::DoNotOptimize(r.node().get());
  }
  state.SetLabel(default_device().str());
}
BENCHMARK(BM_EagerEval);

BENCHMARK_MAIN();

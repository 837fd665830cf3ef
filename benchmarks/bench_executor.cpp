// Executor overhead per task against a hand-written tbb::flow::graph running the same DAG with
// the same task body, both built once and re-run; and the time of one small (4-task diamond) plan
// run on the direct path. Ratios are printed at the end, taken in this one run.
//   build/benchmarks/bench_executor [--benchmark_min_time=...]
#include <benchmark/benchmark.h>
#include <oneapi/tbb/flow_graph.h>

#include <cstdio>
#include <map>
#include <random>

#include "executor/executor.h"
#include "graph/device_hooks.h"
#include "kiln.h"

namespace flow = oneapi::tbb::flow;
using namespace kiln;

namespace {

// Each DAG: deps[t] lists the tasks that must finish before t.
using Dag = std::vector<std::vector<int>>;

Dag chain(int n) {
  Dag d(n);
  for (int t = 1; t < n; ++t) d[t] = {t - 1};
  return d;
}

Dag fan(int n) {  // one source, n - 2 independent tasks, one sink
  Dag d(n);
  for (int t = 1; t < n - 1; ++t) d[t] = {0};
  for (int t = 1; t < n - 1; ++t) d[n - 1].push_back(t);
  return d;
}

Dag random_dag(int n, int edges, unsigned seed) {
  Dag d(n);
  std::mt19937 rng(seed);
  for (int t = 1; t < n; ++t) {
    for (int e = 0; e < edges; ++e)
      d[t].push_back(std::uniform_int_distribution<int>(0, t - 1)(rng));
    std::sort(d[t].begin(), d[t].end());
    d[t].erase(std::unique(d[t].begin(), d[t].end()), d[t].end());
  }
  return d;
}

const Dag& dag(int which) {
  static const Dag dags[] = {chain(100000), fan(100000), random_dag(50000, 4, 42), fan(4)};
  return dags[which];
}
const char* kNames[] = {"chain_100k", "fanout_fanin_100k", "random_50k_4edges", "diamond_4"};

// The same tiny body for both: touch this task's own counter.
std::vector<int64_t> g_counters(100000);

void BM_RawTbb(benchmark::State& state) {
  const Dag& d = dag(static_cast<int>(state.range(0)));
  int n = static_cast<int>(d.size());
  flow::graph g;
  std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
  for (int t = 0; t < n; ++t)
    nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
        g, [t](const flow::continue_msg&) { g_counters[t]++; }));
  std::vector<int> roots;
  for (int t = 0; t < n; ++t) {
    for (int p : d[t]) flow::make_edge(*nodes[p], *nodes[t]);
    if (d[t].empty()) roots.push_back(t);
  }
  for (auto _ : state) {
    for (int r : roots) nodes[r]->try_put(flow::continue_msg());
    g.wait_for_all();
  }
  state.counters["ns_per_task"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
  state.SetLabel(kNames[state.range(0)]);
}

Plan make_plan(const Dag& d) {
  Plan p;
  int lane = p.add_lane({StreamOrigin::Default, {}});
  for (int t = 0; t < static_cast<int>(d.size()); ++t) {
    Task task;
    task.lane = lane;
    task.name = "t";
    task.deps = d[t];
    task.host = [t] { g_counters[t]++; };
    p.add_task(std::move(task));
  }
  p.finalize();
  return p;
}

void BM_Kiln(benchmark::State& state) {
  const Dag& d = dag(static_cast<int>(state.range(0)));
  Plan p = make_plan(d);
  RunOptions opt;
  opt.path = state.range(1) ? RunOptions::Path::Direct : RunOptions::Path::Graph;
  StreamScope scope(device("reference"));
  execute(p, {}, opt);  // builds the flow graph once
  for (auto _ : state) execute(p, {}, opt);
  state.counters["ns_per_task"] = benchmark::Counter(
      static_cast<double>(d.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(kNames[state.range(0)]) + (state.range(1) ? " direct" : " graph"));
}

// Collects ns_per_task per benchmark so ratios can be printed from this one run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      // With --benchmark_repetitions, keep the median; skip mean/stddev/cv rows.
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      auto it = r.counters.find("ns_per_task");
      if (it != r.counters.end()) per_task[r.report_label] = it->second.value * 1e9;
      per_run[r.report_label] = r.GetAdjustedRealTime();
    }
  }
  std::map<std::string, double> per_task, per_run;
};

}  // namespace

BENCHMARK(BM_RawTbb)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Kiln)->Args({0, 0})->Args({1, 0})->Args({2, 0})->Args({3, 0})->Args({3, 1})->Unit(
    benchmark::kMillisecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf(
      "\nper-task overhead, Kiln executor vs raw tbb::flow::graph (same DAG, same body):\n");
  for (int i = 0; i < 3; ++i) {
    std::string n = kNames[i];
    double raw = rep.per_task[n], k = rep.per_task[n + " graph"];
    if (raw > 0 && k > 0)
      std::printf("  %-20s raw %7.1f ns/task   kiln %7.1f ns/task   ratio %.2fx (goal <= 1.3x)\n",
                  n.c_str(), raw, k, k / raw);
  }
  std::printf(
      "4-task diamond, one run: raw flow graph %.3f us, kiln graph path %.3f us, "
      "kiln direct path %.3f us (goal <= 1 us)\n",
      rep.per_run["diamond_4"] * 1e3, rep.per_run["diamond_4 graph"] * 1e3,
      rep.per_run["diamond_4 direct"] * 1e3);
  return 0;
}

// Collectives against bare MPI, and the communication lane's overlap with compute. Run under
// mpiexec (rank 0 prints):
//   mpiexec --oversubscribe --bind-to none -n 2 build/benchmarks/bench_distributed
// 1. all_sum of 64 MB of float32 (evaluated, buffers already made) against MPI_Allreduce of the
//    same buffer, alternating in one run: median of each and their ratio.
// 2. A compiled step with a large matmul and an independent all_sum, against the matmul alone
//    and the all_sum alone (each its own compiled function): ratio of the step to their sum.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "graph/array_node.h"
#include "kiln.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of f, median of `reps`, all ranks starting together.
template <typename F>
double timed(int reps, F f, dist::Group g) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    dist::all_sum(array(1), g).item<int>();  // line the ranks up
    double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  return median(t);
}

}  // namespace

int main() {
  dist::Group g = dist::init(true, "mpi");
  bool root = g.rank() == 0;
  const int64_t n = (64 << 20) / 4;  // 64 MB of float32
  Array x = full({n}, 1.0, float32);
  eval(x);
  std::vector<float> in(n, 1.0f), out(n);
  // MPI calls from this thread while Kiln's progress thread is idle: the transport is
  // MPI_THREAD_MULTIPLE, and nothing else is in flight between the timed calls.
  std::vector<double> kiln_t, mpi_t;
  for (int rep = 0; rep < 7; ++rep) {
    kiln_t.push_back(timed(
        1, [&] { eval(dist::all_sum(x, g)); }, g));
    mpi_t.push_back(timed(
        1,
        [&] {
          MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        },
        g));
  }
  double k = median(kiln_t), m = median(mpi_t);
  if (root)
    std::printf(
        "all_sum 64 MB float32, %d ranks: kiln %.1f ms, MPI_Allreduce %.1f ms, ratio %.2f\n",
        g.size(), 1e3 * k, 1e3 * m, k / m);

  // The overlap: matmul 1024^3 (compute) and an all_sum of 16 MB (communication).
  Array a = random::uniform({1024, 1024}, float32, random::key(1));
  Array c = full({(16 << 20) / 4}, 1.0, float32);
  eval({a, c});
  auto mm = compile(
      [](const std::vector<Array>& in) -> std::vector<Array> { return {matmul(in[0], in[0])}; });
  auto ar = compile([g](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(in[0], g)};
  });
  auto both = compile([g](const std::vector<Array>& in) -> std::vector<Array> {
    return {matmul(in[0], in[0]), dist::all_sum(in[1], g)};
  });
  for (int w = 0; w < 2; ++w) eval(mm({a})), eval(ar({c})), eval(both({a, c}));  // warm up
  std::vector<double> tm, ta, tb;
  for (int rep = 0; rep < 7; ++rep) {
    tm.push_back(timed(
        1, [&] { eval(mm({a})); }, g));
    ta.push_back(timed(
        1, [&] { eval(ar({c})); }, g));
    tb.push_back(timed(
        1,
        [&] {
          eval(both({a, c}));
        },
        g));
  }
  double mt = median(tm), at = median(ta), bt = median(tb);
  if (root)
    std::printf(
        "matmul 1024^3 %.1f ms, all_sum 16 MB %.1f ms, both in one step %.1f ms: "
        "%.2f of their sum\n",
        1e3 * mt, 1e3 * at, 1e3 * bt, bt / (mt + at));
  return 0;
}

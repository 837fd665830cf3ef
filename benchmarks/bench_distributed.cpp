// Collectives against bare MPI, and the communication lane's overlap with compute. Run under
// mpiexec (rank 0 prints):
//   mpiexec --oversubscribe --bind-to none -n 2 build/benchmarks/bench_distributed
// 1. all_sum of 64 MB of float32 (evaluated, buffers already made) against MPI_Allreduce of the
//    same buffer, alternating in one run: median of each and their ratio.
// 2. A compiled step with a large matmul and an independent all_sum, against the matmul alone
//    and the all_sum alone (each its own compiled function): ratio of the step to their sum.
// 3. Placement on ranks: a compiled call whose 64 MB value is made on rank 0 and read on rank 1
//    (one cut edge), against MPI_Send/MPI_Recv of the same bytes plus the two stages' own time
//    in one process (the same call without placement): the cost of the crossing.
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

  // Placement on ranks: x + 1 on rank 0, then * 2 on rank 1 (64 MB crossing).
  Device d = default_device();
  auto stages = [d](bool ranks) {
    return compile([d, ranks](const std::vector<Array>& in) -> std::vector<Array> {
      auto on = [&](int r, auto f, const Array& v) {
        return ranks ? compute_on(Device{d.backend, d.index, r}, f)(v) : f(v);
      };
      Array h = on(
          0, [](const Array& v) { return v + 1.0f; }, in[0]);
      return {on(
          1, [](const Array& v) { return v * 2.0f; }, h)};
    });
  };
  auto placed = stages(true), alone = stages(false);
  auto settle = [](const Array& y) {  // rank 1 has y; the others wait for their part
    try {
      eval(y);
    } catch (const Error&) {
    }
  };
  for (int w = 0; w < 2; ++w) settle(placed({x})[0]), eval(alone({x})[0]);
  std::vector<double> tp, tl, ts;
  for (int rep = 0; rep < 7; ++rep) {
    tp.push_back(timed(
        1, [&] { settle(placed({x})[0]); }, g));
    tl.push_back(timed(
        1, [&] { eval(alone({x})[0]); }, g));
    ts.push_back(timed(
        1,
        [&] {
          if (g.rank() == 0)
            MPI_Send(in.data(), static_cast<int>(n), MPI_FLOAT, 1, 7, MPI_COMM_WORLD);
          else if (g.rank() == 1)
            MPI_Recv(out.data(), static_cast<int>(n), MPI_FLOAT, 0, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        },
        g));
  }
  double pt = median(tp), lt = median(tl), st = median(ts);
  if (root)
    std::printf(
        "placed on ranks 0 -> 1, 64 MB crossing: %.1f ms; one process %.1f ms + MPI_Send/Recv "
        "%.1f ms = %.1f ms: ratio %.2f\n",
        1e3 * pt, 1e3 * lt, 1e3 * st, 1e3 * (lt + st), pt / (lt + st));
  return 0;
}

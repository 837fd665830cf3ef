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
// Over emulated hosts (tools/cluster/cluster.sh, docs/cluster.md), where each rank has its own
// link, every communication time is printed beside the link's own bound: the bytes each rank
// must send over its link, divided by the link's rate (KILN_CLUSTER_RATE, which cluster.sh sets,
// or --rate RATE in tc's units: 1gbit, 10gbit). A ring all-reduce of B bytes on n ranks sends
// 2(n-1)/n x B over each link (each direction: the links are full duplex); a send, B.
// Options (every rank gets the same):
//   --rate RATE       the link's rate, if KILN_CLUSTER_RATE is not set
//   --overlap-mb M    the all_sum of the overlap step, in MB (default 16)
//   --matmul N|auto   the overlap step's matmul N^3 (default 1024); auto: sized from a first
//                     measurement so that it takes about as long as the all_sum alone, where
//                     overlap can hide the most (the step can at best take max of the two,
//                     i.e. half their sum when they are equal)
//   --only all_sum|overlap|placed   one section
//   --trace K         after the overlap's timing, K more calls of the step under a ProfileScope:
//                     every rank prints when each task of each call started and ended (ms from
//                     the call's first task), to see whether the all_sum started before the
//                     matmul or waited for it
#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

// A tc rate ("1gbit", "100mbit", "10gbit", "125mbps": bytes) in bytes per second; 0 if none.
double parse_rate(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  std::string unit(end);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 1;
  if (!unit.empty() && std::strchr("kmgt", unit[0])) {
    scale = unit[0] == 'k' ? 1e3 : unit[0] == 'm' ? 1e6 : unit[0] == 'g' ? 1e9 : 1e12;
    unit.erase(0, 1);
  }
  if (unit == "bit") return v * scale / 8;
  if (unit == "bps") return v * scale;
  return 0;
}

struct Link {
  double rate = 0;  // bytes per second each way; 0: not over a known link
  std::string name;
  // Seconds the link needs for an all-reduce of `bytes` on n ranks (ring: 2(n-1)/n x bytes
  // over each link) or one message of `bytes`.
  double allreduce(double bytes, int n) const { return 2.0 * (n - 1) / n * bytes / rate; }
  double message(double bytes) const { return bytes / rate; }
  // " (the link's bound B ms: kiln Rx, ...)" for the named times.
  std::string beside(double bound, std::vector<std::pair<const char*, double>> times) const {
    if (rate <= 0) return "";
    char buf[256];
    std::string s = "; the link's bound ";
    std::snprintf(buf, sizeof buf, "%.1f ms:", 1e3 * bound);
    s += buf;
    for (auto& [what, t] : times) {
      std::snprintf(buf, sizeof buf, " %s %.2fx", what, t / bound);
      s += buf;
    }
    return s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  dist::Group g = dist::init(true, "mpi");
  bool root = g.rank() == 0;
  Link link;
  std::string only, matmul_arg = "1024";
  int64_t overlap_mb = 16;
  int trace = 0;
  if (const char* r = std::getenv("KILN_CLUSTER_RATE")) link.rate = parse_rate(r), link.name = r;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--rate" && !link.rate)
      link.rate = parse_rate(v.c_str()), link.name = v;
    else if (k == "--overlap-mb")
      overlap_mb = std::atoll(v.c_str());
    else if (k == "--matmul")
      matmul_arg = v;
    else if (k == "--only")
      only = v;
    else if (k == "--trace")
      trace = std::atoi(v.c_str());
  }
  auto section = [&](const char* name) { return only.empty() || only == name; };
  int ranks = g.size();
  if (root && link.rate > 0)
    std::printf(
        "link: %s each way per host (%.0f MB/s), %d hosts: a ring all-reduce sends 2(n-1)/n = "
        "%.2f x its bytes over each link\n",
        link.name.c_str(), link.rate / 1e6, ranks, 2.0 * (ranks - 1) / ranks);
  const int64_t n = (64 << 20) / 4;  // 64 MB of float32
  Array x = full({n}, 1.0, float32);
  eval(x);
  std::vector<float> in(n, 1.0f), out(n);
  // MPI calls from this thread while Kiln's progress thread is idle: the transport is
  // MPI_THREAD_MULTIPLE, and nothing else is in flight between the timed calls.
  // MPI_Iallreduce + MPI_Wait is the call Kiln's progress thread makes (polled with MPI_Test):
  // Open MPI serves it with libnbc's algorithms, MPI_Allreduce with coll/tuned's, which differ.
  if (section("all_sum")) {
    std::vector<double> kiln_t, mpi_t, impi_t;
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
      impi_t.push_back(timed(
          1,
          [&] {
            MPI_Request req;
            MPI_Iallreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
          },
          g));
    }
    double k = median(kiln_t), m = median(mpi_t), im = median(impi_t);
    if (root)
      std::printf(
          "all_sum 64 MB float32, %d ranks: kiln %.1f ms, MPI_Allreduce %.1f ms, ratio %.2f; "
          "MPI_Iallreduce %.1f ms (kiln / it %.2f)%s\n",
          g.size(), 1e3 * k, 1e3 * m, k / m, 1e3 * im, k / im,
          link.beside(link.rate > 0 ? link.allreduce(4.0 * n, ranks) : 0,
                      {{"kiln", k}, {"MPI_Allreduce", m}, {"MPI_Iallreduce", im}})
              .c_str());
  }
  if (!section("overlap") && !section("placed")) return 0;

  // The overlap: a matmul (compute) and an independent all_sum (communication).
  const int64_t cn = (overlap_mb << 20) / 4;
  Array c = full({cn}, 1.0, float32);
  eval(c);
  auto mm = compile(
      [](const std::vector<Array>& in) -> std::vector<Array> { return {matmul(in[0], in[0])}; });
  auto ar = compile([g](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(in[0], g)};
  });
  auto both = compile([g](const std::vector<Array>& in) -> std::vector<Array> {
    return {matmul(in[0], in[0]), dist::all_sum(in[1], g)};
  });
  // --matmul auto: the time of a 1024^3 matmul and of the all_sum alone give the size whose
  // matmul takes as long as the all_sum (time ~ N^3), a multiple of 128 in 512..4096; rank 0's
  // choice is every rank's.
  int64_t mn = matmul_arg == "auto" ? 1024 : std::atoll(matmul_arg.c_str());
  if (matmul_arg == "auto" && section("overlap")) {
    Array a0 = random::uniform({1024, 1024}, float32, random::key(1));
    eval(a0);
    for (int w = 0; w < 2; ++w) eval(mm({a0})), eval(ar({c}));
    std::vector<double> t0, t1;
    for (int rep = 0; rep < 3; ++rep) {
      t0.push_back(timed(
          1, [&] { eval(mm({a0})); }, g));
      t1.push_back(timed(
          1, [&] { eval(ar({c})); }, g));
    }
    double want = 1024 * std::cbrt(median(t1) / median(t0));
    long long size = std::clamp<long long>(std::llround(want / 128) * 128, 512, 4096);
    MPI_Bcast(&size, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    mn = size;
  }
  Array a = random::uniform({mn, mn}, float32, random::key(1));
  eval(a);
  if (section("overlap")) {
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
          "matmul %lld^3 %.1f ms, all_sum %lld MB %.1f ms, both in one step %.1f ms: "
          "%.2f of their sum (at best %.2f: the longer of the two)%s\n",
          static_cast<long long>(mn), 1e3 * mt, static_cast<long long>(overlap_mb), 1e3 * at,
          1e3 * bt, bt / (mt + at), std::max(mt, at) / (mt + at),
          link.beside(link.rate > 0 ? link.allreduce(4.0 * cn, ranks) : 0, {{"all_sum", at}})
              .c_str());
  }
  for (int call = 0; call < trace; ++call) {
    std::vector<TaskEvent> events;
    dist::all_sum(array(1), g).item<int>();  // line the ranks up
    {
      ProfileScope scope;
      eval(both({a, c}));
      events = scope.events();
    }
    int64_t t0 = events.empty() ? 0 : events[0].start_ns;
    for (auto& e : events) t0 = std::min(t0, e.start_ns);
    std::string line;
    for (auto& e : events) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %s %.1f..%.1f", e.name.c_str(), 1e-6 * (e.start_ns - t0),
                    1e-6 * (e.end_ns - t0));
      line += buf;
    }
    std::printf("trace rank %d call %d (ms):%s\n", g.rank(), call, line.c_str());
    std::fflush(stdout);
  }
  if (!section("placed")) return 0;

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
        "%.1f ms = %.1f ms: ratio %.2f%s\n",
        1e3 * pt, 1e3 * lt, 1e3 * st, 1e3 * (lt + st), pt / (lt + st),
        link.beside(link.rate > 0 ? link.message(4.0 * n) : 0,
                    {{"MPI_Send/Recv", st}, {"placed", pt}})
            .c_str());
  return 0;
}

// The jobs soak: 100,000 small compiled jobs (a cached call of x * 2 + s) submitted from 8
// threads to 4 lanes on every device (cpu and reference, two streams each), with failing,
// cancelled and overdue jobs mixed in. Prints jobs/s, submit-to-end latency percentiles, the
// end states, and memory before and after each of three rounds (flat means nothing is kept).
//   build/benchmarks/bench_jobs [jobs]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include <malloc.h>
#include <unistd.h>

#include "kiln.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double rss_mb() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// Bytes in live heap blocks (every malloc arena): what a leak would grow. RSS alone also counts
// freed memory glibc keeps in the producers' per-thread arenas.
double heap_mb() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1 << 20);
}

struct Round {
  double seconds = 0;
  std::vector<double> latency_us;  // submit -> end, per job
  std::map<JobStatus, int> states;
  int wrong = 0;  // succeeded with a wrong output
};

Round run_round(int total, const std::vector<Stream>& lanes, const CompiledFunction& f) {
  const int threads = 8;
  Scheduler sched({.workers = 0, .capacity = 1024});
  std::mutex mu;
  std::vector<std::pair<Job, float>> all;
  all.reserve(total);
  auto t0 = Clock::now();
  std::vector<std::thread> producers;
  for (int p = 0; p < threads; ++p)
    producers.emplace_back([&, p] {
      std::mt19937 rng(p + 1);
      std::vector<std::pair<Job, float>> mine;
      for (int i = p; i < total; i += threads) {
        int lane = static_cast<int>(rng() % lanes.size()), kind = static_cast<int>(rng() % 100);
        Fn fn = [kind, &f](const std::vector<Array>& in) {
          if (kind == 0) throw Error("planned failure");
          return f(in);
        };
        JobOptions o{.stream = lanes[lane]};
        if (kind == 1) o.deadline = Clock::now();  // overdue on arrival
        float s = static_cast<float>(i);
        Job j = sched.submit(fn, {array(std::vector<float>{1, 2}, {2}), array(s)}, o);
        if (kind == 2) j.cancel();
        mine.emplace_back(j, s);
      }
      std::lock_guard<std::mutex> lk(mu);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  for (auto& t : producers) t.join();
  sched.wait_all();
  Round r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& [j, s] : all) {
    ++r.states[j.status()];
    JobTimes t = j.times();
    r.latency_us.push_back(
        std::chrono::duration<double, std::micro>(t.finished - t.submitted).count());
    if (j.status() == JobStatus::Succeeded &&
        j.outputs()[0].to_vector<float>() != std::vector<float>{2 + s, 4 + s})
      ++r.wrong;
  }
  std::sort(r.latency_us.begin(), r.latency_us.end());
  return r;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  int total = argc > 1 ? std::atoi(argv[1]) : 100000;
  std::vector<Stream> lanes;
  for (const DeviceInfo& d : devices())
    if (d.available) {
      lanes.push_back(default_stream(d.device));
      lanes.push_back(new_stream(d.device));
    }
  CompiledFunction f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0f + in[1]}; });
  std::printf("%d jobs from 8 threads on %zu lanes:", total, lanes.size());
  for (const Stream& s : lanes) std::printf(" %s", s.str().c_str());
  std::printf("\n1%% failing, 1%% overdue on arrival, 1%% cancelled after submit\n\n");
  double rss0 = rss_mb(), heap0 = heap_mb();
  for (int round = 1; round <= 3; ++round) {
    Round r = run_round(total, lanes, f);
    std::printf(
        "round %d: %.0f jobs/s (%.2f s); submit->end latency p50 %.0f us, p99 %.0f us, "
        "max %.0f us\n",
        round, total / r.seconds, r.seconds, percentile(r.latency_us, 0.5),
        percentile(r.latency_us, 0.99), r.latency_us.empty() ? 0 : r.latency_us.back());
    std::printf("  ended:");
    for (auto& [s, n] : r.states) std::printf(" %s %d,", job_status_name(s), n);
    std::printf(" wrong outputs %d, lost %d\n", r.wrong,
                total - static_cast<int>(r.latency_us.size()));
    double rss = rss_mb();
    malloc_trim(0);
    std::printf(
        "  live heap %.1f MB (start %.1f MB); RSS %.1f MB, %.1f MB after malloc_trim "
        "(start %.1f MB)\n",
        heap_mb(), heap0, rss, rss_mb(), rss0);
  }
  return 0;
}

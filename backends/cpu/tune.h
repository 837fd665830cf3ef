// Choices that depend on the host, made by measuring it: a choice has a key naming the problem
// class ("matmul/f32/256x1024x1024/b1/t2") and candidates that do the same work differently. On
// first use the candidates are timed briefly (round by round, interleaved, fastest round of each,
// in CPU time of the calling thread) and the fastest wins. Winners and every candidate's time are
// kept in memory and in a table on disk beside the kernel cache (DiskCache::directory()), one table
// per family and host (CPU model, library versions, Kiln's version), so a later process skips the
// measurement; a table for another host, and entries that do not verify or name other candidates,
// are ignored and measured again. An environment variable per family forces a candidate
// (debugging). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cpu {

// A candidate does its work on the calling thread alone: it is timed by the thread's CPU time,
// which time spent preempted by the machine's other work does not inflate (a loaded machine's
// wall times picked the wrong matmul library here), so one quiet core is not even needed.
struct TuneCandidate {
  std::string id;             // stable, no spaces: what the table and the variable name it by
  std::function<void()> run;  // the work once, on the calling thread
};

struct TuneResult {
  std::string key;
  std::vector<std::pair<std::string, double>> seconds;  // each candidate's fastest run
  std::string winner;
  bool from_disk = false;  // read from the table rather than measured by this process
};

class Tuner {
 public:
  // `family` names the table ("matmul"); `host` is everything besides the key a result depends
  // on; `force_env` is the variable that forces a candidate ("KILN_MATMUL"), read at every choice.
  Tuner(std::string family, std::string host, std::string force_env);

  // The candidate to use for `key` among `ids`: the forced one (kiln::Error if it is not among
  // `ids`), the only one, a known result, or the winner of measuring make()'s candidates now.
  // One measurement runs at a time, isolated from the caller's other TBB work.
  std::string choose(const std::string& key, const std::vector<std::string>& ids,
                     const std::function<std::vector<TuneCandidate>()>& make);

  // Measures `candidates` for `key` now and records the result in memory and on disk.
  TuneResult measure(const std::string& key, const std::vector<TuneCandidate>& candidates);

  // Every result in memory and in the table on disk, by key.
  std::vector<TuneResult> table();

  // The table's file ("" when the cache folder is refused), and the variable forcing a choice.
  std::string path() const;
  const std::string& force_env() const { return force_env_; }

  // Forgets what memory holds, so the next choice reads the disk again: a known key is answered
  // from memory without looking at the folder, which tests redirect (KILN_CACHE_DIR).
  void forget();

  // Time spent measuring so far in this process, in seconds.
  double seconds_measuring() const;

 private:
  std::string family_, host_, force_env_;
  mutable std::shared_mutex mu_;  // guards known_ and loaded_from_
  std::map<std::string, TuneResult> known_;
  std::string loaded_from_;  // the table file known_ was filled from
  std::mutex measuring_;     // one measurement at a time: two would slow each other
  double seconds_measuring_ = 0;

  const TuneResult* find_locked(const std::string& key, const std::vector<std::string>& ids) const;
  void load_if_needed();
  TuneResult measure_now(const std::string& key, const std::vector<TuneCandidate>& candidates);
  void store(const TuneResult& r);
};

// Each candidate's fastest run in seconds of the calling thread's CPU time: every candidate
// once untimed (first-use costs) and once timed, then rounds that time each once (several runs
// per sample when one run is shorter than kMinSampleSeconds), at least kMinRounds and at most
// kMaxRounds, stopping after the minimum once `budget_seconds` of wall time have passed.
constexpr int kMinRounds = 3, kMaxRounds = 9;
constexpr double kMinSampleSeconds = 50e-6;
std::vector<double> time_candidates(const std::vector<TuneCandidate>& candidates,
                                    double budget_seconds);
double thread_cpu_seconds();

// "AMD EPYC 9B45 family 26 model 2 stepping 1": the CPU as /proc/cpuinfo names it.
std::string host_cpu_model();

}  // namespace kiln::cpu

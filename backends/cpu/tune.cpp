#include "backends/cpu/tune.h"

#include <tbb/task_arena.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cpu/disk_cache.h"
#include "graph/error.h"
#include "graph/hash.h"

namespace kiln::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// Time allowed for one key's rounds once kMinRounds are done: enough for a few runs of the
// largest problem a class measures, short enough that first use goes unnoticed.
constexpr double kBudgetSeconds = 0.02;

constexpr char kFormat[] = "kiln-tune 1";

std::string joined(const std::vector<std::string>& ids) {
  std::string s;
  for (const std::string& id : ids) s += (s.empty() ? "" : ", ") + id;
  return s;
}

bool same_ids(const TuneResult& r, const std::vector<std::string>& ids) {
  if (r.seconds.size() != ids.size()) return false;
  for (const auto& [id, s] : r.seconds)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) return false;
  return true;
}

// One entry line: "KEY WINNER ID=SECONDS ... #CHECKSUM", the checksum over what precedes " #".
std::string entry_line(const TuneResult& r) {
  std::ostringstream s;
  s << r.key << " " << r.winner;
  for (const auto& [id, sec] : r.seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", sec);
    s << " " << id << "=" << buf;
  }
  std::string body = s.str();
  return body + " #" + hex64(fnv1a(body.data(), body.size()));
}

// The entry a line holds, or false when it does not verify (truncated, edited, garbage).
bool parse_entry(const std::string& line, TuneResult& r) {
  size_t hash = line.rfind(" #");
  if (hash == std::string::npos) return false;
  std::string body = line.substr(0, hash);
  if (line.substr(hash + 2) != hex64(fnv1a(body.data(), body.size()))) return false;
  std::istringstream in(body);
  if (!(in >> r.key >> r.winner)) return false;
  bool winner_listed = false;
  for (std::string field; in >> field;) {
    size_t eq = field.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    char* end = nullptr;
    std::string number = field.substr(eq + 1);
    double sec = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !std::isfinite(sec) || sec < 0) return false;
    r.seconds.emplace_back(field.substr(0, eq), sec);
    winner_listed |= r.seconds.back().first == r.winner;
  }
  r.from_disk = true;
  return winner_listed;
}

// The entries of the table at `path` written for this family and host; none when it is
// missing, unreadable, or another host's or format's.
std::map<std::string, TuneResult> read_table(const std::string& path, const std::string& family,
                                             const std::string& host) {
  std::map<std::string, TuneResult> out;
  std::ifstream f(path);
  std::string format, fam, h;
  if (!f || !std::getline(f, format) || !std::getline(f, fam) || !std::getline(f, h)) return out;
  if (format != kFormat || fam != "family " + family || h != "host " + host) return out;
  for (std::string line; std::getline(f, line);) {
    TuneResult r;
    if (parse_entry(line, r)) out[r.key] = std::move(r);
  }
  return out;
}

// Best effort, like the kernel cache: a private temporary renamed over the table, so readers
// in other processes see the old table or the new one, never half of one.
void write_table(const std::string& path, const std::string& family, const std::string& host,
                 const std::map<std::string, TuneResult>& entries) {
  static std::atomic<uint64_t> serial{0};
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(serial++);
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return;
    f << kFormat << "\nfamily " << family << "\nhost " << host << "\n";
    for (const auto& [key, r] : entries) f << entry_line(r) << "\n";
    if (!f) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

double thread_cpu_seconds() {
  timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<double> time_candidates(const std::vector<TuneCandidate>& candidates,
                                    double budget_seconds) {
  size_t n = candidates.size();
  std::vector<double> best(n, INFINITY);
  std::vector<int> reps(n, 1);
  // The first run pays first-use costs (a oneDNN primitive's JIT, page faults); the second sets
  // how many runs one sample takes, so that each spans at least kMinSampleSeconds.
  for (size_t i = 0; i < n; ++i) {
    candidates[i].run();
    double t0 = thread_cpu_seconds();
    candidates[i].run();
    best[i] = thread_cpu_seconds() - t0;
    reps[i] = static_cast<int>(std::clamp(kMinSampleSeconds / std::max(best[i], 1e-9), 1.0, 1e3));
  }
  auto start = Clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    if (round >= kMinRounds &&
        std::chrono::duration<double>(Clock::now() - start).count() > budget_seconds)
      break;
    for (size_t i = 0; i < n; ++i) {
      double t0 = thread_cpu_seconds();
      for (int r = 0; r < reps[i]; ++r) candidates[i].run();
      best[i] = std::min(best[i], (thread_cpu_seconds() - t0) / reps[i]);
    }
  }
  return best;
}

std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::map<std::string, std::string> fields;
  for (std::string line; std::getline(in, line) && !line.empty();) {  // the first processor
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    fields[name] = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  if (fields.empty()) return "unknown cpu";
  return fields["model name"] + " family " + fields["cpu family"] + " model " + fields["model"] +
         " stepping " + fields["stepping"];
}

Tuner::Tuner(std::string family, std::string host, std::string force_env)
    : family_(std::move(family)), host_(std::move(host)), force_env_(std::move(force_env)) {}

std::string Tuner::path() const {
  std::string dir = DiskCache::directory();
  if (dir.empty()) return "";
  return dir + "/tune-" + family_ + "-" + hex64(fnv1a(host_.data(), host_.size())) + ".txt";
}

const TuneResult* Tuner::find_locked(const std::string& key,
                                     const std::vector<std::string>& ids) const {
  auto it = known_.find(key);
  return it != known_.end() && same_ids(it->second, ids) ? &it->second : nullptr;
}

void Tuner::load_if_needed() {
  std::string p = path();
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (p == loaded_from_) return;  // "" both times: no disk table, memory alone
  known_ = p.empty() ? std::map<std::string, TuneResult>{} : read_table(p, family_, host_);
  loaded_from_ = p;
}

std::string Tuner::choose(const std::string& key, const std::vector<std::string>& ids,
                          const std::function<std::vector<TuneCandidate>()>& make) {
  if (const char* forced = std::getenv(force_env_.c_str());
      forced && *forced && std::string(forced) != "auto") {
    if (std::find(ids.begin(), ids.end(), forced) != ids.end()) return forced;
    throw_error(force_env_, "=", forced, " cannot run ", key, ": its candidates are ", joined(ids),
                " (or auto: measured)");
  }
  if (ids.size() == 1) return ids[0];
  {  // the common case: known in memory, no look at the file system
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (const TuneResult* r = find_locked(key, ids)) return r->winner;
  }
  load_if_needed();
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (const TuneResult* r = find_locked(key, ids)) return r->winner;
  }
  std::lock_guard<std::mutex> one_at_a_time(measuring_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (const TuneResult* r = find_locked(key, ids)) return r->winner;  // measured meanwhile
  }
  return measure_now(key, make()).winner;
}

TuneResult Tuner::measure(const std::string& key, const std::vector<TuneCandidate>& candidates) {
  std::lock_guard<std::mutex> one_at_a_time(measuring_);
  return measure_now(key, candidates);
}

TuneResult Tuner::measure_now(const std::string& key,
                              const std::vector<TuneCandidate>& candidates) {
  if (candidates.empty()) throw_error("tune: no candidates for ", key);
  if (key.empty() || key.find_first_of(" \n#") != std::string::npos)
    throw_error("tune: a key has no spaces, newlines or '#', got '", key, "'");
  for (const TuneCandidate& c : candidates)
    if (c.id.empty() || c.id.find_first_of(" \n#=") != std::string::npos)
      throw_error("tune: a candidate id has no spaces, newlines, '#' or '=', got '", c.id, "'");
  auto t0 = Clock::now();
  // Isolated: while this thread waits in a candidate's parallel loop it takes none of the
  // caller's other tasks, which could need a measurement themselves or add to the timing.
  std::vector<double> seconds;
  tbb::this_task_arena::isolate([&] { seconds = time_candidates(candidates, kBudgetSeconds); });
  TuneResult r;
  r.key = key;
  for (size_t i = 0; i < candidates.size(); ++i)
    r.seconds.emplace_back(candidates[i].id, seconds[i]);
  r.winner = std::min_element(r.seconds.begin(), r.seconds.end(), [](const auto& a, const auto& b) {
               return a.second < b.second;
             })->first;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    seconds_measuring_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  store(r);
  return r;
}

void Tuner::store(const TuneResult& r) {
  load_if_needed();
  std::unique_lock<std::shared_mutex> lock(mu_);
  known_[r.key] = r;
  if (loaded_from_.empty()) return;
  // Entries other processes wrote since this one read the table are kept.
  std::map<std::string, TuneResult> entries = read_table(loaded_from_, family_, host_);
  entries[r.key] = r;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(loaded_from_).parent_path(), ec);
  write_table(loaded_from_, family_, host_, entries);
  for (auto& [key, e] : entries) known_.emplace(key, e);
}

std::vector<TuneResult> Tuner::table() {
  load_if_needed();
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<TuneResult> out;
  for (const auto& [key, r] : known_) out.push_back(r);
  return out;
}

void Tuner::forget() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  known_.clear();
  loaded_from_.clear();
}

double Tuner::seconds_measuring() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return seconds_measuring_;
}

}  // namespace kiln::cpu

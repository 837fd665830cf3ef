#include "executor/profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>

#include "executor/profile_record.h"
#include "graph/error.h"

namespace kiln {

namespace {
std::atomic<int> g_active{0};
std::mutex g_mu;
std::vector<ProfileScope*> g_scopes;
std::atomic<int> g_next_thread{0};
thread_local int t_thread = -1;
std::mutex g_hold_mu;
std::condition_variable g_hold_cv;
int g_holds = 0;  // asynchronous submissions made while profiling, not complete yet

void wait_for_holds() {
  std::unique_lock<std::mutex> lock(g_hold_mu);
  g_hold_cv.wait(lock, [] { return g_holds == 0; });
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}
}  // namespace

ProfileScope::ProfileScope() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_scopes.push_back(this);
  g_active.fetch_add(1);
}

ProfileScope::~ProfileScope() {
  wait_for_holds();
  std::lock_guard<std::mutex> lock(g_mu);
  g_scopes.erase(std::find(g_scopes.begin(), g_scopes.end(), this));
  g_active.fetch_sub(1);
}

bool profile_active() { return g_active.load(std::memory_order_relaxed) > 0; }

int64_t profile_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reaches the scopes' private event lists for profile_record.
struct ProfileRecorder {
  static void add(ProfileScope& s, const TaskEvent& e) {
    std::lock_guard<std::mutex> l(s.mu_);
    s.events_.push_back(e);
  }
};

void profile_record(const TaskEvent& e) {
  if (t_thread < 0) t_thread = g_next_thread.fetch_add(1);
  TaskEvent ev = e;
  ev.thread = t_thread;
  std::lock_guard<std::mutex> lock(g_mu);
  for (ProfileScope* s : g_scopes) ProfileRecorder::add(*s, ev);
}

void profile_hold() {
  std::lock_guard<std::mutex> lock(g_hold_mu);
  ++g_holds;
}

void profile_release() {
  std::lock_guard<std::mutex> lock(g_hold_mu);
  if (--g_holds == 0) g_hold_cv.notify_all();
}

std::vector<TaskEvent> ProfileScope::events() const {
  wait_for_holds();
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void ProfileScope::write_chrome_trace(const std::string& path) const {
  std::vector<TaskEvent> evs = events();
  int64_t t0 = evs.empty() ? 0 : evs.front().start_ns;
  for (const TaskEvent& e : evs) t0 = std::min(t0, e.start_ns);
  std::ofstream out(path);
  if (!out) throw_error("write_chrome_trace: cannot open '", path, "' for writing");
  out << "{\"traceEvents\":[\n";
  for (size_t i = 0; i < evs.size(); ++i) {
    const TaskEvent& e = evs[i];
    out << "{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << json_escape(e.device.str())
        << "\",\"ph\":\"X\",\"ts\":" << (e.start_ns - t0) / 1000.0
        << ",\"dur\":" << (e.end_ns - e.start_ns) / 1000.0 << ",\"pid\":\""
        << json_escape(e.device.str()) << "\",\"tid\":\"" << json_escape(e.stream.str())
        << "\",\"args\":{\"thread\":" << e.thread << "}}" << (i + 1 < evs.size() ? ",\n" : "\n");
  }
  out << "],\"displayTimeUnit\":\"ns\"}\n";
  if (!out) throw_error("write_chrome_trace: writing '", path, "' failed");
}

}  // namespace kiln

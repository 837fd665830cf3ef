#include "executor/pending_work.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "executor/cancel.h"
#include "executor/in_flight.h"
#include "executor/lanes.h"
#include "executor/plan.h"
#include "executor/profile_record.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln {

namespace {

struct Registry {
  std::mutex mu;
  InFlightCall* calls = nullptr;  // intrusive lists: registering allocates nothing
  BlockedScope* blocked = nullptr;
  uint64_t next_id = 1;
};
Registry& registry() {
  static Immortal<Registry> r;  // calls may end on driver threads during exit
  return r.get();
}

template <class T>
void link(T*& head, T& x) {
  x.prev = nullptr;
  x.next = head;
  if (head) head->prev = &x;
  head = &x;
}
template <class T>
void unlink(T*& head, T& x) {
  if (x.prev) x.prev->next = x.next;
  if (x.next) x.next->prev = x.prev;
  if (head == &x) head = x.next;
  x.prev = x.next = nullptr;
}

const char* phase_name(TaskPhase p, bool inline_lane) {
  switch (p) {
    case TaskPhase::Waiting: return "not started";
    case TaskPhase::Starting:
      return inline_lane ? "running on the host" : "inside the backend's call";
    case TaskPhase::Queued: return "queued on the device";
    case TaskPhase::Done: return "done";
  }
  return "?";
}

std::string thread_label(int tid) {
  char name[32] = "";
  std::string comm = "/proc/self/task/" + std::to_string(tid) + "/comm";
  if (FILE* f = std::fopen(comm.c_str(), "r")) {
    if (std::fgets(name, sizeof name, f)) {
      for (char* c = name; *c; ++c)
        if (*c == '\n') *c = 0;
    }
    std::fclose(f);
  }
  std::string s = "thread " + std::to_string(tid);
  if (*name) s += std::string(" (") + name + ")";
  if (tid == getpid()) s += " [main]";
  return s;
}

double seconds_since(int64_t ns) { return static_cast<double>(profile_now_ns() - ns) * 1e-9; }

void describe_call(const InFlightCall& c, PendingWork& w) {
  const Plan& plan = *c.plan;
  const auto& tasks = plan.tasks();
  PendingCall pc{c.id, seconds_since(c.start_ns), static_cast<int>(tasks.size()), 0};
  auto lane_of = [&](int t) { return (*c.lanes)[tasks[t].lane]; };
  for (size_t t = 0; t < tasks.size(); ++t) {
    TaskPhase p = c.phases[t].load(std::memory_order_relaxed);
    if (p == TaskPhase::Done) {
      ++pc.done;
      continue;
    }
    Lane* lane = lane_of(static_cast<int>(t));
    PendingTask task{
        c.id, lane->stream.str(), tasks[t].name, phase_name(p, lane->inline_queue), {}};
    for (int d : tasks[t].deps) {
      TaskPhase dp = c.phases[d].load(std::memory_order_relaxed);
      if (dp == TaskPhase::Done) continue;
      Lane* dl = lane_of(d);
      task.waits_for.push_back(tasks[d].name + " on " + dl->stream.str() + " (" +
                               phase_name(dp, dl->inline_queue) + ")");
    }
    w.tasks.push_back(std::move(task));
  }
  w.calls.push_back(pc);
}

}  // namespace

void call_started(InFlightCall& c) {
  c.start_ns = profile_now_ns();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  c.id = r.next_id++;
  link(r.calls, c);
}

void call_ended(InFlightCall& c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  unlink(r.calls, c);
}

BlockedScope::BlockedScope(const char* w, uint64_t c)
    : what(w), call(c), start_ns(profile_now_ns()), tid(static_cast<int>(gettid())) {
  start_watchdog();  // a thread may block before any call has started (behind a host lane's job)
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  link(r.blocked, *this);
}

BlockedScope::~BlockedScope() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  unlink(r.blocked, *this);
}

std::string unfinished_tasks(uint64_t call) {
  PendingWork w;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const InFlightCall* c = r.calls; c; c = c->next)
      if (c->id == call) describe_call(*c, w);
  }
  std::string out;
  for (const PendingTask& t : w.tasks)
    out += (out.empty() ? "" : "; ") + t.task + " on " + t.stream + " (" + t.state + ")";
  return out.empty() ? "no unfinished task" : out;
}

void wait_or_give_up(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     const std::function<bool()>& done,
                     const std::function<std::string()>& waited_for) {
  const std::shared_ptr<CancelToken>& token = current_cancel_token();
  if (!token) return cv.wait(lock, done);
  while (!done()) {
    // Polled, not notified: a deadline passes and Ctrl-C arrives without waking anyone.
    if (cv.wait_for(lock, std::chrono::milliseconds(20), done)) return;
    lock.unlock();
    std::string why;
    bool stop = token->poll_and_check(&why);
    std::string what = stop ? waited_for() : std::string();
    lock.lock();
    if (stop && !done()) throw Error("gave up waiting (" + why + ") for " + what);
  }
}

PendingWork pending_work() {
  PendingWork w;
  std::vector<Lane*> lanes = all_lanes();  // before the registry's lock: lanes take their own
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const InFlightCall* c = r.calls; c; c = c->next) describe_call(*c, w);
    for (const BlockedScope* b = r.blocked; b; b = b->next) {
      std::string what = b->what;
      if (b->call) what += " of call " + std::to_string(b->call);
      w.threads.push_back(BlockedThread{thread_label(b->tid), what, seconds_since(b->start_ns)});
    }
  }
  for (Lane* l : lanes)
    for (const std::string& h : l->queue->held()) w.held.push_back(l->stream.str() + ": " + h);
  return w;
}

std::string PendingWork::str() const {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "kiln: pending work: " << calls.size() << " call(s) in flight, " << threads.size()
    << " thread(s) waiting\n";
  for (const BlockedThread& t : threads)
    o << "  " << t.thread << " has waited " << t.seconds << " s for " << t.waits_for << "\n";
  for (const PendingCall& c : calls) {
    o << "  call " << c.id << ": started " << c.seconds << " s ago, " << c.done << " of " << c.tasks
      << " tasks done\n";
    for (const PendingTask& t : tasks) {
      if (t.call != c.id) continue;
      o << "    " << t.task << " on " << t.stream << ": " << t.state << "\n";
      for (const std::string& d : t.waits_for) o << "      waits for " << d << "\n";
    }
  }
  for (const std::string& h : held) o << "  held back by its queue: " << h << "\n";
  return o.str();
}

}  // namespace kiln

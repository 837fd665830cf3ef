#include "backends/opencl/host_gate.h"

#include <thread>

#include "graph/immortal.h"

namespace kiln::opencl {

namespace {

// The gate whose mutex this thread holds while it issues a command: a command that enqueues
// others (a native op run as several kernels) issues them directly, in its place in the order.
thread_local const HostGate* t_issuing = nullptr;

struct IssuingScope {
  const HostGate* before;
  explicit IssuingScope(const HostGate* g) : before(t_issuing) { t_issuing = g; }
  ~IssuingScope() { t_issuing = before; }
};

// The one thread that issues deferred commands. A driver's callback must not block (the OpenCL
// specification), and a thread of the TBB arena may be the one a cpu task needs: this thread
// runs nothing else, so blocking here waits only for device work, which needs no host thread.
class GateThread {
 public:
  void post(std::weak_ptr<HostGate> g, std::function<void(HostGate&)> f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back({std::move(g), std::move(f)});
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    cv_.notify_one();
  }

 private:
  struct Work {
    std::weak_ptr<HostGate> gate;
    std::function<void(HostGate&)> f;
  };
  void loop() {
    for (;;) {
      Work w;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !work_.empty(); });
        w = std::move(work_.front());
        work_.pop_front();
      }
      if (auto g = w.gate.lock()) w.f(*g);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> work_;
  std::thread thread_;  // lives with the process (Immortal): never joined
};

GateThread& gate_thread() {
  static Immortal<GateThread> t;
  return t.get();
}

bool ended(cl_event e) {
  cl_int status = CL_COMPLETE;
  cl_int err =
      clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  return err != CL_SUCCESS || status <= CL_COMPLETE;  // CL_COMPLETE is 0, errors negative
}

bool is_user_event(cl_event e) {
  cl_command_type type = 0;
  clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, sizeof type, &type, nullptr);
  return type == CL_COMMAND_USER;
}

}  // namespace

EventPtr HostGate::issue_now(const Issue& issue) {
  IssuingScope scope(this);
  return issue();
}

EventPtr HostGate::submit(bool may_block, const std::string& what, Issue issue) {
  if (t_issuing == this) return issue();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = next_seq_++;
  if (held_.empty()) {
    if (!may_block) return issue_now(issue);
    prune();
    if (!blocked(seq)) return issue_now(issue);
  }
  auto stand_in = user_event(ctx_, what, poll_);
  held_.push_back(Held{seq, may_block, what, std::move(issue), stand_in});
  return stand_in;
}

void HostGate::note_waits(const std::vector<cl_event>& events) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (t_issuing != this) lock.lock();
  for (cl_event e : events) {
    if (!is_user_event(e) || ended(e)) continue;
    clRetainEvent(e);
    host_waits_.push_back(HostWait{next_seq_, e});
    // The callback also runs when the event fails (a dropped signal), and at once if it ended.
    auto* self = new std::weak_ptr<HostGate>(weak_from_this());
    if (clSetEventCallback(e, CL_COMPLETE, &HostGate::wait_ended, self) != CL_SUCCESS) delete self;
  }
}

void CL_CALLBACK HostGate::wait_ended(cl_event, cl_int, void* user) {
  std::unique_ptr<std::weak_ptr<HostGate>> gate(static_cast<std::weak_ptr<HostGate>*>(user));
  gate_thread().post(*gate, [](HostGate& g) { g.drain(); });
}

bool HostGate::blocked(uint64_t seq) const {
  for (const HostWait& w : host_waits_)
    if (w.seq <= seq) return true;
  return false;
}

void HostGate::prune() {
  std::erase_if(host_waits_, [](const HostWait& w) {
    if (!ended(w.event)) return false;
    clReleaseEvent(w.event);
    return true;
  });
}

void HostGate::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  prune();
  while (!held_.empty() && !(held_.front().may_block && blocked(held_.front().seq))) {
    Held h = std::move(held_.front());
    held_.pop_front();
    EventPtr real;
    std::exception_ptr error;
    try {
      real = issue_now(h.issue);
    } catch (...) {
      error = std::current_exception();
    }
    if (!real) {
      complete_user_event(*h.stand_in, error);
      continue;
    }
    real->on_complete([s = h.stand_in](std::exception_ptr e) { complete_user_event(*s, e); });
  }
  if (held_.empty()) idle_.notify_all();
}

void HostGate::wait_idle() {
  if (t_issuing == this) return;
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return held_.empty(); });
}

std::vector<std::string> HostGate::deferred() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Held& h : held_) {
    size_t waits = 0;
    for (const HostWait& w : host_waits_) waits += w.seq <= h.seq && !ended(w.event);
    out.push_back(h.what + (h.may_block && waits ? " (held: may block, behind " +
                                                       std::to_string(waits) + " host wait(s))"
                                                 : " (held behind an earlier command)"));
  }
  return out;
}

}  // namespace kiln::opencl

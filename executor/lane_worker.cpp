#include "executor/lane_worker.h"

#include "executor/cancel.h"
#include "executor/in_flight.h"

#include <chrono>

#include "graph/at_exit.h"
#include "graph/immortal.h"

namespace kiln {

namespace {

// Exit rule: once the process starts to exit, workers take no further job and exit waits for
// the jobs they are running. Queued jobs are dropped (their outputs can no longer be read,
// except by a thread that waits for them, which runs them itself). Without the gate a worker
// would keep running jobs while static destructors tear the process down. Lanes, pools and
// the backends are Immortal, so the handler's place among the destructors does not matter.
struct ExitGate {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // jobs workers are running now
  bool exiting = false;
};
ExitGate& gate() {
  static Immortal<ExitGate> g;
  return g.get();
}
thread_local bool t_running_job = false;  // this worker thread is running a job (counted)

void close_gate() {
  ExitGate& g = gate();
  std::unique_lock<std::mutex> lock(g.mu);
  g.exiting = true;
  int self = t_running_job ? 1 : 0;  // exit called from inside a job
  g.cv.wait(lock, [&] { return g.running == self; });
}

// A worker's permission to start a job; false once exit has begun.
bool enter_job() {
  ExitGate& g = gate();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.exiting) return false;
  ++g.running;
  return true;
}

void leave_job() {
  ExitGate& g = gate();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    --g.running;
  }
  g.cv.notify_all();
}

// The gate closes before the devices finish their work at exit (graph/at_exit.h): a running
// job may still enqueue device work.
void close_gate_at_exit() {
  static const bool registered = [] {
    at_exit_finish(ExitStage::HostJobs, close_gate);
    arm_exit_finish();
    return true;
  }();
  (void)registered;
}

}  // namespace

LaneWorker::~LaneWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t LaneWorker::submit(std::function<void()> job, bool* started_thread) {
  uint64_t ticket;
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
    if (exited_ && thread_.joinable()) thread_.join();  // it left the loop and released mu_
    if (!thread_.joinable()) {
      close_gate_at_exit();
      exited_ = false;
      thread_ = std::thread([this] { loop(); });
      started = true;
    }
  }
  cv_.notify_all();
  if (started_thread) *started_thread = started;
  return ticket;
}

// Runs the next job if none is running. Jobs run one at a time, so they finish in ticket order.
// The worker's own thread stops taking jobs once exit begins; a waiting thread still runs them.
bool LaneWorker::take_and_run(std::unique_lock<std::mutex>& lock, bool worker) {
  if (busy_ || queue_.empty()) return false;
  if (worker && !enter_job()) return false;
  std::function<void()> job = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  bool was_running = t_running_job;  // a job may wait for another and run it on this thread
  t_running_job = worker || was_running;
  job();
  job = nullptr;  // release what it captured before others see it finished
  t_running_job = was_running;
  if (worker) leave_job();
  lock.lock();
  busy_ = false;
  ++finished_;
  cv_.notify_all();
  return true;
}

void LaneWorker::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ >= ticket) return;
  lock.unlock();
  BlockedScope blocked("a call on a host stream's worker");
  lock.lock();
  if (current_cancel_token()) {
    // A waiter that may give up does not run the lane's jobs itself: it could not leave one
    // that does not return.
    wait_or_give_up(
        lock, cv_, [&] { return finished_ >= ticket; },
        [&] {
          return "its turn on a host stream's worker, behind " +
                 std::to_string(ticket - finished_ - 1) + " earlier call(s) not finished";
        });
    return;
  }
  while (finished_ < ticket)
    if (!take_and_run(lock, false)) cv_.wait(lock);
}

void LaneWorker::drain() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = submitted_;
  }
  wait(last);
}

bool LaneWorker::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ == submitted_;
}

// An idle worker's thread ends after a while (streams live for the whole process; an idle
// thread per stream ever used would not), and the next submission starts a new one.
void LaneWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (take_and_run(lock, true)) continue;
    if (stop_ && queue_.empty() && !busy_) return;
    if (cv_.wait_for(lock, std::chrono::seconds(2)) == std::cv_status::timeout && queue_.empty() &&
        !busy_ && !stop_) {
      // Detached, not left for the next submit to join: a lane lives for the process, and a
      // finished thread nobody joins is a leak at exit (TSan reports it).
      exited_ = true;
      thread_.detach();
      return;
    }
  }
}

}  // namespace kiln

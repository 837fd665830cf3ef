#include "scheduler/jobs.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "compile/eval.h"
#include "executor/cancel.h"
#include "executor/in_flight.h"
#include "graph/device_hooks.h"
#include "graph/error.h"

namespace kiln {

using Clock = std::chrono::steady_clock;

// One job. Status, error, outputs and times change under `mu`; a queued job changes state only
// with the scheduler's lock held too (taken first), so the scheduler can read queued jobs safely.
struct JobState {
  uint64_t seq = 0;
  std::string name;
  Stream stream;
  int priority = 0;
  Fn fn;
  std::vector<Array> inputs;
  std::shared_ptr<CancelToken> token;
  std::weak_ptr<Scheduler::Core> core;
  const JobState* waiting_for = nullptr;  // the job its function waits for (scheduler's lock)

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  JobStatus status = JobStatus::Queued;
  std::exception_ptr error;
  std::vector<Array> outputs;
  JobTimes times;

  std::string label() const {
    return "job " + (name.empty() ? std::string() : "'" + name + "' ") + "#" + std::to_string(seq);
  }
  bool ended() const { return status != JobStatus::Queued && status != JobStatus::Running; }
  // Ends the job (under mu): releases what it held and wakes its waiters.
  void end(JobStatus s, std::exception_ptr e, std::vector<Array> out = {}) {
    status = s;
    error = std::move(e);
    outputs = std::move(out);
    times.finished = Clock::now();
    fn = nullptr;
    inputs.clear();
    cv.notify_all();
  }
};

namespace {

thread_local const Scheduler::Core* g_worker_of = nullptr;  // the scheduler this thread works for
thread_local JobState* g_running_job = nullptr;             // the job this thread runs

void bind_worker_thread(const Scheduler::Core* core) { g_worker_of = core; }

// Marks the job this thread runs, for the waits its function makes.
struct RunningJob {
  explicit RunningJob(JobState* j) : outer(g_running_job) { g_running_job = j; }
  ~RunningJob() { g_running_job = outer; }
  JobState* outer;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b == Clock::time_point{}) return 0;
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Core {
  struct Lane {
    std::deque<std::shared_ptr<JobState>> jobs;  // submission order; ended jobs popped lazily
    bool busy = false;                           // one of its jobs is running
    const JobState* running = nullptr;           // that job
  };

  std::mutex mu;
  std::condition_variable work_cv;   // workers: a job may start, a deadline is due, or stop
  std::condition_variable space_cv;  // submitters: the queue has room
  std::condition_variable idle_cv;   // wait_all and the destructor: a job ended
  std::condition_variable timer_cv;  // the deadline thread: an earlier deadline, or stop
  std::map<Stream, Lane> lanes;
  std::multimap<Clock::time_point, std::weak_ptr<JobState>> deadlines;  // of queued jobs
  size_t capacity = 1024;
  size_t queued = 0;      // not yet started, not ended
  size_t unfinished = 0;  // not yet ended
  uint64_t next_seq = 0;
  bool stopping = false;
  int workers = 0;          // as asked; more threads run while jobs wait for jobs
  int waiting_workers = 0;  // threads whose job waits for another job
  std::vector<std::thread> threads;
  std::thread timer;  // ends queued jobs whose deadline passes, even while every worker is busy

  // Queues a new job (lock held).
  void enqueue(const std::shared_ptr<JobState>& j, const std::shared_ptr<Core>& self) {
    j->seq = next_seq++;
    j->core = self;
    if (j->token->deadline()) {
      auto it = deadlines.emplace(*j->token->deadline(), j);
      if (it == deadlines.begin()) timer_cv.notify_one();
    }
    lanes[j->stream].jobs.push_back(j);
    ++queued;
    ++unfinished;
    work_cv.notify_one();
  }

  // Ends a queued job without running it (lock held).
  void end_queued(JobState& j, JobStatus s, const std::string& why) {
    std::lock_guard<std::mutex> jl(j.mu);
    if (j.status != JobStatus::Queued) return;
    j.end(s, std::make_exception_ptr(Error(j.label() + " " + why)));
    --queued;
    --unfinished;
    space_cv.notify_one();
    idle_cv.notify_all();
  }

  void expire_overdue(Clock::time_point now) {
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      if (auto j = deadlines.begin()->second.lock())
        end_queued(*j, JobStatus::DeadlineExceeded,
                   "missed its deadline: it passed while the job was queued");
      deadlines.erase(deadlines.begin());
    }
  }

  // The next job to start: the head of a free lane, highest priority first, then earliest.
  std::shared_ptr<JobState> pick() {
    std::shared_ptr<JobState> best;
    Lane* best_lane = nullptr;
    for (auto it = lanes.begin(); it != lanes.end();) {
      Lane& lane = it->second;
      while (!lane.jobs.empty() && lane.jobs.front()->status != JobStatus::Queued)
        lane.jobs.pop_front();  // cancelled or expired while queued
      if (lane.jobs.empty() && !lane.busy) {
        it = lanes.erase(it);
        continue;
      }
      if (!lane.busy && !lane.jobs.empty()) {
        const auto& j = lane.jobs.front();
        if (!best || j->priority > best->priority ||
            (j->priority == best->priority && j->seq < best->seq))
          best = j, best_lane = &lane;
      }
      ++it;
    }
    if (best) {
      best_lane->jobs.pop_front();
      best_lane->busy = true;
      best_lane->running = best.get();
    }
    return best;
  }

  void deadline_timer() {
    std::unique_lock<std::mutex> lk(mu);
    while (!stopping || unfinished > 0) {
      expire_overdue(Clock::now());
      if (deadlines.empty())
        timer_cv.wait(lk);
      else
        timer_cv.wait_until(lk, deadlines.begin()->first);
    }
  }

  void worker() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if (std::shared_ptr<JobState> j = pick()) {
        {
          std::lock_guard<std::mutex> jl(j->mu);
          j->status = JobStatus::Running;
          j->times.started = Clock::now();
        }
        --queued;
        space_cv.notify_one();
        lk.unlock();
        run(*j);
        lk.lock();
        lanes[j->stream].busy = false;
        lanes[j->stream].running = nullptr;
        --unfinished;
        idle_cv.notify_all();
        work_cv.notify_one();  // the lane's next job may start on another worker
        continue;
      }
      if (stopping && unfinished == 0) return;
      work_cv.wait(lk);
    }
  }

  // A thread that works for this scheduler (lock held); workers() counts them.
  void add_worker() {
    threads.emplace_back([this] {
      bind_worker_thread(this);
      worker();
    });
  }

  // Called (lock held) before the job running on this thread waits for `target`. Raises if the
  // wait could never end: `target` cannot start or end before the waiting job does (queued
  // behind it on its stream, or behind a job that waits, in turn, for it). Otherwise, when no
  // worker is free, adds one: a job blocked in a wait must not keep the jobs it waits for from
  // starting, as it would with every worker waiting. after_wait undoes the count.
  void before_wait(const JobState& me, const JobState& target);
  void after_wait() { --waiting_workers; }

  // Runs a started job on its lane's stream, outside the scheduler's lock.
  static void run(JobState& j) {
    RunningJob running(&j);
    std::vector<Array> out;
    std::exception_ptr err;
    try {
      std::string why;
      if (j.token->stop_requested(&why)) throw Error(why);
      StreamScope stream(j.stream);
      CancelScope cancel(j.token);
      out = j.fn(j.inputs);
      eval(out);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> jl(j.mu);
    if (!err) return j.end(JobStatus::Succeeded, nullptr, std::move(out));
    if (j.token->cancelled()) return j.end(JobStatus::Cancelled, err);
    if (j.token->deadline_passed()) {
      std::string detail;  // what it was doing: a wait it gave up names its call's tasks
      try {
        std::rethrow_exception(err);
      } catch (const std::exception& e) {
        detail = std::string(" (") + e.what() + ")";
      } catch (...) {
      }
      return j.end(
          JobStatus::DeadlineExceeded,
          std::make_exception_ptr(Error(
              j.label() + " missed its deadline: it passed while the job was running" + detail)));
    }
    j.end(JobStatus::Failed, err);
  }
};

namespace {

std::string blocked_by_lane(const JobState& queued, const JobState& running) {
  return queued.label() + " is queued on " + queued.stream.str() + " behind " + running.label() +
         " (jobs on one stream run one at a time, in submission order)";
}

}  // namespace

void Scheduler::Core::before_wait(const JobState& me, const JobState& target) {
  // Follow what keeps `target` from ending: a queued job waits for its lane's running job, a
  // running job for the job it waits for. Reaching `me` closes a cycle.
  std::string why;
  const JobState* cur = &target;
  for (size_t steps = 0; cur && steps <= unfinished; ++steps) {
    JobStatus status;
    {
      std::lock_guard<std::mutex> jl(cur->mu);
      status = cur->status;
    }
    const JobState* next = nullptr;
    if (status == JobStatus::Queued) {
      auto lane = lanes.find(cur->stream);
      if (lane != lanes.end() && lane->second.busy) {
        next = lane->second.running;
        why += (why.empty() ? "" : "; ") + blocked_by_lane(*cur, *next);
      }
    } else if (status == JobStatus::Running && cur->waiting_for) {
      next = cur->waiting_for;
      why += (why.empty() ? "" : "; ") + cur->label() + " waits for " + next->label();
    }
    if (next == &me)
      throw Error(me.label() + " waits for " + target.label() +
                  ", which cannot end before it does: " + why +
                  ". Submit the awaited job on another stream, or wait for it outside the job");
    cur = next;
  }
  ++waiting_workers;
  if (static_cast<int>(threads.size()) - waiting_workers < workers) add_worker();
}

const char* job_status_name(JobStatus s) {
  switch (s) {
    case JobStatus::Queued: return "queued";
    case JobStatus::Running: return "running";
    case JobStatus::Succeeded: return "succeeded";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
    case JobStatus::DeadlineExceeded: return "deadline exceeded";
  }
  return "unknown";
}

double JobTimes::queued_ms() const {
  return ms_between(submitted, started != Clock::time_point{} ? started : finished);
}
double JobTimes::run_ms() const { return ms_between(started, finished); }

namespace {

// While a job's function waits for another job of the same scheduler: checked and recorded, so
// a wait that could never end raises and other waits can see this one.
class WaitFromJob {
 public:
  explicit WaitFromJob(JobState& target) {
    JobState* me = g_running_job;
    if (!me || me == &target) return;  // not from a job; a job's own wait is caught below
    core_ = me->core.lock();
    if (!core_ || core_.get() != g_worker_of || target.core.lock() != core_) return;
    std::lock_guard<std::mutex> lk(core_->mu);
    core_->before_wait(*me, target);
    me->waiting_for = &target;
    me_ = me;
  }
  ~WaitFromJob() {
    if (!me_) return;
    std::lock_guard<std::mutex> lk(core_->mu);
    me_->waiting_for = nullptr;
    core_->after_wait();
  }
  WaitFromJob(const WaitFromJob&) = delete;
  WaitFromJob& operator=(const WaitFromJob&) = delete;

 private:
  std::shared_ptr<Scheduler::Core> core_;
  JobState* me_ = nullptr;
};

void not_own_job(const JobState& target) {
  if (g_running_job == &target)
    throw Error(target.label() +
                " waits for itself: Job::wait (or outputs) inside the job's own "
                "function never returns");
}

}  // namespace

void Job::wait() const {
  not_own_job(*s_);
  WaitFromJob from_job(*s_);
  BlockedScope blocked("a job");
  std::unique_lock<std::mutex> lk(s_->mu);
  s_->cv.wait(lk, [&] { return s_->ended(); });
}

bool Job::wait_until(Clock::time_point t) const {
  {
    std::lock_guard<std::mutex> lk(s_->mu);
    if (s_->ended()) return true;
  }
  not_own_job(*s_);
  WaitFromJob from_job(*s_);
  BlockedScope blocked("a job");
  std::unique_lock<std::mutex> lk(s_->mu);
  return s_->cv.wait_until(lk, t, [&] { return s_->ended(); });
}

JobStatus Job::status() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->status;
}

bool Job::done() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->ended();
}

const std::vector<Array>& Job::outputs() const {
  wait();
  std::lock_guard<std::mutex> lk(s_->mu);
  if (s_->status == JobStatus::Succeeded) return s_->outputs;
  std::string why;
  try {
    std::rethrow_exception(s_->error);
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "a non-standard exception";
  }
  const char* what = s_->status == JobStatus::Cancelled          ? "was cancelled"
                     : s_->status == JobStatus::DeadlineExceeded ? "missed its deadline"
                     : s_->status == JobStatus::Failed           ? "failed"
                                                                 : job_status_name(s_->status);
  throw Error(s_->label() + " has no outputs: it " + what + " (" + why + ")");
}

bool Job::cancel() const {
  std::string why = s_->label() + " was cancelled";
  if (auto core = s_->core.lock()) {
    std::lock_guard<std::mutex> lk(core->mu);
    {
      std::lock_guard<std::mutex> jl(s_->mu);
      if (s_->ended()) return false;
    }
    core->end_queued(*s_, JobStatus::Cancelled, "was cancelled before it started");
  }
  std::lock_guard<std::mutex> jl(s_->mu);
  if (s_->status == JobStatus::Cancelled) return true;  // it was queued
  if (s_->ended()) return false;
  s_->token->cancel(why);  // running: stops at its next task boundary
  return true;
}

std::exception_ptr Job::error() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->error;
}

JobTimes Job::times() const {
  std::lock_guard<std::mutex> lk(s_->mu);
  return s_->times;
}

const std::string& Job::name() const { return s_->name; }
uint64_t Job::sequence() const { return s_->seq; }
Stream Job::stream() const { return s_->stream; }

Scheduler::Scheduler(SchedulerOptions options) : core_(std::make_shared<Core>()) {
  if (options.workers < 0)
    throw Error("SchedulerOptions::workers is " + std::to_string(options.workers) +
                "; use 0 (one per hardware thread) or a positive count");
  if (options.capacity == 0)
    throw Error("SchedulerOptions::capacity is 0; a scheduler needs room for at least one job");
  int n = options.workers;
  if (n == 0) n = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  core_->capacity = options.capacity;
  {
    std::lock_guard<std::mutex> lk(core_->mu);
    core_->workers = n;
    for (int i = 0; i < n; ++i) core_->add_worker();
  }
  core_->timer = std::thread([core = core_.get()] { core->deadline_timer(); });
}

Scheduler::~Scheduler() {
  {
    std::unique_lock<std::mutex> lk(core_->mu);
    core_->stopping = true;
    core_->work_cv.notify_all();
    core_->idle_cv.wait(lk, [&] { return core_->unfinished == 0; });
    core_->work_cv.notify_all();
    core_->timer_cv.notify_all();
  }
  for (std::thread& t : core_->threads) t.join();
  core_->timer.join();
}

namespace {

std::shared_ptr<JobState> make_job(Fn fn, std::vector<Array> inputs, JobOptions& o) {
  if (!fn)
    throw Error("Scheduler::submit: the function is empty; pass a callable or a compiled function");
  auto j = std::make_shared<JobState>();
  j->name = std::move(o.name);
  j->stream = o.stream ? *o.stream : current_stream();
  check_device(j->stream.device);
  j->priority = o.priority;
  j->fn = std::move(fn);
  j->inputs = std::move(inputs);
  j->token = std::make_shared<CancelToken>(o.deadline);
  j->times.submitted = Clock::now();
  return j;
}

}  // namespace

Job Scheduler::submit(Fn fn, std::vector<Array> inputs, JobOptions options) {
  std::shared_ptr<JobState> j = make_job(std::move(fn), std::move(inputs), options);
  std::unique_lock<std::mutex> lk(core_->mu);
  if (core_->queued >= core_->capacity && g_worker_of == core_.get())
    throw Error("Scheduler::submit from inside a job while the queue is full (" +
                std::to_string(core_->capacity) +
                " jobs) would wait for itself; use try_submit there, or a larger capacity");
  core_->space_cv.wait(lk, [&] { return core_->queued < core_->capacity; });
  core_->enqueue(j, core_);
  return Job(std::move(j));
}

std::optional<Job> Scheduler::try_submit(Fn fn, std::vector<Array> inputs, JobOptions options) {
  std::shared_ptr<JobState> j = make_job(std::move(fn), std::move(inputs), options);
  std::lock_guard<std::mutex> lk(core_->mu);
  if (core_->queued >= core_->capacity) return std::nullopt;
  core_->enqueue(j, core_);
  return Job(std::move(j));
}

void Scheduler::wait_all() {
  std::unique_lock<std::mutex> lk(core_->mu);
  core_->idle_cv.wait(lk, [&] { return core_->unfinished == 0; });
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lk(core_->mu);
  return core_->queued;
}

int Scheduler::workers() const { return core_->workers; }

}  // namespace kiln

// Jobs: compiled functions submitted to run later, on a lane, with a priority, a deadline and
// cancellation. A Scheduler owns a bounded queue and a few worker threads; each job runs its
// function on its lane's stream and evaluates the outputs. It sits above compile/ (running a
// job calls a function and evaluates arrays), apart from executor/, which runs one plan's tasks.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compile/compile.h"
#include "graph/device.h"

namespace kiln {

enum class JobStatus {
  Queued,            // waiting for its lane or a worker
  Running,           // its function or its evaluation is running
  Succeeded,         // outputs() are valid
  Failed,            // the function or a kernel raised; error() says what
  Cancelled,         // cancel() took effect before the job finished
  DeadlineExceeded,  // the deadline passed before the job finished
};
const char* job_status_name(JobStatus s);

struct JobOptions {
  // The lane: jobs on one stream start in submission order, one at a time. Unset: the
  // submitting thread's current stream.
  std::optional<Stream> stream = {};
  // Among lanes whose next job could start, the highest priority starts first (then the
  // earliest submitted).
  int priority = 0;
  std::string name = {};
  // Passing it cancels the job: at once while queued, at the next task boundary while running.
  std::optional<std::chrono::steady_clock::time_point> deadline = {};
};

struct JobTimes {
  using Clock = std::chrono::steady_clock;
  Clock::time_point submitted, started, finished;  // started/finished unset until they happen
  double queued_ms() const;  // submitted -> started (or finished, if never started)
  double run_ms() const;     // started -> finished (0 if it never started)
};

struct JobState;

// A handle to a submitted job; copies share the job. The job holds its inputs alive until it ends.
class Job {
 public:
  // Until the job ends, whichever way. From inside a job's function of the same scheduler it
  // raises kiln::Error when the wait could never end: the job itself, a job queued behind the
  // caller on its stream, or a cycle of such waits; any other wait lets one more thread run jobs
  // meanwhile, so the awaited job is not kept from a worker.
  void wait() const;
  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {  // false on timeout
    return wait_until(std::chrono::steady_clock::now() + timeout);
  }
  bool wait_until(std::chrono::steady_clock::time_point t) const;
  JobStatus status() const;
  bool done() const;  // ended, whichever way
  // The outputs of a Succeeded job (waiting first); raises kiln::Error naming the job and why
  // it has none otherwise.
  const std::vector<Array>& outputs() const;
  // Requests cancellation. Immediate for a queued job; a running one stops at its next task
  // boundary (it may still succeed if it finishes first). False if the job had already ended.
  bool cancel() const;
  std::exception_ptr error() const;  // why it failed, was cancelled or missed its deadline
  JobTimes times() const;
  const std::string& name() const;
  uint64_t sequence() const;  // submission order within its Scheduler, from 0
  Stream stream() const;

 private:
  friend class Scheduler;
  explicit Job(std::shared_ptr<JobState> s) : s_(std::move(s)) {}
  std::shared_ptr<JobState> s_;
};

struct SchedulerOptions {
  // Threads running jobs; 0: the machine's hardware threads (at least 2). While jobs wait for
  // other jobs (Job::wait in a job's function), as many more run.
  int workers = 0;
  size_t capacity = 1024;  // queued (not yet running) jobs; submit() blocks beyond this
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});
  // Runs every job already submitted to its end, then stops the workers.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `fn(inputs)`. Blocks while the queue is full: back-pressure keeps a fast producer
  // from queueing without bound, and a blocked submit never loses a job.
  Job submit(Fn fn, std::vector<Array> inputs, JobOptions options = {});
  // As submit, but returns nullopt at once when the queue is full.
  std::optional<Job> try_submit(Fn fn, std::vector<Array> inputs, JobOptions options = {});
  void wait_all();        // until every job submitted so far has ended
  size_t queued() const;  // jobs waiting to start
  int workers() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace kiln

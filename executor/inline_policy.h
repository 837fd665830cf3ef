// Where an asynchronous submission to a host lane runs: on the lane's worker (the caller goes
// on at once) or on the calling thread before the call returns. Handing a plan to the worker
// costs the caller a job, a lock and a wake-up of the worker's thread; a plan that runs in less
// time than that gains nothing from running elsewhere, and its caller, who usually waits for the
// result next, would also pay the worker's wake-up and its own. So a plan runs inline when its
// lane has no asynchronous work outstanding (nothing to overlap with, nothing to overtake) and
// its measured run time is at most the measured cost of a hand-off. Both are measured in this
// process, as running averages; a plan's first run, with no time measured yet, is handed off.
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln {

// A running average of durations in nanoseconds, shared by threads without a lock (a lost update
// under a race only delays the average a little). Negative: nothing measured yet.
class RunningNs {
 public:
  int64_t get() const { return ns_.load(std::memory_order_relaxed); }
  void add(int64_t sample);

 private:
  std::atomic<int64_t> ns_{-1};
};

// What the rule compares: the caller's cost of handing a plan to an idle lane's worker.
RunningNs& handoff_cost();

enum class InlinePolicy {
  Measured,  // the rule above (the default)
  Never,     // every submission to a host lane is handed to its worker
  Always,    // every submission to an idle host lane runs on the calling thread
};
// For tests and benchmarks that need one path; returns the previous policy. Not thread-local.
InlinePolicy set_inline_policy(InlinePolicy p);

// Whether a plan whose runs took `run` (a running average) runs on the calling thread now, its
// single host lane having nothing outstanding.
bool run_inline(const RunningNs& run);

}  // namespace kiln

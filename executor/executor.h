// The executor runs a Plan: it resolves the plan's lanes against the caller's current stream,
// binds buffers, and runs the tasks. Small plans take a direct path on the calling thread (a
// topological walk); larger ones run on a tbb::flow::graph built once per plan and re-run, with
// a pool of graph instances so concurrent calls of one plan never share dependency counters.
// Device tasks complete through callbacks; no worker thread blocks on a device.
// execute_async returns once the plan is submitted: device work enqueued on its queue, host work
// queued on its lane's worker; completion publishes through a callback.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "executor/plan.h"
#include "graph/pending.h"

namespace kiln {

struct RunOptions {
  enum class Path { Auto, Direct, Graph };
  Path path = Path::Auto;
  // Plans with at most this many tasks, or chains, all on inline (host) queues, take the direct
  // path (the calling thread runs them in order).
  int direct_max_tasks = 16;
};

struct RunResult {
  std::vector<std::shared_ptr<Buffer>> outputs;  // per plan output; null where it failed
  std::vector<std::exception_ptr> errors;        // per plan output; null where it succeeded
};

// Runs `plan` with `inputs` bound to plan.inputs. Raises kiln::Error before running anything if
// a lane's device is unusable or the inputs do not match; a failing task fails only the outputs
// that depend on it.
RunResult execute(const Plan& plan, const std::vector<std::shared_ptr<Buffer>>& inputs,
                  const RunOptions& options = {});

// Submits `plan` and returns at once when it runs on one lane: on a device queue (every task
// enqueued now, completed by the device's event callbacks) or on a host lane's worker (which a
// thread waiting for it helps). `done` gets the result exactly once, on whichever thread
// completes the work, before the returned Pending counts as complete; `keep` keeps `plan` alive
// until then. Plans over several lanes run now, on this thread, and return null after `done`;
// so does a small plan on an idle host lane (executor/inline_policy.h says where the line is).
// Submissions to one stream keep their order with each other and with execute(). Raises
// kiln::Error, without calling `done`, where execute() raises before running anything; `inputs`
// is then left as it was (a caller may rebuild arrays from it).
//
// `after`: inputs that are outputs of earlier asynchronous work still in flight, bound as the
// buffers that work writes (in_flight_output). The call is ordered after that work: nothing
// when both run on one in-order device queue, a wait on the device between queues of one
// device, else a wait on the host before this call runs. An output made by tasks that read an
// input whose producer failed gets that error, and `done` runs after the producers' own.
using RunDone = std::function<void(RunResult)>;
struct InFlightInput {
  size_t input = 0;                   // which of `inputs`
  std::shared_ptr<Pending> producer;  // the execute_async submission computing it
  size_t output = 0;                  // which output of the producer's plan it is
};
std::shared_ptr<Pending> execute_async(const Plan& plan, std::shared_ptr<const void> keep,
                                       std::vector<std::shared_ptr<Buffer>>&& inputs, RunDone done,
                                       std::vector<InFlightInput> after = {});

// The buffer that `work` (an execute_async submission) writes output `output` of its plan into,
// when the work was enqueued on device queues at submission and has not completed; else null
// (wait for `work`).
std::shared_ptr<Buffer> in_flight_output(Pending& work, size_t output);

// Bytes of input buffers that outputs were written into (Plan::donations()) since the process
// started. An input is donated only when the call's `inputs` hold its only reference.
size_t donated_bytes();

// Resolves `plan`'s lanes against the calling thread's current stream and compiles every kernel
// for its lane's device, as the first execute() from here would; a later call starts at once.
// Kernels that fail to build are not an error here: they fail their tasks when the plan runs.
void prepare(const Plan& plan);

}  // namespace kiln

// The executor runs a Plan: it resolves the plan's lanes against the caller's current stream,
// binds buffers, and runs the tasks. Small plans take a direct path on the calling thread (a
// topological walk); larger ones run on a tbb::flow::graph built once per plan and re-run, with
// a pool of graph instances so concurrent calls of one plan never share dependency counters.
// Device tasks complete through callbacks; no worker thread blocks on a device.
#pragma once

#include <exception>
#include <memory>
#include <vector>

#include "scheduler/plan.h"

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

// Resolves `plan`'s lanes against the calling thread's current stream and compiles every kernel
// for its lane's device, as the first execute() from here would; a later call starts at once.
// Kernels that fail to build are not an error here: they fail their tasks when the plan runs.
void prepare(const Plan& plan);

}  // namespace kiln

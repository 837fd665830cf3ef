// Executor-owned state cached on a Plan: compiled kernels per device and the pool of flow-graph
// instances. Private to executor/.
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "executor/inline_policy.h"

namespace kiln {

struct GraphInstance;
struct Lane;

// How a plan runs for one resolution of its lanes: the lanes, which run inline, the order locks
// to take, and each kernel task's compiled kernel. Calls on the same streams reuse it.
struct Binding {
  std::vector<Lane*> lanes;        // per plan lane
  std::vector<bool> inline_lanes;  // per plan lane
  std::vector<Lane*> distinct;     // sorted by stream: the order locks to hold
  bool all_inline = true;
  std::vector<const CompiledKernel*> kernels;    // per task
  std::vector<std::exception_ptr> build_errors;  // per task: why its kernel did not compile
  // Plans on one host lane: how long a run takes (executor/inline_policy.h), measured per run.
  mutable RunningNs run_ns;
};

struct PlanRuntime {
  PlanRuntime();
  ~PlanRuntime();
  std::mutex mu;
  // Per device: the compiled kernel of each task (null for non-kernel tasks or not yet compiled).
  std::map<Device, std::vector<std::shared_ptr<const CompiledKernel>>> kernels;
  std::vector<std::shared_ptr<Binding>> bindings;
  // Idle graph instances, keyed by which lanes run inline (the graph's shape depends on it).
  std::map<std::vector<bool>, std::vector<std::unique_ptr<GraphInstance>>> idle;
};

}  // namespace kiln

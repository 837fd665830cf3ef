// Executor-owned state cached on a Plan: compiled kernels per device and the pool of flow-graph
// instances. Private to scheduler/.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace kiln {

struct GraphInstance;

struct PlanRuntime {
  PlanRuntime();
  ~PlanRuntime();
  std::mutex mu;
  // Per device: the compiled kernel of each task (null for non-kernel tasks or not yet compiled).
  std::map<Device, std::vector<std::shared_ptr<const CompiledKernel>>> kernels;
  // Idle graph instances, keyed by which lanes run inline (the graph's shape depends on it).
  std::map<std::vector<bool>, std::vector<std::unique_ptr<GraphInstance>>> idle;
};

}  // namespace kiln

#include "scheduler/plan.h"

#include <algorithm>
#include <sstream>

#include "graph/error.h"
#include "scheduler/runtime.h"

namespace kiln {

Plan::Plan() : runtime_(std::make_unique<PlanRuntime>()) {}
Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

int Plan::add_lane(const LaneSpec& lane) {
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i] == lane) return static_cast<int>(i);
  lanes_.push_back(lane);
  return static_cast<int>(lanes_.size()) - 1;
}

int Plan::add_slot(const Slot& slot) {
  slots_.push_back(slot);
  return static_cast<int>(slots_.size()) - 1;
}

int Plan::add_task(Task task) {
  tasks_.push_back(std::move(task));
  return static_cast<int>(tasks_.size()) - 1;
}

void Plan::add_output(int slot) {
  Slot& s = slots_.at(slot);
  if (s.kind == SlotKind::Temp) {
    s.kind = SlotKind::Output;
    s.index = static_cast<int>(outputs.size());
  }
  outputs.push_back(slot);
}

void Plan::finalize() {
  int n = static_cast<int>(tasks_.size());
  succ_.assign(n, {});
  std::vector<int> indegree(n, 0);
  for (int t = 0; t < n; ++t) {
    auto& deps = tasks_[t].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int d : deps) {
      if (d < 0 || d >= n || d == t) throw_error("plan: task ", t, " has a bad dependency ", d);
      succ_[d].push_back(t);
    }
    indegree[t] = static_cast<int>(deps.size());
  }
  // Kahn's algorithm; a cycle is a bug in whoever built the plan.
  order_.clear();
  std::vector<int> ready;
  for (int t = n - 1; t >= 0; --t)
    if (indegree[t] == 0) ready.push_back(t);
  while (!ready.empty()) {
    int t = ready.back();
    ready.pop_back();
    order_.push_back(t);
    for (int s : succ_[t])
      if (--indegree[s] == 0) ready.push_back(s);
  }
  if (static_cast<int>(order_.size()) != n) throw_error("plan: the task graph has a cycle");
  producers_.assign(slots_.size(), {});
  for (int t = 0; t < n; ++t) {
    const Task& task = tasks_[t];
    if (task.kind == TaskKind::Kernel) {
      for (size_t b = 0; b < task.slots.size(); ++b)
        if (task.kernel->buffers[b].output) producers_[task.slots[b]].push_back(t);
    } else if (task.kind == TaskKind::Copy) {
      producers_[task.slots[1]].push_back(t);
    } else if (task.kind == TaskKind::Matmul) {
      producers_[task.slots[2]].push_back(t);
    }
  }
}

std::string Plan::str() const {
  std::ostringstream os;
  for (size_t l = 0; l < lanes_.size(); ++l) {
    const LaneSpec& s = lanes_[l];
    os << "lane " << l << ": "
       << (s.origin == StreamOrigin::Default    ? std::string("caller's stream")
           : s.origin == StreamOrigin::Explicit ? s.stream.str()
                                                : "placement " + s.stream.device.str())
       << "\n";
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    os << "slot " << i << ": " << s.dtype << "[" << s.elements << "] lane " << s.lane
       << (s.kind == SlotKind::Input    ? " input "
           : s.kind == SlotKind::Output ? " output "
                                        : " temp")
       << (s.kind == SlotKind::Temp ? "" : std::to_string(s.index)) << "\n";
  }
  for (size_t t = 0; t < tasks_.size(); ++t) {
    const Task& k = tasks_[t];
    os << "task " << t << ": " << k.name << " lane " << k.lane << " slots(";
    for (size_t i = 0; i < k.slots.size(); ++i) os << (i ? "," : "") << k.slots[i];
    os << ") deps(";
    for (size_t i = 0; i < k.deps.size(); ++i) os << (i ? "," : "") << k.deps[i];
    os << ")\n";
  }
  return os.str();
}

}  // namespace kiln

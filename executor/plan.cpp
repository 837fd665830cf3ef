#include "executor/plan.h"

#include <algorithm>
#include <sstream>

#include "executor/ancestors.h"
#include "executor/runtime.h"
#include "graph/error.h"

namespace kiln {

std::shared_ptr<const CompiledKernel> KernelBinaries::find(const Device& device) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [d, k] : by_device_)
    if (d == device) return k;
  return nullptr;
}

std::shared_ptr<const CompiledKernel> KernelBinaries::get(const Device& device,
                                                          const Build& build) {
  if (auto k = find(device)) return k;
  std::shared_ptr<const CompiledKernel> k = build();  // outside the lock: compiling may be slow
  std::lock_guard<std::mutex> lock(mu_);
  by_device_.emplace_back(device, k);
  return k;
}

IndexLists IndexLists::from_pairs(size_t lists, const std::vector<std::pair<int, int>>& pairs) {
  IndexLists l;
  l.start.assign(lists + 1, 0);
  for (const auto& [list, item] : pairs) ++l.start[list + 1];
  for (size_t i = 0; i < lists; ++i) l.start[i + 1] += l.start[i];
  l.items.resize(pairs.size());
  for (const auto& [list, item] : pairs) l.items[l.start[list]++] = item;
  for (size_t i = lists; i > 0; --i) l.start[i] = l.start[i - 1];  // each cursor ended at the
  l.start[0] = 0;                                                  // next list's start
  return l;
}

Plan::Plan() : runtime_(std::make_unique<PlanRuntime>()) {}
Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

void Plan::reserve(size_t tasks, size_t slots) {
  tasks_.reserve(tasks);
  slots_.reserve(slots);
}

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
  std::vector<std::pair<int, int>> edges;  // (dependency, dependent)
  std::vector<int> indegree(n, 0);
  for (int t = 0; t < n; ++t) {
    auto& deps = tasks_[t].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int d : deps) {
      if (d < 0 || d >= n || d == t) throw_error("plan: task ", t, " has a bad dependency ", d);
      edges.emplace_back(d, t);
    }
    indegree[t] = static_cast<int>(deps.size());
  }
  succ_ = IndexLists::from_pairs(n, edges);
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
  std::vector<int> depth(n, 1);
  critical_path_ = 0;
  for (int t : order_) {
    for (int d : tasks_[t].deps) depth[t] = std::max(depth[t], depth[d] + 1);
    critical_path_ = std::max(critical_path_, depth[t]);
  }
  slot_tasks_.clear();
  for (int t : order_)
    if (!tasks_[t].slots.empty()) slot_tasks_.push_back(t);
  collectives_.clear();
  bool index_order = true;
  for (int t = 0; t < n && index_order; ++t)
    for (int d : tasks_[t].deps) index_order = index_order && d < t;
  for (int i = 0; i < n; ++i) {
    int t = index_order ? i : order_[i];
    if (tasks_[t].kind == TaskKind::Native && is_collective(tasks_[t].native.op))
      collectives_.push_back(t);
  }
  std::vector<std::pair<int, int>> writes;  // (slot, task)
  for (int t = 0; t < n; ++t)
    for (size_t b = 0; b < tasks_[t].slots.size(); ++b)
      if (tasks_[t].writes(b)) writes.emplace_back(tasks_[t].slots[b], t);
  producers_ = IndexLists::from_pairs(slots_.size(), writes);
  assign_storage();
}

int Plan::input_of(int slot) const {
  const Slot& s = slots_[slot];
  if (s.kind == SlotKind::Input) return s.index;
  auto p = producers(slot);
  if (p.size() != 1) return -1;
  const Task& copy = tasks_[p[0]];
  if (copy.kind != TaskKind::Copy) return -1;
  const Slot& src = slots_[copy.slots[0]];
  return src.kind == SlotKind::Input ? src.index : -1;
}

// Temporaries whose lifetimes cannot overlap share one buffer. In a DAG "cannot overlap" means:
// every task touching the earlier slot is an ancestor of every task writing the later one, so
// no schedule runs them at the same time. Ancestor sets are bitsets, so this runs only for plans
// of moderate size; larger plans keep one buffer per temporary.
void Plan::assign_storage() {
  int n = static_cast<int>(tasks_.size());
  storage_.assign(slots_.size(), -1);
  storage_bytes_.clear();
  if (n == 0 || n > Ancestors::kMaxTasks) return;
  bool any_temp = false;  // a single evaluation's plan often has none: nothing to share
  for (size_t s = 0; s < slots_.size() && !any_temp; ++s)
    any_temp = slots_[s].kind == SlotKind::Temp && !producers_[s].empty();
  if (!any_temp) return;
  std::vector<std::pair<int, int>> reads;  // (slot, task)
  std::vector<bool> eligible(slots_.size(), true);
  for (int t = 0; t < n; ++t) {
    const Task& task = tasks_[t];
    for (size_t b = 0; b < task.slots.size(); ++b) {
      if (!task.writes(b)) reads.emplace_back(task.slots[b], t);
      if (task.kind == TaskKind::Copy) eligible[task.slots[b]] = false;  // copies may alias
    }
  }
  IndexLists readers = IndexLists::from_pairs(slots_.size(), reads);
  Ancestors anc(tasks_, order_);
  auto before = [&](int a, int b) { return anc.before(a, b); };
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i) pos[order_[i]] = i;
  std::vector<int> temps;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].kind == SlotKind::Temp && eligible[s] && !producers_[s].empty())
      temps.push_back(static_cast<int>(s));
  std::vector<int> first_write(slots_.size(), n);
  for (int s : temps)
    for (int t : producers_[s]) first_write[s] = std::min(first_write[s], pos[t]);
  std::stable_sort(temps.begin(), temps.end(),
                   [&](int a, int b) { return first_write[a] < first_write[b]; });
  std::vector<int> last;  // per storage: the slot that used it last
  for (int s : temps) {
    int chosen = -1;
    for (size_t g = 0; g < last.size() && chosen < 0; ++g) {
      int prev = last[g];
      if (slots_[prev].lane != slots_[s].lane) continue;
      bool free = true;
      for (int w : producers_[s]) {
        for (int u : producers_[prev]) free = free && before(u, w);
        for (int u : readers[prev]) free = free && before(u, w);
      }
      if (free) chosen = static_cast<int>(g);
    }
    if (chosen < 0) {
      chosen = static_cast<int>(last.size());
      last.push_back(s);
      storage_bytes_.push_back(0);
    }
    last[chosen] = s;
    storage_[s] = chosen;
    storage_bytes_[chosen] = std::max(storage_bytes_[chosen], slots_[s].bytes());
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
    os << ")";
    if (k.kind == TaskKind::Matmul && (k.matmul.trans_a || k.matmul.trans_b))
      os << " transposed " << (k.matmul.trans_a ? "a" : "") << (k.matmul.trans_b ? "b" : "");
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln

// Plan-time buffer donation: which outputs may be written into an input's memory. An output
// takes over input i's buffer only when no task can observe the difference:
//  - the writer is a fused element-wise kernel (no reduction, no library call) that reads the
//    input only at the element it writes (the same index map as the output: no broadcast,
//    transpose, slice or offset), so each element is loaded before it is overwritten;
//  - the output has the input's dtype and element count, is written by that kernel alone and
//    is not itself the input (a function returning its argument);
//  - every other task reading the input's memory (the input slot, or a copy of it that the
//    executor may turn into an alias) is an ancestor of the writer in the DAG; one that is
//    unordered with the writer becomes an ancestor (the writer waits for it), one that depends
//    on the writer rules the donation out.
// Whether the caller still holds the input is a call-time question (executor/executor.cpp).
#include <set>

#include "executor/ancestors.h"
#include "executor/plan.h"

namespace kiln {

namespace {

// Per plan input, the slots that may share its memory: the input's and its copies'.
std::vector<std::vector<int>> memory_of_inputs(const Plan& plan) {
  std::vector<std::vector<int>> mem(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) mem[i].push_back(plan.inputs[i]);
  for (const Task& t : plan.tasks())
    if (t.kind == TaskKind::Copy && plan.slots()[t.slots[0]].kind == SlotKind::Input)
      mem[plan.slots()[t.slots[0]].index].push_back(t.slots[1]);
  return mem;
}

// Whether buffer b of kernel `k` is read through a Gather (at rows an index picks).
bool gathered(const Kernel& k, size_t b) {
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Gather && v.buffer == static_cast<int>(b)) return true;
  return false;
}

// Whether kernel task `w` reads slot `via` only through `map` (the output's index map).
bool reads_only_at(const Task& w, int via, const IndexMap& map) {
  for (size_t b = 0; b < w.slots.size(); ++b)
    if (w.slots[b] == via && !w.kernel->buffers[b].output &&
        (!(w.kernel->buffers[b].map == map) || gathered(*w.kernel, b)))
      return false;
  return true;
}

// The kernel buffer of task `w` that reads (output false) or writes `slot`.
size_t buffer_of(const Task& w, int slot, bool output) {
  size_t b = 0;
  while (!(w.slots[b] == slot && w.kernel->buffers[b].output == output)) ++b;
  return b;
}

// The kernel buffer of task `w` that writes `slot`.
size_t output_buffer(const Task& w, int slot) {
  size_t o = 0;
  while (!(w.slots[o] == slot && w.kernel->buffers[o].output)) ++o;
  return o;
}

}  // namespace

void Plan::plan_donations(int first, int end) {
  donations_.clear();
  int n = static_cast<int>(tasks_.size());
  if (n == 0 || n > Ancestors::kMaxTasks || first >= end) return;
  std::vector<Donation> candidates;
  for (int t = 0; t < n; ++t) {
    const Task& w = tasks_[t];
    if (w.kind != TaskKind::Kernel || w.kernel->reduce || w.kernel->is_rows()) continue;
    for (size_t o = 0; o < w.slots.size(); ++o) {
      int out = w.slots[o];
      const Slot& os = slots_[out];
      if (!w.kernel->buffers[o].output || os.kind != SlotKind::Output || producers(out).size() != 1)
        continue;
      for (size_t b = 0; b < w.slots.size(); ++b) {
        int via = w.slots[b];
        int in = w.kernel->buffers[b].output ? -1 : input_of(via);
        if (in < first || in >= end) continue;
        const Slot& is = slots_[inputs[in]];
        if (is.dtype == os.dtype && is.elements == os.elements &&
            reads_only_at(w, via, w.kernel->buffers[o].map))
          candidates.push_back(Donation{in, via, out, t});
      }
    }
  }
  if (candidates.empty()) return;
  std::set<int> returned(outputs.begin(), outputs.end());  // inputs returned as they are
  std::vector<std::vector<int>> memory = memory_of_inputs(*this);
  Ancestors anc(tasks_, order_);
  // The writer reads the input's memory only where it writes; every other reader precedes it,
  // or is unordered with it and is made to precede it (`waits` gets the added dependencies).
  std::vector<int> waits;
  auto safe = [&](const Donation& d) {
    const Task& w = tasks_[d.task];
    for (int s : memory[d.input])
      if (!reads_only_at(w, s, w.kernel->buffers[output_buffer(w, d.output)].map)) return false;
    waits.clear();
    for (int t = 0; t < n; ++t) {
      const Task& r = tasks_[t];
      bool reads = false;
      for (size_t b = 0; b < r.slots.size() && t != d.task; ++b)
        for (int s : memory[d.input]) reads = reads || (r.slots[b] == s && !r.writes(b));
      if (!reads || anc.before(t, d.task)) continue;
      if (anc.before(d.task, t)) return false;  // it reads the input after the writer
      waits.push_back(t);
    }
    return true;
  };
  std::vector<bool> input_taken(inputs.size(), false), output_taken(slots_.size(), false);
  bool added = false;
  for (const Donation& d : candidates) {
    if (input_taken[d.input] || output_taken[d.output] || returned.count(inputs[d.input])) continue;
    if (!safe(d)) continue;
    // A reader the writer did not wait for now does (XLA orders a donated buffer's readers
    // before its writer the same way): it costs some parallelism, never a result.
    for (int r : waits) {
      tasks_[d.task].deps.push_back(r);
      anc.add_edge(r, d.task);
      added = true;
    }
    input_taken[d.input] = output_taken[d.output] = true;
    donations_.push_back(d);
  }
  mark_in_place();
  if (added) {  // new edges: order, successors and storage sharing follow them
    std::vector<Donation> chosen = std::move(donations_);
    finalize();
    donations_ = std::move(chosen);
  }
}

// Each donating kernel becomes a copy that names its pairs (Kernel::in_place), so a backend
// can compile the walk through one pointer; a new structure, so binaries are not shared.
void Plan::mark_in_place() {
  std::vector<std::shared_ptr<Kernel>> marked(tasks_.size());
  for (const Donation& d : donations_) {
    Task& w = tasks_[d.task];
    if (!marked[d.task]) marked[d.task] = std::make_shared<Kernel>(*w.kernel);
    marked[d.task]->in_place.emplace_back(static_cast<int>(buffer_of(w, d.via, false)),
                                          static_cast<int>(buffer_of(w, d.output, true)));
  }
  for (size_t t = 0; t < tasks_.size(); ++t)
    if (marked[t]) {
      tasks_[t].kernel = std::move(marked[t]);
      tasks_[t].binaries = nullptr;
    }
}

}  // namespace kiln

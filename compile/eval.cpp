#include "compile/eval.h"

#include <condition_variable>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "compile/graph_walk.h"
#include "compile/lower.h"
#include "graph/array_node.h"
#include "graph/trace_state.h"
#include "scheduler/executor.h"

namespace kiln {

namespace {

bool is_done(const ArrayNode& n) { return n.data || n.error; }

// After evaluation the node no longer needs its inputs; dropping them frees the graph behind it.
// Not while a transform records: it walks the graph after the function has run.
void detach(ArrayNode& n) {
  if (in_transform()) return;
  n.inputs.clear();
  n.inputs.shrink_to_fit();
}

void eval_hook(const std::vector<Array>& arrays) { eval(arrays); }

[[maybe_unused]] const bool g_installed = [] {
  set_eval_hook(&eval_hook);
  return true;
}();

// Graph bookkeeping (which nodes are pending, publishing results, detaching) happens under one
// lock; running the plan does not, so evaluations on different streams run concurrently. A node
// another thread is computing is waited for, never computed twice or read half-written.
std::mutex g_mu;
std::condition_variable g_cv;

void rethrow_first_error(const std::vector<Array>& arrays) {
  for (const Array& a : arrays)
    if (a.node()->error) std::rethrow_exception(a.node()->error);
}

}  // namespace

void eval(const std::vector<Array>& arrays) {
  if (is_tracing()) {
    for (const Array& a : arrays)
      if (!is_done(*a.node()))
        throw_error(
            "eval: cannot evaluate while a compiled function is being traced: its inputs are "
            "placeholders without data. Return the arrays from the function instead.");
  }
  bool ready = true;  // the common case, evaluating a compiled call's outputs: no lock at all
  for (const Array& a : arrays) ready = ready && a.is_evaluated();
  if (ready) return rethrow_first_error(arrays);
  std::unique_lock<std::mutex> lock(g_mu);
  std::vector<Array> pending, order;
  std::unordered_map<const ArrayNode*, int> refs;  // references from inside this evaluation
  for (;;) {
    bool all_done = true;
    for (const Array& a : arrays) all_done = all_done && is_done(*a.node());
    if (all_done) {  // nothing to run: the common case of evaluating a compiled call's outputs
      lock.unlock();
      rethrow_first_error(arrays);
      return;
    }
    order = topological_order(arrays, [](const ArrayNode& n) { return is_done(n) || n.in_flight; });
    bool wait = false;
    for (const Array& a : order) wait = wait || a.node()->in_flight;
    if (!wait) break;
    g_cv.wait(lock);
  }
  for (const Array& a : arrays) refs[a.node().get()]++;
  for (const Array& a : order) {
    ArrayNode& n = *a.node();
    if (n.op == Op::Placeholder)
      throw_error(
          "eval: cannot evaluate a placeholder: it stands for an input of a compiled function "
          "and has no data");
    if (is_done(n)) continue;
    // An input that failed earlier fails this node the same way, without running anything.
    for (const Array& in : n.inputs)
      if (in.node()->error) n.error = in.node()->error;
    if (n.error) {
      n.ready.store(true, std::memory_order_release);
      detach(n);
      continue;
    }
    for (const Array& in : n.inputs) refs[in.node().get()]++;
    pending.push_back(a);
  }
  if (pending.empty()) {
    lock.unlock();
    rethrow_first_error(arrays);
    return;
  }

  // Outputs: the requested arrays and any intermediate the user still holds a handle to, so
  // evaluating it later does not recompute it. `order` and `pending` hold one reference each.
  std::unordered_set<const ArrayNode*> wanted;
  for (const Array& a : arrays) wanted.insert(a.node().get());
  std::vector<Array> outputs;
  for (const Array& a : pending) {
    const ArrayNode* n = a.node().get();
    bool held_elsewhere = a.node().use_count() > refs[n] + 2;
    if (wanted.count(n) || held_elsewhere) outputs.push_back(a);
  }
  for (const Array& a : pending) a.node()->in_flight = true;
  struct Finish {  // runs on every exit: publish, detach, wake waiters
    std::unique_lock<std::mutex>& lock;
    std::vector<Array>& pending;
    std::vector<Array>& outputs;
    RunResult* result = nullptr;
    ~Finish() {
      if (!lock.owns_lock()) lock.lock();
      if (result)
        for (size_t i = 0; i < outputs.size(); ++i) {
          ArrayNode& n = *outputs[i].node();
          n.data = result->outputs[i];
          n.error = result->errors[i];
          n.ready.store(true, std::memory_order_release);
        }
      for (const Array& a : outputs)
        if (result) detach(*a.node());
      for (const Array& a : pending) a.node()->in_flight = false;
      g_cv.notify_all();
    }
  };
  RunResult r;
  {
    Finish finish{lock, pending, outputs};
    lock.unlock();
    // The pending nodes and the evaluated nodes they read, inputs-first: the lowering's graph.
    // (Failed nodes are left out: nothing pending reads them, or it would have failed too.)
    std::vector<Array> graph;
    graph.reserve(order.size());
    for (const Array& a : order)
      if (!a.node()->error) graph.push_back(a);
    LowerOptions lo;
    lo.order = &graph;
    LoweredGraph lg = lower(outputs, {}, lo);
    std::vector<std::shared_ptr<Buffer>> inputs;
    for (const Array& in : lg.inputs) inputs.push_back(in.node()->data);
    r = execute(lg.plan, inputs);
    finish.result = &r;
  }
  lock.unlock();
  rethrow_first_error(arrays);
}

void eval(const Array& a) { eval(std::vector<Array>{a}); }

}  // namespace kiln

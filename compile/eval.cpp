#include "compile/eval.h"

#include <condition_variable>
#include <mutex>
#include <unordered_set>

#include "compile/async_results.h"
#include "compile/graph_walk.h"
#include "compile/lower.h"
#include "compile/node_table.h"
#include "executor/executor.h"
#include "graph/array_node.h"
#include "graph/trace_state.h"

namespace kiln {

namespace {

bool is_done(const ArrayNode& n) { return n.data || n.error; }

// After evaluation the node no longer needs its inputs; dropping them frees the graph behind it.
// Not while a transform records: it walks the graph after the function has run (`keep`: the
// work was submitted while one recorded and completes on another thread).
void detach(ArrayNode& n, bool keep = false) {
  if (keep || in_transform()) return;
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

// Lowers what an evaluation runs: the pending nodes and the evaluated nodes they read
// (`order`, inputs-first). Failed nodes are left out: nothing pending reads them, or it would
// have failed too.
LoweredGraph lower_pending(const std::vector<Array>& order, const std::vector<Array>& outputs) {
  std::vector<Array> graph;
  graph.reserve(order.size());
  for (const Array& a : order)
    if (!a.node()->error) graph.push_back(a);
  LowerOptions lo;
  lo.order = &graph;
  return lower(outputs, {}, lo);
}

std::vector<std::shared_ptr<Buffer>> input_buffers(const LoweredGraph& lg) {
  std::vector<std::shared_ptr<Buffer>> inputs;
  for (const Array& in : lg.inputs) inputs.push_back(in.node()->data);
  return inputs;
}

// async_eval's tail: lower the pending nodes (marked in flight, `lock` held) and submit them;
// the completion publishes the outputs and releases the rest.
void submit(std::unique_lock<std::mutex>& lock, const std::vector<Array>& order,
            const std::vector<Array>& pending, const std::vector<Array>& outputs) {
  lock.unlock();
  try {
    auto lg = std::make_shared<LoweredGraph>(lower_pending(order, outputs));
    std::vector<std::shared_ptr<Buffer>> inputs = input_buffers(*lg);
    lg->inputs.clear();
    const Plan& plan = lg->plan;
    bool keep = in_transform();
    auto work = execute_async(plan, lg, std::move(inputs), [outputs, pending, keep](RunResult r) {
      publish_results(outputs, r, pending, keep);
    });
    if (work) attach_pending(pending, work);
  } catch (...) {
    {
      std::lock_guard<std::mutex> relock(g_mu);
      for (const Array& a : pending) a.node()->in_flight = false;
    }
    g_cv.notify_all();
    throw;
  }
}

void evaluate(const std::vector<Array>& arrays, bool async) {
  if (is_tracing()) {
    for (const Array& a : arrays)
      if (!is_done(*a.node()))
        throw_error(
            "eval: cannot evaluate while a compiled function is being traced: its inputs are "
            "placeholders without data. Return the arrays from the function instead.");
  }
  bool ready = true;  // the common case, evaluating a compiled call's outputs: no lock at all
  for (const Array& a : arrays) ready = ready && a.is_evaluated();
  if (ready) return async ? void() : rethrow_first_error(arrays);
  std::unique_lock<std::mutex> lock(g_mu);
  std::vector<Array> pending, order;
  NodeTable<int> refs;  // references from inside this evaluation
  for (;;) {
    bool all_done = true;
    for (const Array& a : arrays) all_done = all_done && is_done(*a.node());
    if (all_done) {  // nothing to run: the common case of evaluating a compiled call's outputs
      lock.unlock();
      if (!async) rethrow_first_error(arrays);
      return;
    }
    order = topological_order(arrays, [](const ArrayNode& n) { return is_done(n) || n.in_flight; });
    bool wait = false;
    std::shared_ptr<Pending> work;  // asynchronous work computing one of them: wait for it
    for (const Array& a : order) {
      wait = wait || a.node()->in_flight;
      if (a.node()->in_flight && a.node()->pending) work = a.node()->pending;
    }
    if (!wait) break;
    if (work) {
      lock.unlock();
      work->wait();
      work.reset();
      lock.lock();
    } else {
      g_cv.wait(lock);
    }
  }
  for (const Array& a : arrays) refs.at(a.node().get())++;
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
    for (const Array& in : n.inputs) refs.at(in.node().get())++;
    pending.push_back(a);
  }
  if (pending.empty()) {
    lock.unlock();
    if (!async) rethrow_first_error(arrays);
    return;
  }

  // Outputs: the requested arrays and any intermediate the user still holds a handle to, so
  // evaluating it later does not recompute it. `order` and `pending` hold one reference each.
  std::unordered_set<const ArrayNode*> wanted;
  for (const Array& a : arrays) wanted.insert(a.node().get());
  std::vector<Array> outputs;
  for (const Array& a : pending) {
    const ArrayNode* n = a.node().get();
    bool held_elsewhere = a.node().use_count() > refs.at(n) + 2;
    if (wanted.count(n) || held_elsewhere) outputs.push_back(a);
  }
  for (const Array& a : pending) a.node()->in_flight = true;
  if (async) return submit(lock, order, pending, outputs);
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
    LoweredGraph lg = lower_pending(order, outputs);
    r = execute(lg.plan, input_buffers(lg));
    finish.result = &r;
  }
  lock.unlock();
  rethrow_first_error(arrays);
}

}  // namespace

void eval(const std::vector<Array>& arrays) { evaluate(arrays, false); }
void eval(const Array& a) {
  // Already evaluated (a compiled call's output once published): no list, no lock.
  if (a.node()->ready.load(std::memory_order_acquire)) {
    if (a.node()->error) std::rethrow_exception(a.node()->error);
    return;
  }
  evaluate({a}, false);
}
void async_eval(const std::vector<Array>& arrays) { evaluate(arrays, true); }
void async_eval(const Array& a) { evaluate({a}, true); }

void mark_in_flight(const std::vector<Array>& nodes) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Array& a : nodes) a.node()->in_flight = true;
}

void attach_pending(const std::vector<Array>& nodes, const std::shared_ptr<Pending>& work) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Array& a : nodes)
    if (a.node()->in_flight) a.node()->pending = work;
}

std::shared_ptr<Buffer> in_flight_buffer(const Array& a, std::shared_ptr<Pending>* work,
                                         int* output) {
  std::lock_guard<std::mutex> lock(g_mu);  // publish_results cannot drop `pending` meanwhile
  const ArrayNode& n = *a.node();
  if (!n.in_flight || !n.pending || n.pending_output < 0) return nullptr;
  std::shared_ptr<Buffer> b = in_flight_output(*n.pending, static_cast<size_t>(n.pending_output));
  if (!b) return nullptr;
  *work = n.pending;
  *output = n.pending_output;
  return b;
}

void publish_results(const std::vector<Array>& nodes, const RunResult& r,
                     const std::vector<Array>& also_done, bool keep_inputs) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t i = 0; i < nodes.size(); ++i) {
      ArrayNode& n = *nodes[i].node();
      n.data = r.outputs[i];
      n.error = r.errors[i];
      n.ready.store(true, std::memory_order_release);
      detach(n, keep_inputs);
      n.in_flight = false;
      n.pending.reset();
      n.pending_output = -1;
    }
    for (const Array& a : also_done) {
      a.node()->in_flight = false;
      a.node()->pending.reset();
    }
  }
  g_cv.notify_all();
}

}  // namespace kiln

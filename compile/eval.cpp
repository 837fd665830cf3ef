#include "compile/eval.h"

#include <unordered_map>
#include <unordered_set>

#include "compile/graph_walk.h"
#include "compile/lower.h"
#include "graph/trace_state.h"
#include "scheduler/executor.h"

namespace kiln {

namespace {

bool is_done(const ArrayNode& n) { return n.data || n.error; }

// After evaluation the node no longer needs its inputs; dropping them frees the graph behind it.
void detach(ArrayNode& n) {
  n.inputs.clear();
  n.inputs.shrink_to_fit();
}

void eval_hook(const std::vector<Array>& arrays) { eval(arrays); }

[[maybe_unused]] const bool g_installed = [] {
  set_eval_hook(&eval_hook);
  return true;
}();

}  // namespace

void eval(const std::vector<Array>& arrays) {
  bool all_done = true;
  for (const Array& a : arrays) all_done = all_done && is_done(*a.node());
  if (all_done) {  // nothing to run: the common case of evaluating a compiled call's outputs
    for (const Array& a : arrays)
      if (a.node()->error) std::rethrow_exception(a.node()->error);
    return;
  }
  std::vector<Array> order = topological_order(arrays, is_done);
  std::vector<Array> pending;
  std::unordered_map<const ArrayNode*, int> refs;  // references from inside this evaluation
  for (const Array& a : arrays) refs[a.node().get()]++;
  for (const Array& a : order) {
    ArrayNode& n = *a.node();
    if (n.op == Op::Placeholder || is_tracing())
      throw_error(
          "eval: cannot evaluate while a compiled function is being traced: its inputs are "
          "placeholders without data. Return the arrays from the function instead.");
    if (is_done(n)) continue;
    // An input that failed earlier fails this node the same way, without running anything.
    for (const Array& in : n.inputs)
      if (in.node()->error) n.error = in.node()->error;
    if (n.error) {
      detach(n);
      continue;
    }
    for (const Array& in : n.inputs) refs[in.node().get()]++;
    pending.push_back(a);
  }

  if (!pending.empty()) {
    // Outputs: the requested arrays and any intermediate the user still holds a handle to, so
    // evaluating it later does not recompute it. `order` holds one extra reference per node.
    std::unordered_set<const ArrayNode*> wanted;
    for (const Array& a : arrays) wanted.insert(a.node().get());
    std::vector<Array> outputs;
    for (const Array& a : pending) {
      const ArrayNode* n = a.node().get();
      bool held_elsewhere = a.node().use_count() > refs[n] + 2;  // + `order` + `pending`
      if (wanted.count(n) || held_elsewhere) outputs.push_back(a);
    }
    LoweredGraph lg = lower(outputs, {}, LowerOptions{true});
    std::vector<std::shared_ptr<Buffer>> inputs;
    for (const Array& in : lg.inputs) inputs.push_back(in.node()->data);
    RunResult r = execute(lg.plan, inputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      ArrayNode& n = *outputs[i].node();
      n.data = r.outputs[i];
      n.error = r.errors[i];
    }
    for (const Array& a : outputs) detach(*a.node());
  }

  for (const Array& a : arrays)
    if (a.node()->error) std::rethrow_exception(a.node()->error);
}

void eval(const Array& a) { eval(std::vector<Array>{a}); }

}  // namespace kiln

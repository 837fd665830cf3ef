// The trace cache behind CompiledFunction, shared by a direct call and the AOT path
// (compile/aot.h): both take the same Entry and ShapePlan for the same arguments, which is why
// their placements and results cannot differ. Internal to compile/.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "compile/compile.h"
#include "executor/plan.h"
#include "graph/array_node.h"

namespace kiln {

// The input signature: dtypes and shapes (or only ranks when shapeless) of every input.
struct Signature {
  std::vector<int64_t> words;
  uint64_t hash = 0;
  bool operator==(const Signature& o) const { return words == o.words; }
};

// What of the inputs a signature covers: everything, ranks (shapeless), or dtypes only (the
// key under which a shapeless trace that holds for every rank is found).
enum class Covers { Shapes, Ranks, Dtypes };

struct SignatureHash {
  size_t operator()(const Signature& s) const { return s.hash; }
};

// A graph lowered for one set of input shapes (not the AOT `Lowered` of DESIGN.md).
struct ShapePlan {
  Plan plan;
  std::vector<Array> constants;  // plan inputs after the call inputs: captured data
  std::vector<Shape> out_shapes;
};

// One traced signature: the simplified graph, and its lowering (one per input-shape set when
// shapeless: the kernels take runtime extents, so every shape reuses the same compiled kernels).
struct Entry {
  std::vector<Array> outputs;       // simplified traced graph
  std::vector<Array> placeholders;  // call args, then captured `inputs` state
  size_t num_user_outputs = 0;
  size_t num_state_inputs = 0;  // the last placeholders: captured state, which may be donated
  std::vector<size_t> state_output_sizes;  // per `outputs` container, as the trace left it
  std::mutex mu;
  std::map<std::vector<int64_t>, std::shared_ptr<ShapePlan>> lowered;  // by input shapes
  std::shared_ptr<ShapePlan> single;  // without shapeless: the one lowering, read without a lock
  bool any_rank = false;              // shapeless and its shapes replay for inputs of any rank
};

// Runs a lowering with `inputs` (call arguments, then captured state) bound to its plan inputs,
// the captured constants after them; outputs live on the lanes that made them. Returns once
// the plan is submitted (executor/executor.h execute_async): the outputs are in flight until
// it completes, and eval, item() and to_vector() wait for them. Inputs still in flight are
// waited for first. `before_submit` sees the outputs before the plan is submitted (compile
// writes captured state back there): with the old state arrays gone and `inputs` dropped, the
// executor may write outputs into buffers nobody else holds (buffer donation).
// Should the submission fail (nothing ran), `on_failure` gets the input buffers back, the
// outputs carry the error, and the error propagates.
using BeforeSubmit = std::function<void(const std::vector<Array>& outputs)>;
using OnSubmitFailure = std::function<void(const std::vector<std::shared_ptr<Buffer>>& inputs)>;
std::vector<Array> run_plan(const std::shared_ptr<const ShapePlan>& e, std::vector<Array> inputs,
                            const BeforeSubmit& before_submit = {},
                            const OnSubmitFailure& on_failure = {});

struct CompiledFunction::Impl {
  Fn fn;
  CompileOptions options;
  mutable std::shared_mutex mu;
  mutable std::unordered_map<Signature, std::shared_ptr<Entry>, SignatureHash> cache;
  // Shapeless traces that replay for any rank, by the inputs' count and dtypes.
  mutable std::unordered_map<Signature, std::shared_ptr<Entry>, SignatureHash> any_rank;
  mutable size_t traces = 0;

  std::vector<Array> state_inputs() const {
    std::vector<Array> s;
    for (auto* v : options.inputs) s.insert(s.end(), v->begin(), v->end());
    return s;
  }

  std::shared_ptr<Entry> trace(const std::vector<Array>& args,
                               const std::vector<Array>& state) const;
  std::shared_ptr<ShapePlan> lowered_for(Entry& e, const std::vector<Array>& all) const;
  // `state` is taken, not copied: the captured containers are the only other holders of the
  // old state, and run() replaces them before submitting, so their buffers can be donated.
  std::vector<Array> run(const Entry& entry, const std::shared_ptr<const ShapePlan>& e,
                         const std::vector<Array>& args, std::vector<Array> state) const;
  // The trace and lowering that serve `args` (and `state`): from the cache, or traced now.
  std::pair<std::shared_ptr<Entry>, std::shared_ptr<ShapePlan>> prepare(
      const std::vector<Array>& args, const std::vector<Array>& state) const;
};

}  // namespace kiln

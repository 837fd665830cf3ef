// kiln::compile: trace a function over placeholder arrays once per input signature, simplify and
// fuse the graph, lower it to a Plan, and run that Plan at every call on the caller's current
// stream. The cache is keyed by the number, dtypes and shapes of the inputs (and of the captured
// `inputs` state); a stream change never retraces. Captured state listed in `inputs` is re-read
// and state in `outputs` written back at every call; other captured arrays are constants.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graph/array.h"

namespace kiln {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

struct CompileOptions {
  bool shapeless = false;
  // "= {}" lets callers name only some fields ({.shapeless = true}) without -Wextra warnings.
  std::vector<std::vector<Array>*> inputs = {};   // implicit inputs, re-read at every call
  std::vector<std::vector<Array>*> outputs = {};  // implicit outputs, written back at every call
};

class Lowered;

class CompiledFunction {
 public:
  // Runs the function: from the cache, or tracing it first for a new input signature. Called
  // while another compiled function is being traced, it inlines into that trace so the outer
  // compile optimises across it. Returns once the work is submitted: the outputs are lazy
  // arrays computed asynchronously, and reading one (item, to_vector, eval) waits for it.
  std::vector<Array> operator()(const std::vector<Array>& args) const;

  // How many times the function has been traced (each trace runs the user function once).
  size_t cache_size() const;

  // Ahead of time (compile/aot.h): traces for these arguments (or takes the cached trace) and
  // lowers, running nothing. Only the arguments' count, dtypes and shapes matter.
  Lowered lower(const std::vector<Array>& example_args) const;

  struct Impl;

 private:
  friend CompiledFunction compile(Fn fn, CompileOptions options);
  std::shared_ptr<Impl> impl_;
};

CompiledFunction compile(Fn fn, CompileOptions options = {});

// Run compiled functions eagerly (the user function on every call), e.g. for debugging.
// KILN_DISABLE_COMPILE=1 in the environment starts with compilation disabled.
void disable_compile();
void enable_compile();
bool compile_enabled();

}  // namespace kiln

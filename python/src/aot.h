// Ahead of time from Python (JAX's stages): kiln.Lowered and kiln.Executable wrap the C++ Lowered
// and Executable with the Python trees a call takes and returns. A stage lowered from a
// kiln.CompiledFunction keeps its argument and result trees, and runs captured state through the
// function it came from; one loaded from a file has no trees (the artifact is the C++ one, which
// `kiln run` and Executable::load read too): it takes arrays and returns a list of arrays.
#pragma once

#include <functional>

#include "kiln_py.h"

namespace kiln::py {

using ArrayFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

struct Stage {
  nb::object args_structure = nb::none();  // flatten((args, kwargs)) of the lowering; None: loaded
  nb::object out_structure = nb::none();   // the result's tree; None: loaded (a list)
  // The kiln.CompiledFunction when it captures `inputs`/`outputs` state, else None: a call
  // loads that state, runs, and writes it back as a direct call of the function does.
  nb::object owner = nb::none();
  nb::object state_structure = nb::none();  // the `outputs` tree the trace left (with owner)
  // The lowering's arguments were this many arrays, positionally (-1: other trees): a call like
  // that skips building and comparing the tree, as a direct call of the function does.
  int positional_arrays = -1;
};

// Runs `run(args)` the way a call of the stateful compiled function `stage.owner` runs its C++
// function (its lock, its captured inputs read, its outputs written back). In compile.cpp.
std::vector<Array> run_with_state(const Stage& stage, const std::vector<Array>& args,
                                  const ArrayFn& run);

// Wraps a C++ Lowered for Python (what CompiledFunction.lower returns).
nb::object make_lowered(Lowered lowered, Stage stage);

}  // namespace kiln::py

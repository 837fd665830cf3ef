// Eager evaluation: lower the unevaluated part of an array graph with one kernel per primitive and
// run it. eval blocks until the arrays are ready (waiting for asynchronous work computing them,
// such as a compiled call's outputs) and raises the first error among them (other arrays,
// including the rest of `arrays`, stay usable and keep their results). async_eval (MLX's name)
// starts the work and returns at once; eval, item() and to_vector() wait for it and raise its
// errors. Work on one lane returns at once; a graph that spans lanes runs before async_eval
// returns, and arrays whose inputs are still being computed wait for those first.
#pragma once

#include <vector>

#include "graph/array.h"

namespace kiln {

void eval(const std::vector<Array>& arrays);
void eval(const Array& a);
void async_eval(const std::vector<Array>& arrays);
void async_eval(const Array& a);

}  // namespace kiln

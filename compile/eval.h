// Eager evaluation: lower the unevaluated part of an array graph with one kernel per primitive and
// run it. Blocks until the arrays are ready; raises the first error among them (other arrays,
// including the rest of `arrays`, stay usable and keep their results).
#pragma once

#include <vector>

#include "graph/array.h"

namespace kiln {

void eval(const std::vector<Array>& arrays);
void eval(const Array& a);

}  // namespace kiln

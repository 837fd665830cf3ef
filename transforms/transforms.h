// Function transforms: reverse mode (vjp, grad, value_and_grad), forward mode (jvp) and
// vectorising map (vmap). Each takes and returns functions over Arrays, so they compose with each
// other and with compile in any order: compile(grad(f)), grad(compile(f)), vmap(grad(f)), grad
// of grad. The per-primitive rules they apply live in transforms/rules.h.
#pragma once

#include <utility>
#include <vector>

#include "compile/compile.h"

namespace kiln {

using ValueAndGradFn =
    std::function<std::pair<std::vector<Array>, std::vector<Array>>(const std::vector<Array>&)>;

// f's outputs at `primals`, and the cotangent of each primal: the sum over outputs of
// cotangent[j] times d output[j] / d primal. One cotangent per output, of the output's shape.
// Integer and bool primals get zeros (no gradient flows into them, as in JAX).
std::pair<std::vector<Array>, std::vector<Array>> vjp(const Fn& f,
                                                      const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents);

// f's outputs at `primals`, and each output's tangent: the derivative of f along `tangents`
// (one per primal, of the primal's shape).
std::pair<std::vector<Array>, std::vector<Array>> jvp(const Fn& f,
                                                      const std::vector<Array>& primals,
                                                      const std::vector<Array>& tangents);

// A function returning (f's outputs, the gradient of f's first output with respect to each
// argument in `argnums`). The first output must be a scalar (0-d or one element).
ValueAndGradFn value_and_grad(const Fn& f, std::vector<int> argnums = {0});

// The gradients of value_and_grad alone.
Fn grad(const Fn& f, std::vector<int> argnums = {0});

// f mapped over an axis of its arguments: in_axes[i] is the mapped axis of argument i (-1: not
// mapped, the same value for every element), out_axes[j] where the mapped axis goes in output j
// (-1: the output does not depend on the mapped axis). Empty lists mean axis 0 everywhere.
// Runs f once, on the first element, and rewrites its graph with each primitive's batching rule.
Fn vmap(const Fn& f, std::vector<int> in_axes = {}, std::vector<int> out_axes = {});

}  // namespace kiln

// Pytrees as MLX and JAX define them: nested lists, tuples and dicts whose leaves are arrays (and,
// for compile's cache key, other constants). Flattening gives the arrays in a fixed order plus a
// hashable structure that rebuilds the same tree around new arrays.
#pragma once

#include "kiln_py.h"

namespace kiln::py {

struct Flat {
  std::vector<Array> arrays;
  // Hashable and comparable: the tree's shape with every array leaf replaced by a marker and
  // every other leaf kept as itself (so non-array arguments take part in compile's cache key).
  nb::object structure;
};

// `strict`: every leaf must be an array (raise naming the path otherwise); else other leaves are
// constants kept in the structure. Python scalars count as constants, not arrays.
Flat flatten(nb::handle tree, bool strict = false, const char* what = "argument");
// The tree `structure` describes with its array markers replaced by `arrays`, in order.
nb::object unflatten(nb::handle structure, const std::vector<Array>& arrays);
// The array leaves of `tree`, replaced in place (lists and dicts are mutated; tuples rebuilt and
// stored back into their mutable parents) by `arrays` in flatten order. Used to write captured
// compile state back into the user's containers.
void assign_leaves(nb::handle tree, const std::vector<Array>& arrays);

}  // namespace kiln::py

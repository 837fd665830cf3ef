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

// Which leaves besides arrays a tree may hold (kept as constants in the structure).
enum class Leaves {
  Arrays,     // arrays only (raise naming the path otherwise)
  Constants,  // also None, bool, int, float and str: compile's arguments and results
  Any,        // anything (eval and export_to_dot look for arrays and skip the rest)
};
// Python scalars count as constants, not arrays. Lists, tuples (named tuples and other tuple
// subclasses rebuild as their type) and dicts are containers.
Flat flatten(nb::handle tree, Leaves leaves = Leaves::Any, const char* what = "argument");
// A deep copy of the tree's containers with `arrays` as its leaves (flatten's structure).
// replace_contents makes the mutable containers of `tree` hold what `like` holds, in place:
// dicts and lists get like's items (tuples are descended into), so the user's objects see it.
void replace_contents(nb::handle tree, nb::handle like);
// The tree `structure` describes with its array markers replaced by `arrays`, in order.
nb::object unflatten(nb::handle structure, const std::vector<Array>& arrays);
// The array leaves of `tree`, replaced in place (lists and dicts are mutated; tuples rebuilt and
// stored back into their mutable parents) by `arrays` in flatten order.
void assign_leaves(nb::handle tree, const std::vector<Array>& arrays);

}  // namespace kiln::py

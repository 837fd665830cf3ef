// What the transforms know about each primitive: its derivative in reverse mode (vjp) and
// forward mode (jvp), and how it batches under vmap. One entry per Op, filled per family in
// transforms/rules/, beside the compile-side entry of the same family (compile/rules.h); the
// transforms (autodiff.cpp, vmap.cpp) only ask this table.
#pragma once

#include <optional>
#include <vector>

#include "graph/array_node.h"

namespace kiln {

// A value inside vmap: `mapped` says whether axis 0 is the mapped axis.
struct Batched {
  Array value;
  bool mapped = false;
};

using MaybeArray = std::optional<Array>;

// A primitive's entry. Every field is set: a primitive without a derivative says so by
// returning nullopt (see the comments below).
struct TransformRules {
  // Reverse mode: the cotangent of each input, given the node `n` (output `out`) and the
  // output's cotangent `ct`; nullopt for an input with no derivative.
  std::vector<MaybeArray> (*vjp)(const ArrayNode& n, const Array& out, const Array& ct) = nullptr;
  // Forward mode: the output's tangent given each input's (nullopt: zero); nullopt for zero.
  MaybeArray (*jvp)(const ArrayNode& n, const Array& out,
                    const std::vector<MaybeArray>& tangents) = nullptr;
  // Batching: the node applied to inputs some of which carry a leading mapped axis of `size`.
  Batched (*vmap)(const ArrayNode& n, const std::vector<Batched>& inputs, int64_t size) = nullptr;
};

const TransformRules& transform_rules(Op op);

// The family tables (transforms/rules/*.cpp); transform_rules() picks from them.
extern const TransformRules kUnaryTransforms, kBinaryTransforms, kSelectTransforms, kCastTransforms;
extern const TransformRules kReduceTransforms, kCountTransforms;
extern const TransformRules kReshapeTransforms, kTransposeTransforms, kBroadcastTransforms,
    kSliceTransforms, kConcatenateTransforms;
extern const TransformRules kMatmulTransforms;
extern const TransformRules kSortTransforms, kArgsortTransforms, kScanTransforms, kGatherTransforms,
    kScatterAddTransforms;
extern const TransformRules kSourceTransforms;  // Constant, Placeholder, Full, Arange
extern const TransformRules kRandomTransforms;
extern const TransformRules kCollectiveTransforms;  // AllReduce .. Recv

// Helpers the transform rules share (transforms/rules/common.cpp).
namespace rule {
// Sums `g` (of a broadcast result's shape) down to `shape`, the shape an input had before
// implicit broadcasting.
Array unbroadcast(const Array& g, const Shape& shape);
// A mapped value with unit axes inserted after the mapped axis, so that its unmapped part has
// `rank` axes and it broadcasts against unmapped values by NumPy's trailing alignment.
Array align_mapped(const Batched& b, int rank);
// The mapped value of `b`: itself, or an unmapped value broadcast along a new leading axis.
Array materialize(const Batched& b, int64_t size);
Shape prepend(int64_t size, const Shape& s);
bool differentiable(Dtype d);  // floating-point: cotangents and tangents flow through it
// Zeros standing for "no derivative" where a value is required.
Array zeros_for(const Array& like);
}  // namespace rule

}  // namespace kiln

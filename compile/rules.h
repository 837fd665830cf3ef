// What compile knows about each primitive beyond its record in the graph, one table entry per
// Op: its shape rule (shapeless replay), whether it replays for any rank, how fusion reads and
// emits it inside a kernel, the launch values of its kernel alone and its algebraic
// simplifications. Each family fills its entries in one file under compile/rules/, and the
// passes and fusion only ask the table. Derivative and batching rules are the transforms' own
// table (transforms/rules.h). A new primitive is its Op (graph/primitives.h, its op in
// graph/ops.h), an entry in each table and its tests (and, for a new scalar function, its line
// in backends/scalar_ops.h and each backend's renderer).
#pragma once

#include <optional>
#include <vector>

#include "compile/emit_context.h"
#include "compile/view.h"
#include "graph/array_node.h"

namespace kiln {

// What a simplification rule may ask about the node `node` it simplifies (compile/passes.cpp
// builds one per node).
struct SimplifyContext {
  const ArrayNode& node;
  // The graph must serve every shape (compile's shapeless): a rule applies only if it holds for
  // all of them.
  bool shapeless;
  // Whether `x` has the node's shape and dtype, so that it can stand for the node.
  bool same_type(const Array& x) const {
    return x.shape() == node.shape && x.dtype() == node.dtype;
  }
  // Whether every element of `c` is known to equal `v` (a fill, a small constant). Under
  // shapeless only 0-d values qualify: another value could broadcast differently at other shapes.
  bool all_equal(const Array& c, double v) const;
};

// A primitive's entry. Entries name their fields (designated initialisers); a field left out is
// false or nullptr, which the comments below give a meaning where one is optional.
struct PrimitiveRules {
  // The node's shape when its inputs have the shapes of `inputs` (shapeless compile replays a
  // trace with new input shapes); raises kiln::Error when the trace fixed a shape.
  Shape (*shape)(const ArrayNode& n, const std::vector<Array>& inputs) = nullptr;
  // The shape follows from the inputs' by broadcasting alone, so a shapeless trace serves
  // inputs of any rank.
  bool any_rank = false;
  // Each element is computed from the same element of its inputs, broadcast (unary and binary
  // functions, where, astype): a reduction's epilogue may absorb it (compile/fusion_plan.cpp).
  bool elementwise = false;
  // Fusion: whether a kernel computes the node inline from views of its inputs (element-wise
  // ops, views, fills, draws); the others are stored by kernels or library calls of their own.
  bool fuses_inline = false;
  // The view at which a kernel computing the node at view `v` reads input `i`; nullopt when it
  // does not read that input through a view (see compile/fusion_plan.h).
  std::optional<View> (*input_view)(const ArrayNode& n, size_t i, const View& v) = nullptr;
  // Kernel IR for the node computed inline in a kernel (compile/kernel_emit.cpp asks); nullptr
  // for primitives that are stored by kernels or library calls of their own.
  int (*emit)(EmitContext& cx, const ArrayNode& n) = nullptr;
  // The launch values of the node's kernel when it is emitted alone (eager evaluation reuses a
  // kernel of the same structure with these, compile/eager_kernels.cpp), in the order `emit`
  // asks for them. nullptr: the values of its 0-d constant inputs, each node once.
  std::vector<int64_t> (*launch_values)(const ArrayNode& n) = nullptr;
  // An equivalent, simpler value for the node `a` (x * 1 is x), or nullopt; nullptr: none.
  // compile/passes.cpp asks after rewriting the node's inputs, before folding and CSE.
  std::optional<Array> (*simplify)(const Array& a, const SimplifyContext& cx) = nullptr;
};

const PrimitiveRules& rules(Op op);

// The array a fused Gather reads its table from when the table itself is not stored: the input
// of a broadcast that keeps the gathered axis (take_along_axis broadcasts a table with extent-1
// axes against the indices), read in place through the broadcast's view; else the table.
const ArrayNode& gathered_table_source(const ArrayNode& gather);

// The family tables (compile/rules/*.cpp); rules() picks from them.
extern const PrimitiveRules kUnaryRules, kBinaryRules, kSelectRules, kCastRules;
extern const PrimitiveRules kReduceRules, kCountRules;
extern const PrimitiveRules kReshapeRules, kTransposeRules, kBroadcastRules, kSliceRules,
    kConcatenateRules;
extern const PrimitiveRules kMatmulRules;
extern const PrimitiveRules kNativeRules, kGatherRules;  // Sort, Argsort, Scan, ScatterAdd; Gather
extern const PrimitiveRules kCollectiveRules;            // AllReduce .. Recv
extern const PrimitiveRules kSourceRules;                // Constant, Placeholder
extern const PrimitiveRules kFullRules, kArangeRules, kRandomRules;

// Helpers the rules share (compile/rules/common.cpp).
namespace rule {
// A copy of `n` with new inputs and shape (same op, params, dtype and stream).
Array remake(const ArrayNode& n, Shape shape, std::vector<Array> inputs, Params p);
// Raises the error of a shapeless trace whose node `n` fixed a shape the new inputs break.
[[noreturn]] void baked(const ArrayNode& n, const std::string& what);
// The input view of element-wise ops and broadcast_to: `v` broadcast back to input i's shape.
std::optional<View> broadcast_view(const ArrayNode& n, size_t i, const View& v);
std::optional<View> no_view(const ArrayNode& n, size_t i, const View& v);
}  // namespace rule

}  // namespace kiln

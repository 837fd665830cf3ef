// The primitives an array graph is built from. ops.h is the user-facing layer (checking,
// broadcasting, promotion); every op there becomes one of these nodes. Passes, fusion, lowering
// and the AOT text form all work on this small closed set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/scalar.h"

namespace kiln {

enum class UnaryOp : uint8_t {
  Negative,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Erf,
  Sigmoid,
  Floor,
  Ceil,
  LogicalNot,
  BitwiseInvert  // ~x on bool and integers (bool: logical not)
};
enum class BinaryOp : uint8_t {
  Add,
  Subtract,
  Multiply,
  Divide,
  Power,
  Maximum,
  Minimum,
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  LogicalAnd,
  LogicalOr,
  // NumPy's floor division and remainder (backends/scalar_ops.h has the rules for zero
  // divisors and INT_MIN / -1), then the bitwise ops of bool and integers; shifts define every
  // count (a count outside [0, width) shifts everything out).
  FloorDivide,
  Remainder,
  BitwiseAnd,
  BitwiseOr,
  BitwiseXor,
  LeftShift,
  RightShift
};
inline constexpr int kNumUnaryOps = static_cast<int>(UnaryOp::BitwiseInvert) + 1;
inline constexpr int kNumBinaryOps = static_cast<int>(BinaryOp::RightShift) + 1;
enum class ReduceOp : uint8_t { Sum, Max, Min, Prod, Argmax };
// Uniform [0, 1) and standard normal floats, and the raw 64 bits (uint64: keys from split).
enum class RandomDist : uint8_t { Uniform, Normal, Bits };
// The combining function of a scan (cumsum, cumprod, cummax, cummin, logcumsumexp).
enum class ScanOp : uint8_t { Sum, Prod, Max, Min, LogAddExp };
// How a reshape was asked for; shapeless compile re-derives the shape from it for new inputs.
enum class ReshapeKind : uint8_t { Explicit, Flatten, Squeeze, ExpandDims };

enum class Op : uint8_t {
  Constant,     // data supplied by the user; always evaluated
  Placeholder,  // a traced input of a compiled function; never has data
  Full,         // every element = params.value
  Arange,       // element i = params.value + i * params.step (along the only axis)
  Random,       // counter-based draw of params.dist: its key is inputs[0] (a 0-d uint64
                // array) when it has an input, else params.key
  Unary,        // params.unary on inputs[0] (inputs broadcast to the node's shape)
  Binary,       // params.binary on inputs[0], inputs[1]
  Select,       // inputs[0] ? inputs[1] : inputs[2]
  Cast,         // inputs[0] converted to the node's dtype
  Reduce,       // params.reduce over params.axes (sorted); params.keepdims
  Reshape,      // same elements in row-major order, the node's shape
  Transpose,    // params.axes is the permutation
  Broadcast,    // inputs[0] broadcast to the node's shape
  Slice,        // params.start/stop/step per axis
  Concatenate,  // along params.axes[0]
  Matmul,       // NumPy matmul semantics (batch broadcast, 1-D promotion)
  Count,        // 0-d: the number of elements of inputs[0] over params.axes (for mean)
  // Native (library) primitives: each runs as one backend call, not as fused Kernel IR.
  // params.axes[0] is the axis they work along.
  Sort,        // inputs[0] sorted along the axis (stable, NaN last; params.descending)
  Argsort,     // int64 positions that sort inputs[0] along the axis (same order as Sort)
  Scan,        // params.scan running along the axis (params.reverse, params.inclusive)
  Gather,      // out[.., j.., ..] = in0[.., idx, ..], idx = inputs[1][j..] (shared by every
               // row, any rank: their axes replace the gathered one) or inputs[1][.., j, ..]
               // (the output's shape); gather_shares_indices tells which; indices as take's rule
  ScatterAdd,  // inputs[0] with inputs[2] added at the positions inputs[1] names (as Gather's)
  // Collectives (distributed/): library calls too, run by the group's communication lane in the
  // plan's order, never fused or folded. params.group names the group (distributed/group.h),
  // params.peer the other rank of Send and Recv.
  AllReduce,   // params.reduce (Sum, Max, Min) of inputs[0] over the group's ranks
  AllGather,   // every rank's inputs[0] concatenated along axis 0, in rank order
  SumScatter,  // the sum over ranks of inputs[0], split along axis 0 into this rank's part
  Send,        // inputs[0] sent to rank params.peer; its value is inputs[0]
  Recv,        // received from rank params.peer (no inputs; the node's shape and dtype)
};

// Sort, Argsort, Scan, Gather, ScatterAdd and the collectives: computed by a library call of
// their own.
bool is_native(Op op);
// AllReduce, AllGather, SumScatter, Send and Recv.
bool is_collective(Op op);

struct Params {
  UnaryOp unary = UnaryOp::Negative;
  BinaryOp binary = BinaryOp::Add;
  ReduceOp reduce = ReduceOp::Sum;
  RandomDist dist = RandomDist::Uniform;
  bool keepdims = false;
  std::vector<int> axes;
  std::vector<int64_t> start, stop, step;
  Scalar value;       // Full, Arange start
  Scalar step_value;  // Arange step
  uint64_t key = 0;   // Random
  ReshapeKind reshape = ReshapeKind::Explicit;
  std::vector<int64_t> shape;  // Reshape: the requested shape (may hold -1); Broadcast: target
  ScanOp scan = ScanOp::Sum;   // Scan
  bool descending = false;     // Sort, Argsort
  bool reverse = false;        // Scan: from the end of the axis
  bool inclusive = true;       // Scan: element i's own value counts at i
  int group = 0;               // collectives: the group's id (0: the world)
  int peer = -1;               // Send: the destination rank; Recv: the source rank
  // Broadcast to the input's own shape that the transforms treat as a constant: no cotangent
  // or tangent flows through it (stop_gradient). Everywhere else it is the identity it looks.
  bool stop_gradient = false;

  bool operator==(const Params& o) const;
};

const char* op_name(Op op);
const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(ReduceOp op);
const char* op_name(RandomDist dist);  // "uniform", "normal", "bits"
const char* op_name(ScanOp op);
// Name of a node for profiles and text: "exp", "add", "sum", "reshape".
std::string primitive_name(Op op, const Params& p);

// Whether a Gather's indices are shared by every row (take) rather than one per output element
// (take_along_axis), from the ranks of its table, indices and output: shared ones replace the
// gathered axis with theirs, so only 1-D shared indices keep the table's rank, and per-row
// ones always have it.
inline bool gather_shares_indices(size_t table_rank, size_t index_rank, size_t out_rank) {
  return index_rank == 1 || out_rank != table_rank;
}

bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);
// and, or, xor and the shifts: defined for bool and integer operands only.
bool is_bitwise(BinaryOp op);

}  // namespace kiln

#include "graph/primitives.h"

namespace kiln {

bool Params::operator==(const Params& o) const {
  return unary == o.unary && binary == o.binary && reduce == o.reduce && dist == o.dist &&
         keepdims == o.keepdims && axes == o.axes && start == o.start && stop == o.stop &&
         step == o.step && value == o.value && step_value == o.step_value && key == o.key &&
         reshape == o.reshape && shape == o.shape && scan == o.scan && descending == o.descending &&
         reverse == o.reverse && inclusive == o.inclusive && group == o.group && peer == o.peer &&
         stop_gradient == o.stop_gradient;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Constant: return "constant";
    case Op::Placeholder: return "placeholder";
    case Op::Full: return "full";
    case Op::Arange: return "arange";
    case Op::Random: return "random";
    case Op::Unary: return "unary";
    case Op::Binary: return "binary";
    case Op::Select: return "where";
    case Op::Cast: return "astype";
    case Op::Reduce: return "reduce";
    case Op::Reshape: return "reshape";
    case Op::Transpose: return "transpose";
    case Op::Broadcast: return "broadcast_to";
    case Op::Slice: return "slice";
    case Op::Concatenate: return "concatenate";
    case Op::Matmul: return "matmul";
    case Op::Count: return "count";
    case Op::Sort: return "sort";
    case Op::Argsort: return "argsort";
    case Op::Scan: return "scan";
    case Op::Gather: return "gather";
    case Op::ScatterAdd: return "scatter_add";
    case Op::AllReduce: return "all_reduce";
    case Op::AllGather: return "all_gather";
    case Op::SumScatter: return "sum_scatter";
    case Op::Send: return "send";
    case Op::Recv: return "recv";
  }
  return "?";
}

const char* op_name(UnaryOp op) {
  static const char* names[] = {"negative", "abs",   "exp",  "log",         "sqrt",
                                "rsqrt",    "sin",   "cos",  "tanh",        "erf",
                                "sigmoid",  "floor", "ceil", "logical_not", "bitwise_invert"};
  return names[static_cast<int>(op)];
}

const char* op_name(BinaryOp op) {
  static const char* names[] = {
      "add",           "subtract",    "multiply",   "divide",       "power",      "maximum",
      "minimum",       "equal",       "not_equal",  "less",         "less_equal", "greater",
      "greater_equal", "logical_and", "logical_or", "floor_divide", "remainder",  "bitwise_and",
      "bitwise_or",    "bitwise_xor", "left_shift", "right_shift"};
  return names[static_cast<int>(op)];
}

const char* op_name(ReduceOp op) {
  static const char* names[] = {"sum", "max", "min", "prod", "argmax"};
  return names[static_cast<int>(op)];
}

const char* op_name(RandomDist dist) {
  static const char* names[] = {"uniform", "normal", "bits"};
  return names[static_cast<int>(dist)];
}

const char* op_name(ScanOp op) {
  static const char* names[] = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"};
  return names[static_cast<int>(op)];
}

bool is_native(Op op) {
  return op == Op::Sort || op == Op::Argsort || op == Op::Scan || op == Op::Gather ||
         op == Op::ScatterAdd || is_collective(op);
}

bool is_collective(Op op) {
  return op == Op::AllReduce || op == Op::AllGather || op == Op::SumScatter || op == Op::Send ||
         op == Op::Recv;
}

std::string primitive_name(Op op, const Params& p) {
  switch (op) {
    case Op::Unary: return op_name(p.unary);
    case Op::Binary: return op_name(p.binary);
    case Op::Reduce: return op_name(p.reduce);
    case Op::Random: return op_name(p.dist);
    case Op::Scan: return op_name(p.scan);
    case Op::AllReduce:
      return p.reduce == ReduceOp::Max   ? "all_max"
             : p.reduce == ReduceOp::Min ? "all_min"
                                         : "all_sum";
    case Op::Broadcast: return p.stop_gradient ? "stop_gradient" : op_name(op);
    default: return op_name(op);
  }
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::NotEqual || op == BinaryOp::Less ||
         op == BinaryOp::LessEqual || op == BinaryOp::Greater || op == BinaryOp::GreaterEqual;
}

bool is_logical(BinaryOp op) { return op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr; }

bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor ||
         op == BinaryOp::LeftShift || op == BinaryOp::RightShift;
}

}  // namespace kiln

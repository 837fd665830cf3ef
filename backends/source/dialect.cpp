#include "backends/source/dialect.h"

#include "backends/source/emitter.h"

namespace kiln::source {

const Kernel& Dialect::kernel() const { return em_->kernel(); }

Dtype Dialect::dtype_of(int value) const { return kernel().body[value].dtype; }

std::string Dialect::address(const IndexMap& m) {
  std::string s = dim(m.offset);
  for (size_t a = 0; a < m.strides.size(); ++a)
    if (!(m.strides[a] == Dim::constant(0)))
      s += " + i" + std::to_string(a) + " * " + dim(m.strides[a]);
  return s;
}

std::string Dialect::define(Dtype d, const std::string& name, const std::string& e) {
  return value_type(d) + " " + name + " = " + e + ";";
}

std::string Dialect::select(const Value& v) {
  return "(" + name(v.a) + " ? " + name(v.b) + " : " + name(v.c) + ")";
}

std::string Dialect::float_arith(BinaryOp op, const std::string& a, const std::string& b) {
  switch (op) {
    case BinaryOp::Add: return "(" + a + " + " + b + ")";
    case BinaryOp::Subtract: return "(" + a + " - " + b + ")";
    case BinaryOp::Multiply: return "(" + a + " * " + b + ")";
    case BinaryOp::Divide: return "(" + a + " / " + b + ")";
    // NaN propagates (scalar_ops.h): a NaN `a` is chosen, a NaN `b` wins every comparison.
    case BinaryOp::Maximum:
      return "((isnan(" + a + ") || " + a + " > " + b + ") ? " + a + " : " + b + ")";
    case BinaryOp::Minimum:
      return "((isnan(" + a + ") || " + a + " < " + b + ") ? " + a + " : " + b + ")";
    default: return "";
  }
}

std::string Dialect::compare(const Value& v, const std::string& a, const std::string& b) {
  BinaryOp op = v.binary;
  const char* o = op == BinaryOp::Equal          ? "=="
                  : op == BinaryOp::NotEqual     ? "!="
                  : op == BinaryOp::Less         ? "<"
                  : op == BinaryOp::LessEqual    ? "<="
                  : op == BinaryOp::Greater      ? ">"
                  : op == BinaryOp::GreaterEqual ? ">="
                                                 : nullptr;
  if (!o) return "";
  // An integer compared with itself is a constant, and written as one: clang (PoCL's compiler)
  // warns "self-comparison always evaluates to ...". A float one stays: it is a NaN test.
  if (v.a == v.b && !dtype_of(v.a).is_float()) {
    bool equal_holds =
        op == BinaryOp::Equal || op == BinaryOp::LessEqual || op == BinaryOp::GreaterEqual;
    return "(" + bool_literal(equal_holds) + ")";
  }
  return "(" + a + " " + o + " " + b + ")";
}

std::string Dialect::float_unary(UnaryOp op, const std::string& a) {
  switch (op) {
    case UnaryOp::Negative: return "(-" + a + ")";
    case UnaryOp::Sqrt: return "sqrt(" + a + ")";
    case UnaryOp::Floor: return "floor(" + a + ")";
    case UnaryOp::Ceil: return "ceil(" + a + ")";
    default: return "";
  }
}

}  // namespace kiln::source

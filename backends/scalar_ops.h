// Kiln's scalar semantics, written once in plain C++: what every element-wise op, cast and
// reduction step means for each dtype. The reference backend executes these directly; code
// generators (LLVM, OpenCL C, GLSL) must agree with them, and the differential tests check it.
// Representation, rounding, wrapping and casts are in graph/element.h (shared with the graph).
//  - float32 math is computed in double and rounded to float32 (correctly rounded for + - * /
//    sqrt; the oracle for transcendental functions).
//  - float16 and bfloat16 are storage types: their math is float32 math, and a value is rounded
//    to the 16-bit type only when stored to a buffer or cast (astype). A fused chain of float16
//    ops rounds once, at its store (as XLA does); run op by op it rounds at every op.
//  - Integer arithmetic wraps (two's complement) in the operand's width; unsigned integers
//    compare as unsigned. Integer power with a negative (signed) exponent is 0 unless the base
//    is 1 or -1.
//  - maximum/minimum and max/min reductions propagate NaN; argmax returns the first maximum, and
//    NaN counts as the maximum.
//  - float -> int casts truncate toward zero and saturate; NaN gives 0. x -> bool is x != 0.
//  - floor_divide and remainder (NumPy's // and %): floats give floor(a / b) and
//    a - b * floor(a / b), computed in double for float32, float16 and bfloat16 (so equal to
//    NumPy's exact results while |a / b| < 2^28) and rounded once; float64 rounds each step.
//    Integers floor the quotient and give the remainder the divisor's sign; a zero divisor
//    gives 0 for both (as NumPy, without its warning), INT_MIN // -1 wraps to INT_MIN and
//    INT_MIN % -1 is 0: no kernel ever traps.
//  - Shifts take the count as unsigned: a count outside [0, width) (negative included) shifts
//    every bit out: 0, or -1 for a right shift of a negative signed value (NumPy's rule).
//    Right shifts of signed values are arithmetic. bitwise ops on bool are logical.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "graph/dtype.h"
#include "graph/element.h"
#include "graph/primitives.h"

namespace kiln::scalar {

// a < b for integer elements of dtype d (uint64 compares its bits as unsigned).
inline bool int_less(int64_t a, int64_t b, Dtype d) {
  return d == uint64 ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
}

inline Val unary(UnaryOp op, Val x, Dtype d) {
  Val r;
  if (d.is_float()) {
    double a = x.f, v = 0;
    switch (op) {
      case UnaryOp::Negative: v = -a; break;
      case UnaryOp::Abs: v = std::fabs(a); break;
      case UnaryOp::Exp: v = std::exp(a); break;
      case UnaryOp::Log: v = std::log(a); break;
      case UnaryOp::Sqrt: v = std::sqrt(a); break;
      case UnaryOp::Rsqrt: v = 1.0 / std::sqrt(a); break;
      case UnaryOp::Sin: v = std::sin(a); break;
      case UnaryOp::Cos: v = std::cos(a); break;
      case UnaryOp::Tanh: v = std::tanh(a); break;
      case UnaryOp::Erf: v = std::erf(a); break;
      case UnaryOp::Sigmoid: v = 1.0 / (1.0 + std::exp(-a)); break;
      case UnaryOp::Floor: v = std::floor(a); break;
      case UnaryOp::Ceil: v = std::ceil(a); break;
      case UnaryOp::LogicalNot: v = a == 0; break;
      case UnaryOp::BitwiseInvert: v = a; break;  // not defined on floats; ops never send it
    }
    r.f = round_to(v, d);
  } else {
    uint64_t a = static_cast<uint64_t>(x.i);
    switch (op) {
      case UnaryOp::Negative: r.i = static_cast<int64_t>(0 - a); break;
      case UnaryOp::Abs:
        r.i = x.i < 0 && !d.is_unsigned() ? static_cast<int64_t>(0 - a) : x.i;
        break;
      case UnaryOp::LogicalNot: r.i = x.i == 0; break;
      case UnaryOp::BitwiseInvert: r.i = d.is_bool() ? x.i == 0 : static_cast<int64_t>(~a); break;
      default: r.i = x.i; break;  // floor/ceil of an integer; ops never send other float ops here
    }
    r.i = wrap(r.i, d);
  }
  return r;
}

// floor(a / b) and a - b * floor(a / b) of float values (in double: see the header).
inline double float_floor_divide(double a, double b) { return std::floor(a / b); }
inline double float_remainder(double a, double b) { return a - b * std::floor(a / b); }

// Integer floor division and remainder of elements of dtype d (see the header for b == 0).
inline int64_t int_floor_divide(int64_t a, int64_t b, Dtype d) {
  if (b == 0) return 0;
  if (d.is_unsigned())
    return static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(b));
  if (b == -1) return wrap(static_cast<int64_t>(0 - static_cast<uint64_t>(a)), d);
  int64_t q = a / b;
  return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}
inline int64_t int_remainder(int64_t a, int64_t b, Dtype d) {
  if (b == 0) return 0;
  if (d.is_unsigned())
    return static_cast<int64_t>(static_cast<uint64_t>(a) % static_cast<uint64_t>(b));
  if (b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
// Shifts by a count read as unsigned; counts of the width or more shift every bit out.
inline int64_t int_shift(bool left, int64_t a, int64_t count, Dtype d) {
  uint64_t width = d.size() * 8, c = static_cast<uint64_t>(count);
  bool negative = !d.is_unsigned() && a < 0;
  if (c >= width) return left || !negative ? 0 : -1;
  if (left) return wrap(static_cast<int64_t>(static_cast<uint64_t>(a) << c), d);
  return negative ? a >> c : static_cast<int64_t>(static_cast<uint64_t>(a) >> c);
}

inline int64_t int_power(int64_t base, int64_t e, Dtype d) {
  if (e < 0 && !d.is_unsigned()) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  uint64_t result = 1, b = static_cast<uint64_t>(base), ue = static_cast<uint64_t>(e);
  while (ue) {
    if (ue & 1) result *= b;
    b *= b;
    ue >>= 1;
  }
  return wrap(static_cast<int64_t>(result), d);
}

// `d` is the operand dtype; comparisons and logical ops return bools in r.i.
inline Val binary(BinaryOp op, Val x, Val y, Dtype d) {
  Val r;
  if (d.is_float()) {
    double a = x.f, b = y.f, v = 0;
    switch (op) {
      case BinaryOp::Add: v = a + b; break;
      case BinaryOp::Subtract: v = a - b; break;
      case BinaryOp::Multiply: v = a * b; break;
      case BinaryOp::Divide: v = a / b; break;
      case BinaryOp::Power: v = std::pow(a, b); break;
      case BinaryOp::Maximum: v = std::isnan(a) || a > b ? a : b; break;
      case BinaryOp::Minimum: v = std::isnan(a) || a < b ? a : b; break;
      case BinaryOp::Equal: r.i = a == b; return r;
      case BinaryOp::NotEqual: r.i = a != b; return r;
      case BinaryOp::Less: r.i = a < b; return r;
      case BinaryOp::LessEqual: r.i = a <= b; return r;
      case BinaryOp::Greater: r.i = a > b; return r;
      case BinaryOp::GreaterEqual: r.i = a >= b; return r;
      case BinaryOp::LogicalAnd: r.i = a != 0 && b != 0; return r;
      case BinaryOp::LogicalOr: r.i = a != 0 || b != 0; return r;
      case BinaryOp::FloorDivide: v = float_floor_divide(a, b); break;
      case BinaryOp::Remainder: v = float_remainder(a, b); break;
      default: v = a; break;  // bitwise ops are not defined on floats; ops never send them
    }
    r.f = round_to(v, d);
    return r;
  }
  int64_t a = x.i, b = y.i;
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case BinaryOp::Add: r.i = static_cast<int64_t>(ua + ub); break;
    case BinaryOp::Subtract: r.i = static_cast<int64_t>(ua - ub); break;
    case BinaryOp::Multiply: r.i = static_cast<int64_t>(ua * ub); break;
    case BinaryOp::Divide:  // never emitted by ops (divide is float); defined for Kernel IR
      r.i = b == 0            ? 0
            : d.is_unsigned() ? static_cast<int64_t>(ua / ub)
            : b == -1         ? static_cast<int64_t>(0 - ua)  // INT_MIN / -1 wraps
                              : a / b;
      break;
    case BinaryOp::Power: r.i = int_power(a, b, d); break;
    case BinaryOp::Maximum: r.i = int_less(b, a, d) ? a : b; break;
    case BinaryOp::Minimum: r.i = int_less(a, b, d) ? a : b; break;
    case BinaryOp::Equal: r.i = a == b; return r;
    case BinaryOp::NotEqual: r.i = a != b; return r;
    case BinaryOp::Less: r.i = int_less(a, b, d); return r;
    case BinaryOp::LessEqual: r.i = !int_less(b, a, d); return r;
    case BinaryOp::Greater: r.i = int_less(b, a, d); return r;
    case BinaryOp::GreaterEqual: r.i = !int_less(a, b, d); return r;
    case BinaryOp::LogicalAnd: r.i = a != 0 && b != 0; return r;
    case BinaryOp::LogicalOr: r.i = a != 0 || b != 0; return r;
    case BinaryOp::FloorDivide: r.i = int_floor_divide(a, b, d); break;
    case BinaryOp::Remainder: r.i = int_remainder(a, b, d); break;
    case BinaryOp::BitwiseAnd: r.i = a & b; break;
    case BinaryOp::BitwiseOr: r.i = a | b; break;
    case BinaryOp::BitwiseXor: r.i = a ^ b; break;
    case BinaryOp::LeftShift: r.i = int_shift(true, a, b, d); break;
    case BinaryOp::RightShift: r.i = int_shift(false, a, b, d); break;
  }
  r.i = wrap(r.i, d);
  return r;
}

}  // namespace kiln::scalar

// Transform rules of the element-wise primitives: unary functions, binary operators, where and
// astype. Their derivative at an input is a factor of the output's shape, so one function per op
// gives both modes: vjp multiplies the cotangent by it (then sums back to the input's shape) and
// jvp the tangent. Subgradients: abs' (0) = 0; maximum/minimum split a tie evenly between the
// two inputs; floor, ceil, floor_divide and comparisons have derivative zero; remainder's is
// 1 and -floor(a / b).
#include <cmath>

#include "compile/rules.h"
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

using rule::differentiable;
using rule::unbroadcast;

// g times d f(x) / dx for the unary function of `n` (x its input, y its output).
MaybeArray unary_scale(const ArrayNode& n, const Array& y, const Array& g) {
  const Array& x = n.inputs[0];
  switch (n.params.unary) {
    case UnaryOp::Negative: return -g;
    case UnaryOp::Abs: return g * (astype(x > 0, g.dtype()) - astype(x < 0, g.dtype()));
    case UnaryOp::Exp: return g * y;
    case UnaryOp::Log: return g / x;
    case UnaryOp::Sqrt: return g * 0.5 / y;
    case UnaryOp::Rsqrt: return g * -0.5 * y / x;
    case UnaryOp::Sin: return g * cos(x);
    case UnaryOp::Cos: return -(g * sin(x));
    case UnaryOp::Tanh: return g * (1.0 - y * y);
    case UnaryOp::Erf: return g * (2.0 / std::sqrt(M_PI)) * exp(-(x * x));
    case UnaryOp::Sigmoid: return g * y * (1.0 - y);
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseInvert: return std::nullopt;
  }
  return std::nullopt;
}

// g times d (a op b) / d input i, at the output's shape.
MaybeArray binary_scale(const ArrayNode& n, const Array& y, const Array& g, int i) {
  const Array &a = n.inputs[0], &b = n.inputs[1];
  Dtype d = g.dtype();
  switch (n.params.binary) {
    case BinaryOp::Add: return g;
    case BinaryOp::Subtract: return i == 0 ? g : -g;
    case BinaryOp::Multiply: return g * (i == 0 ? b : a);
    case BinaryOp::Divide: return i == 0 ? g / b : -(g * y) / b;
    case BinaryOp::Power:
      if (i == 0) return g * where(b == 0, zeros({}, d), b * power(a, b - 1.0));
      return g * y * log(where(a > 0, a, ones({}, d)));
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      bool max = n.params.binary == BinaryOp::Maximum;
      const Array& self = i == 0 ? a : b;
      const Array& other = i == 0 ? b : a;
      Array wins = max ? self > other : self < other;
      return g * (astype(wins, d) + astype(self == other, d) * 0.5);
    }
    // a - b * floor(a / b): 1 and -floor(a / b) (floor's derivative is 0, as MLX and JAX).
    case BinaryOp::Remainder: return i == 0 ? g : -(g * floor_divide(a, b));
    // comparisons, logic, floor_divide (piecewise constant) and bitwise ops (integers only)
    default: return std::nullopt;
  }
}

Array fit(const Array& t, const Shape& shape) {
  return t.shape() == shape ? t : broadcast_to(t, shape);
}

std::vector<MaybeArray> unary_vjp(const ArrayNode& n, const Array& out, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt};
  return {unary_scale(n, out, ct)};
}

MaybeArray unary_jvp(const ArrayNode& n, const Array& out, const std::vector<MaybeArray>& t) {
  if (!differentiable(n.dtype) || !t[0]) return std::nullopt;
  return unary_scale(n, out, *t[0]);
}

// Every element-wise primitive batches the same way: mapped inputs get unit axes after the
// mapped one, so NumPy broadcasting lines the rest up as it did unmapped.
Batched elementwise_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  std::vector<Array> inputs;
  bool mapped = false;
  for (const Batched& b : in) {
    inputs.push_back(rule::align_mapped(b, static_cast<int>(n.shape.size())));
    mapped = mapped || b.mapped;
  }
  Shape shape = mapped ? rule::prepend(size, n.shape) : n.shape;
  return {rule::remake(n, shape, inputs, n.params), mapped};
}

std::vector<MaybeArray> binary_vjp(const ArrayNode& n, const Array& out, const Array& ct) {
  std::vector<MaybeArray> r(2);
  if (!differentiable(n.dtype)) return r;
  for (int i = 0; i < 2; ++i)
    if (MaybeArray s = binary_scale(n, out, ct, i)) r[i] = unbroadcast(*s, n.inputs[i].shape());
  return r;
}

MaybeArray binary_jvp(const ArrayNode& n, const Array& out, const std::vector<MaybeArray>& t) {
  if (!differentiable(n.dtype)) return std::nullopt;
  MaybeArray total;
  for (int i = 0; i < 2; ++i) {
    if (!t[i]) continue;
    MaybeArray s = binary_scale(n, out, *t[i], i);
    if (s) total = total ? *total + *s : *s;
  }
  if (total) total = fit(*total, n.shape);
  return total;
}

std::vector<MaybeArray> select_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  std::vector<MaybeArray> r(3);
  if (!differentiable(n.dtype)) return r;
  Array zero = zeros({}, ct.dtype());
  r[1] = unbroadcast(where(n.inputs[0], ct, zero), n.inputs[1].shape());
  r[2] = unbroadcast(where(n.inputs[0], zero, ct), n.inputs[2].shape());
  return r;
}

MaybeArray select_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!differentiable(n.dtype) || (!t[1] && !t[2])) return std::nullopt;
  Array zero = zeros({}, n.dtype);
  return fit(where(n.inputs[0], t[1] ? *t[1] : zero, t[2] ? *t[2] : zero), n.shape);
}

std::vector<MaybeArray> cast_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  Dtype from = n.inputs[0].dtype();
  if (!differentiable(from) || !differentiable(n.dtype)) return {std::nullopt};
  return {astype(ct, from)};
}

MaybeArray cast_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype)) return std::nullopt;
  return astype(*t[0], n.dtype);
}

}  // namespace

const TransformRules kUnaryTransforms{.vjp = unary_vjp, .jvp = unary_jvp, .vmap = elementwise_vmap};
const TransformRules kBinaryTransforms{
    .vjp = binary_vjp, .jvp = binary_jvp, .vmap = elementwise_vmap};
const TransformRules kSelectTransforms{
    .vjp = select_vjp, .jvp = select_jvp, .vmap = elementwise_vmap};
const TransformRules kCastTransforms{.vjp = cast_vjp, .jvp = cast_jvp, .vmap = elementwise_vmap};

}  // namespace kiln
